//! Builds `wasm32-wasip2` guest crates from a build script.
//!
//! Each guest is its own cargo workspace; it is built with `cargo build --release --locked
//! --target wasm32-wasip2` into a target directory under `OUT_DIR` (so the outer build's lock is
//! never contended), with the host's rustflags removed. Rerun lines come from the guest's
//! dep-info file, so exactly the sources that went into the wasm (path dependencies included)
//! trigger a rebuild, plus the WIT contract.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the guest crate at `crate_dir` (whose library is named `lib_name`) and returns the
/// path of the built component. `wit_dir` is tracked for changes. Panics with the build's
/// output on failure: a build script has no better way to report.
pub fn build(crate_dir: &Path, lib_name: &str, wit_dir: &Path) -> PathBuf {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set for build scripts"));
    let target_dir = out_dir.join("guests");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--release", "--locked", "--target", "wasm32-wasip2", "--manifest-path"])
        .arg(crate_dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir)
        // From the guest's folder, so its own `.cargo/config.toml` applies.
        .current_dir(crate_dir);
    for var in ["RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS", "RUSTC_WORKSPACE_WRAPPER", "CARGO_BUILD_TARGET"] {
        cmd.env_remove(var);
    }
    let output = cmd.output().unwrap_or_else(|e| panic!("could not run cargo for guest {}: {e}", crate_dir.display()));
    if !output.status.success() {
        panic!("building guest {} failed (is the target installed? `rustup target add wasm32-wasip2`):\n{}", crate_dir.display(), String::from_utf8_lossy(&output.stderr));
    }
    let release = target_dir.join("wasm32-wasip2").join("release");
    for manifest in ["Cargo.toml", "Cargo.lock", ".cargo/config.toml"] {
        println!("cargo:rerun-if-changed={}", crate_dir.join(manifest).display());
    }
    println!("cargo:rerun-if-changed={}", wit_dir.display());
    track_dep_info(&release.join(format!("{lib_name}.d")));
    release.join(format!("{lib_name}.wasm"))
}

/// Emits `rerun-if-changed` for every source file a dep-info file lists.
fn track_dep_info(path: &Path) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let Some((_, deps)) = text.lines().next().and_then(|l| l.split_once(": ")) else {
        return;
    };
    let mut current = String::new();
    for token in deps.split(' ') {
        // Spaces inside paths are escaped as `\ `.
        if let Some(stripped) = token.strip_suffix('\\') {
            current.push_str(stripped);
            current.push(' ');
            continue;
        }
        current.push_str(token);
        if !current.is_empty() && !current.contains("/.cargo/registry/") {
            println!("cargo:rerun-if-changed={current}");
        }
        current.clear();
    }
}
