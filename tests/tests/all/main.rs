//! The black-box suites, linked into one binary: each module is a suite against the real server
//! (tests/README.md says which test goes where). Run one with `cargo test --release -p
//! a2a-edge-tests --test all -- agents::`.

mod agents;
mod attachments;
mod bounds;
mod command;
mod compat03;
mod control;
mod foundation;
mod grpc;
mod identities;
mod openai;
mod outbound;
mod protocol;
mod rest;
mod security;
mod tls;
mod update;
