//! Builds the embedded guest components (see `guest-build`).

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
}
