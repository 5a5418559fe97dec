//! Nothing to use: this crate only turns on features (see its `Cargo.toml`).
