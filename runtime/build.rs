//! Builds the embedded guest components (see `guest-build`), and names the wasmtime the lockfile
//! links (`A2A_EDGE_WASMTIME`, reported by the update check).

use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("runtime/ lives in the workspace root");
    let wit = root.join("wit");
    let guests = root.join("components");
    let server = guest_build::build(&guests, "a2a-server", &wit);
    println!("cargo:rustc-env=A2A_EDGE_SERVER_WASM={}", server.display());
    let client = guest_build::build(&guests, "a2a-client", &wit);
    println!("cargo:rustc-env=A2A_EDGE_CLIENT_WASM={}", client.display());
    let echo_agent = guest_build::build(&guests, "echo-agent", &wit);
    println!(
        "cargo:rustc-env=A2A_EDGE_ECHO_AGENT_WASM={}",
        echo_agent.display()
    );
    let lock = root.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let lock = std::fs::read_to_string(&lock).expect("the workspace's Cargo.lock");
    let wasmtime = lock
        .split("[[package]]")
        .find(|p| p.contains("\nname = \"wasmtime\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = ")))
        .expect("wasmtime in Cargo.lock")
        .trim_matches('"');
    println!("cargo:rustc-env=A2A_EDGE_WASMTIME={wasmtime}");
}
