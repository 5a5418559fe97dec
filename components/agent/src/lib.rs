//! Write an a2a-edge agent in Rust (docs/agents.md): implement [`Agent`] and export it
//! with [`export_agent!`]; build with `cargo build --target wasm32-wasip2 --release`.
//!
//! ```ignore
//! struct Echo;
//!
//! impl a2a_agent::Agent for Echo {
//!     fn run(turn: a2a_agent::Turn) -> a2a_agent::Outcome {
//!         match a2a_agent::say(&format!("echo: {}", turn.text)) {
//!             Ok(()) => a2a_agent::Outcome::Completed,
//!             Err(e) => a2a_agent::Outcome::Failed(e),
//!         }
//!     }
//! }
//!
//! a2a_agent::export_agent!(Echo);
//! ```
//!
//! Every import is linked, but only what the instance's preset grants works: a call outside the
//! grants returns an error (a model call `llm::Error::NotGranted`, a host outside `allowedHosts`
//! `HttpRequestDenied`), never access.

/// The generated bindings of the `agent` world.
#[allow(clippy::too_many_arguments)] // generated: the turn record's fields, lowered flat
pub mod bindings {
    wit_bindgen::generate!({
        world: "agent",
        path: "../../wit/agent",
        with: {
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
            "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
            "wasi:http/types@0.2.12": wasip2::http::types,
            "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
        },
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export_agent",
        default_bindings_module: "a2a_agent::bindings",
    });
}

/// What an agent implements: one turn at a time, in a fresh instance.
pub use bindings::Guest as Agent;
pub use bindings::a2a::agent::{agents, history, llm, progress};
/// `wasi:config/store`: the preset's non-secret settings.
pub use bindings::wasi::config::store as config;
/// `wasi:keyvalue/store`: buckets kept by the runtime for this instance (when granted).
pub use bindings::wasi::keyvalue::store as keyvalue;
/// `wasi:logging/logging`: lines in the runtime's log, with the instance and the task.
pub use bindings::wasi::logging::logging;
pub use bindings::{Outcome, Turn, export_agent};

/// Appends `text` to the answer; the error says which bound it passed.
pub fn say(text: &str) -> Result<(), String> {
    progress::text(text)
}

/// Logs `message` at info level.
pub fn log(message: &str) {
    logging::log(logging::Level::Info, "agent", message);
}
