//! The A2A server component: serves the HTTP requests routed to an inbound instance, one at a
//! time, on an instance the runtime may keep for the instance's next request (so it keeps nothing
//! of a request for the next, only the instance's info, `http::Begun`, and scrubs what a request
//! left in its memory, `a2a_guest::scrub`). The runtime
//! has already routed, authenticated and bounded the body; this component speaks JSON-RPC, drives
//! tasks through the host's storage, events and sessions, and writes answers.

mod card;
mod frames;
mod http;
mod push;
mod rpc;
mod send;
mod sse;
mod stored;
mod stream;
mod tasks;

use a2a_guest::server::a2a::edge::request_context::RouteKind as Route;
use wasip2::http::types::{IncomingRequest, ResponseOutparam};

struct Component;

impl a2a_guest::server::exports::wasi::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        serve(request, out);
        a2a_guest::scrub::stack();
    }
}

#[global_allocator]
static ALLOCATOR: a2a_guest::scrub::Zeroing = a2a_guest::scrub::Zeroing;

#[inline(never)]
fn serve(request: IncomingRequest, out: ResponseOutparam) {
    let http::Begun {
        request,
        route,
        instance,
    } = http::Begun::read(request);
    match route {
        Route::Card => card::serve(&request, &instance, out),
        Route::Rpc | Route::Internal => rpc::serve(&request, &instance, out, rpc::Binding::JsonRpc),
        Route::Rest => rpc::serve(&request, &instance, out, rpc::Binding::Rest),
    }
}

a2a_guest::server::export_server!(Component);
