//! The A2A server component: one instantiation per HTTP request routed to an inbound instance.
//! The runtime has already routed, authenticated and bounded the body; this component speaks
//! JSON-RPC, drives tasks through the host's storage, events and sessions, and writes answers.

mod bindings {
    wit_bindgen::generate!({
        world: "server",
        path: "../../wit",
        with: {
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
            "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
            "wasi:http/types@0.2.12": wasip2::http::types,
        },
        generate_all,
    });
}

mod card;
mod http;
mod rows;
mod rpc;
mod send;
mod sse;
mod stream;
mod tasks;

use bindings::a2a::edge::request_context::{self, RouteKind as Route};
use wasip2::http::types::{IncomingRequest, ResponseOutparam};

struct Component;

impl bindings::exports::wasi::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let request = http::Request::read(request);
        match request_context::route() {
            Route::Card => card::serve(&request, out),
            Route::Rpc | Route::Internal => rpc::serve(&request, out),
        }
    }
}

bindings::export!(Component with_types_in bindings);
