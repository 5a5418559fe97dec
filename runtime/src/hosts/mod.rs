//! The hosts of the wasm worlds, side by side: [`server`] runs the A2A server components of the
//! inbound instances (world `server`), [`client`] the outbound A2A client component (world
//! `outbound-client`). Each holds its world's generated bindings, its store data and the
//! capabilities it links. [`agent`] runs the agent components behind instances (world
//! `a2a:agent/agent`).

pub mod agent;
pub mod client;
pub mod server;
