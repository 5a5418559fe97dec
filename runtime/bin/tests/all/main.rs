//! The suites that run the real `a2a-edge` binary, linked into one test binary: each module is a
//! suite (tests/README.md says which test goes where). Run one with `cargo test --release -p
//! a2a-edge --test all -- cli::`.

mod cli;
mod durability;
mod faults;
mod push;
mod traces;
