//! The JSON-RPC entry: envelope, dispatch, and every method's params as the server decodes them.
#![no_main]

use a2a_protocol::methods::{self, Dispatch, Method};
use a2a_protocol::{
    GetTaskRequest, SendMessageRequest, TaskIdRequest, jsonrpc, list::ListTasksRequest,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(req) = jsonrpc::parse_request(data) else {
        return;
    };
    for sse in [false, true] {
        if let Dispatch::Serve(m) = methods::dispatch(&req.method, sse, true) {
            match m {
                Method::SendMessage | Method::SendStreamingMessage => {
                    if let Ok(p) = jsonrpc::params::<SendMessageRequest>(&req.params) {
                        let _ = p.message.check_bounds(1000);
                        let _ = a2a_protocol::idempotency::fingerprint(&p.message);
                        let _ = a2a_protocol::prompt::render(&p.message.parts);
                    }
                }
                Method::GetTask => drop(jsonrpc::params::<GetTaskRequest>(&req.params)),
                Method::ListTasks => {
                    drop(jsonrpc::params::<ListTasksRequest>(&req.params).map(|p| p.validate()))
                }
                _ => drop(jsonrpc::params::<TaskIdRequest>(&req.params)),
            }
        }
    }
});
