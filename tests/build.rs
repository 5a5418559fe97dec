//! Builds the test-only components.

use std::path::Path;

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.parent().expect("tests/ lives in the workspace root");
    for (package, var) in [
        ("misbehave", "MISBEHAVE_WASM"),
        ("probe", "PROBE_WASM"),
        ("agent-probe", "AGENT_PROBE_WASM"),
        ("counter", "COUNTER_WASM"),
        ("assistant", "ASSISTANT_WASM"),
    ] {
        let wasm = guest_build::build(&root.join("components"), package, &root.join("wit"));
        println!("cargo:rustc-env={var}={}", wasm.display());
    }
}
