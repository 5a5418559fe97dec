//! The protocol decisions of a2a-edge, as pure functions over A2A 1.0.1 data.
//!
//! No I/O happens here: this crate compiles natively (the runtime, unit tests) and into the
//! `wasm32-wasip2` guests. Everything that *decides* — JSON-RPC parsing and error mapping, the
//! task state machine, the AgentCard, SSE framing, prompt rendering — lives here so it is tested
//! in milliseconds and shared by every component.
#![deny(missing_docs)]

pub mod bounds;
pub mod card;
pub mod client;
pub mod client_auth;
pub mod compat03;
pub mod errors;
pub mod execution;
pub mod grpc;
pub mod idempotency;
pub mod ids;
pub mod jsonrpc;
pub mod list;
pub mod methods;
pub mod prompt;
pub mod proto_enum;
pub mod push;
pub mod rest;
pub mod send;
pub mod sse;
pub mod state;
pub mod time;
pub mod tools;
pub mod types;
pub mod version;
pub mod wit;

pub use errors::{ErrorKind, RpcError};
pub use types::*;
