//! The hosts of the wasm worlds the instances run, side by side: [`server`] runs the A2A server
//! components of the inbound instances (world `server`), [`agent`] the agent components behind
//! them (world `a2a:agent/agent`). Each holds its world's generated bindings, its store data and
//! the capabilities it links. The outbound client component's host is the outbound
//! connections' own ([`crate::outbound::client`]).

pub mod agent;
pub mod server;
