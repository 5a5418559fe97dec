//! Empty: cargo resolves `[build-dependencies]` (the host's features) only for a crate with a
//! build script.

fn main() {}
