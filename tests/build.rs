//! Builds the test-only components.

use std::path::Path;

fn main() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.parent().expect("tests/ lives in the workspace root");
    let wasm = guest_build::build(&root.join("components"), "misbehave", &root.join("wit"));
    println!("cargo:rustc-env=MISBEHAVE_WASM={}", wasm.display());
}
