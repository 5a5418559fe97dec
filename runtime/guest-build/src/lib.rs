//! Builds `wasm32-wasip2` guest crates from a build script.
//!
//! The guests form one cargo workspace (`components/`, one lock file); a guest is built with
//! `cargo build --release --locked --target wasm32-wasip2 -p <package>` from that workspace's
//! folder (so its `.cargo/config.toml` applies) into `guests/` of the outer build's profile
//! directory, with the host's rustflags removed. Every build script of the outer build shares
//! that directory, so what two of them need (the bindings' proc macros, serde) compiles once;
//! it is not the outer build's own target directory, whose lock the outer build holds. Rerun
//! lines come from the guest's dep-info file, so exactly the sources that went into the wasm
//! (path dependencies included) trigger a rebuild, plus the workspace's manifests and the WIT
//! contract.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the guest `package` of the guest workspace at `workspace` and returns the path of the
/// built component. `wit_dir` is tracked for changes. Panics with the build's output on failure:
/// a build script has no better way to report.
pub fn build(workspace: &Path, package: &str, wit_dir: &Path) -> PathBuf {
    if let Err(message) = ensure_target(workspace) {
        panic!("{message}");
    }
    let out_dir =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set for build scripts"));
    let target_dir = guests_dir(&out_dir);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--locked",
        "--target",
        TARGET,
        "-p",
        package,
    ])
    .env("CARGO_TARGET_DIR", &target_dir)
    // From the workspace's folder, so its `.cargo/config.toml` applies.
    .current_dir(workspace);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run cargo for guest {package}: {e}"));
    if !output.status.success() {
        panic!(
            "building guest {package} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let release = target_dir.join(TARGET).join("release");
    for manifest in ["Cargo.toml", "Cargo.lock", ".cargo/config.toml"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace.join(manifest).display()
        );
    }
    let lib_name = package.replace('-', "_");
    println!("cargo:rerun-if-changed={}", wit_dir.display());
    track_dep_info(&release.join(format!("{lib_name}.d")));
    release.join(format!("{lib_name}.wasm"))
}

/// `<profile dir>/guests` for an `OUT_DIR` of cargo's layout (`<profile dir>/build/<unit>/out`),
/// else `OUT_DIR/guests`.
fn guests_dir(out_dir: &Path) -> PathBuf {
    let mut up = out_dir.ancestors().skip(2);
    match (up.next(), up.next()) {
        (Some(build), Some(profile)) if build.file_name() == Some("build".as_ref()) => {
            profile.join("guests")
        }
        _ => out_dir.join("guests"),
    }
}

/// The guests' compilation target.
const TARGET: &str = "wasm32-wasip2";

/// Makes sure the standard library for [`TARGET`] is installed for the toolchain that runs this
/// build. rustup adds the targets of `rust-toolchain.toml` only when it installs the toolchain
/// itself, so a machine that already had Rust 1.95 lacks it: then `rustup target add` runs here.
/// Without rustup the error's first line is the command that fixes it.
fn ensure_target(crate_dir: &Path) -> Result<(), String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let fix = format!("rustup target add {TARGET}");
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("{fix}\n(could not run rustc to find its sysroot: {e})"))?;
    let installed = || {
        Path::new(String::from_utf8_lossy(&sysroot.stdout).trim())
            .join("lib/rustlib")
            .join(TARGET)
            .join("lib")
            .is_dir()
    };
    if installed() {
        return Ok(());
    }
    // Build scripts of several crates may get here at once: one installs, the others wait.
    let lock = std::env::temp_dir().join("a2a-edge-rustup-target.lock");
    let waited = std::time::Instant::now();
    while std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .is_err()
    {
        if installed() {
            return Ok(());
        }
        if waited.elapsed() > std::time::Duration::from_secs(300) {
            let _ = std::fs::remove_file(&lock); // left by a build that died
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let mut rustup = Command::new("rustup");
    rustup
        .args(["target", "add", TARGET])
        .current_dir(crate_dir);
    if let Some(toolchain) = std::env::var_os("RUSTUP_TOOLCHAIN") {
        rustup.arg("--toolchain").arg(toolchain);
    }
    let result = rustup.output();
    let _ = std::fs::remove_file(&lock);
    match result {
        // Another build script may have installed it at the same moment.
        _ if installed() => Ok(()),
        Ok(out) => Err(format!(
            "{fix}\n(the {TARGET} target is missing and `rustup target add` failed: {})",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!(
            "{fix}\n(the {TARGET} target is missing for this toolchain and rustup could not be run: {e})"
        )),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The build scripts of one outer build share one guests directory beside their own.
    #[test]
    fn build_scripts_of_one_profile_share_the_guests_directory() {
        let out = |unit: &str| PathBuf::from(format!("/t/release/build/{unit}/out"));
        assert_eq!(
            guests_dir(&out("a2a-edge-1")),
            Path::new("/t/release/guests")
        );
        assert_eq!(guests_dir(&out("tests-2")), guests_dir(&out("a2a-edge-1")));
        assert_eq!(
            guests_dir(Path::new("/elsewhere/out")),
            Path::new("/elsewhere/out/guests")
        );
    }

    /// Without the target and without rustup, the first line of the error is the fix.
    #[test]
    fn missing_target_without_rustup_names_the_fix() {
        let dir = std::env::temp_dir().join(format!("guest-build-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        let fake_rustc = dir.join("bin/rustc");
        std::fs::write(
            &fake_rustc,
            format!("#!/bin/sh\necho {}\n", dir.join("sysroot").display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake_rustc, std::fs::Permissions::from_mode(0o755)).unwrap();
        // SAFETY: this is the only test in this crate that touches the environment.
        unsafe {
            std::env::set_var("RUSTC", &fake_rustc);
            std::env::set_var("PATH", dir.join("bin"));
        }
        let err = ensure_target(&dir).unwrap_err();
        assert_eq!(
            err.lines().next(),
            Some("rustup target add wasm32-wasip2"),
            "{err}"
        );
        std::fs::create_dir_all(dir.join("sysroot/lib/rustlib/wasm32-wasip2/lib")).unwrap();
        assert_eq!(ensure_target(&dir), Ok(()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
