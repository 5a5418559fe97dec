//! A deliberately bad component for isolation tests. The `x-misbehave` request header picks:
//! `trap` (unreachable), `spin` (loops forever without calling the host), `alloc` (grows memory
//! without bound), `task-then-trap` (stores a WORKING task named by `x-task-id`, then traps),
//! `count` (answers `{"served":N}`, the requests this instance served: state kept between
//! requests); anything else answers 200 `{"component":"misbehave"}` (a valid stand-in for swap
//! tests).

use std::sync::atomic::{AtomicU32, Ordering};

use a2a_guest::server::a2a::edge::storage;
use a2a_guest::server::a2a::edge::types::{TaskRow, TaskState};
use wasip2::http::types::{
    Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};

struct Component;

/// Requests this instance served.
static SERVED: AtomicU32 = AtomicU32::new(0);

fn header(request: &IncomingRequest, name: &str) -> String {
    request
        .headers()
        .get(name)
        .into_iter()
        .next()
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .unwrap_or_default()
}

impl a2a_guest::server::exports::wasi::http::incoming_handler::Guest for Component {
    fn handle(request: IncomingRequest, out: ResponseOutparam) {
        let served = SERVED.fetch_add(1, Ordering::Relaxed) + 1;
        match header(&request, "x-misbehave").as_str() {
            "trap" => core::arch::wasm32::unreachable(),
            "spin" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "task-then-trap" => {
                let id = header(&request, "x-task-id");
                let body = format!(
                    r#"{{"id":"{id}","contextId":"ctx","status":{{"state":"TASK_STATE_WORKING"}}}}"#
                );
                let row = TaskRow {
                    id,
                    context_id: "ctx".into(),
                    state: TaskState::Working,
                    skill: "chat".into(),
                    created_at: 1,
                    updated_at: 1,
                    version: 1,
                    body,
                };
                storage::create_task(&row, None, None).expect("the task is stored");
                core::arch::wasm32::unreachable()
            }
            mode => {
                let answer = match mode {
                    "count" => format!(r#"{{"served":{served}}}"#),
                    _ => r#"{"component":"misbehave"}"#.into(),
                };
                let response = OutgoingResponse::new(
                    Fields::from_list(&[("content-type".into(), b"application/json".to_vec())])
                        .unwrap(),
                );
                let body = response.body().unwrap();
                ResponseOutparam::set(out, Ok(response));
                let stream = body.write().unwrap();
                stream.blocking_write_and_flush(answer.as_bytes()).unwrap();
                drop(stream);
                OutgoingBody::finish(body, None).unwrap();
            }
        }
    }
}

a2a_guest::server::export_server!(Component);
