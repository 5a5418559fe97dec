//! The host-layer micro-benchmark's component (`tests/benches/host_layers.rs`): a request for
//! `/<interface>/<count>` calls one cheap function of that `a2a:edge` interface `count` times,
//! then answers 204. The interfaces: `context` (instance), `storage` (get-task of an unknown
//! id), `events` (publish of one frame), `admission` (check-rate), `sessions` (cancel-task of an
//! unknown id), `attachments` (admit of a part it refuses); anything else calls nothing.

use a2a_guest::server::a2a::edge::events::{self, FrameKind};
use a2a_guest::server::a2a::edge::{admission, attachments, request_context, sessions, storage};
use wasip2::http::types::{Fields, IncomingRequest, OutgoingResponse, ResponseOutparam};

struct Component;

impl a2a_guest::server::exports::wasi::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let path = request.path_with_query().unwrap_or_default();
        let mut words = path.trim_start_matches('/').split('/');
        let interface = words.next().unwrap_or_default();
        let count: u32 = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        for _ in 0..count {
            match interface {
                "context" => drop(std::hint::black_box(request_context::instance())),
                "storage" => drop(std::hint::black_box(storage::get_task("unknown"))),
                "events" => drop(events::publish("probe", FrameKind::StatusUpdate, "{}")),
                "admission" => drop(std::hint::black_box(admission::check_rate())),
                "sessions" => drop(sessions::cancel_task("unknown")),
                "attachments" => drop(attachments::admit(None, None, "!")),
                _ => {}
            }
        }
        let response = OutgoingResponse::new(Fields::new());
        let _ = response.set_status_code(204);
        ResponseOutparam::set(out, Ok(response));
    }
}

a2a_guest::server::export_server!(Component);
