//! Builds the test-only components.

use std::path::Path;

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let wasm = guest_build::build(&here.join("components/misbehave"), "misbehave", &here.join("../wit"));
    println!("cargo:rustc-env=MISBEHAVE_WASM={}", wasm.display());
}
