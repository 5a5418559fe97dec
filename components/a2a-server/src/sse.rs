//! An SSE response: frames written as they happen; a write error (client gone) stops writing,
//! never the work behind it.

use a2a_protocol::{RpcError, jsonrpc, sse};
use serde_json::Value;
use wasip2::http::types::ResponseOutparam;

use crate::http;

/// An open event stream.
pub struct Sse {
    body: Option<http::Started>,
    request_id: Value,
}

impl Sse {
    /// Sends the 200 `text/event-stream` head.
    pub fn start(out: ResponseOutparam, request_id: Value) -> Sse {
        let body = http::start(out, 200, &[("content-type", "text/event-stream"), ("cache-control", "no-cache")]);
        Sse { body, request_id }
    }

    /// Whether the client is still there.
    pub fn is_open(&self) -> bool {
        self.body.is_some()
    }

    fn write(&mut self, text: &str) {
        let failed = self.body.as_ref().is_some_and(|(_, stream)| http::write_all(stream, text.as_bytes()).is_err());
        if failed {
            if let Some(started) = self.body.take() {
                http::abandon(started);
            }
        }
    }

    /// A result frame whose member JSON is already serialised.
    pub fn frame(&mut self, seq: Option<u64>, member: &str, member_json: &str) {
        let event = sse::result_event(seq, &self.request_id, member, member_json);
        self.write(&event);
    }

    /// A task snapshot frame (first and last frames carry no id).
    pub fn task(&mut self, task: &a2a_protocol::Task) {
        self.frame(None, "task", &serde_json::to_string(task).unwrap_or_default());
    }

    /// An error frame.
    pub fn error(&mut self, e: &RpcError, legacy: bool) {
        let event = sse::event(None, &jsonrpc::failure(&self.request_id, e, legacy));
        self.write(&event);
    }

    /// A keep-alive comment.
    pub fn keep_alive(&mut self) {
        self.write(sse::KEEP_ALIVE);
    }

    /// Ends the stream.
    pub fn end(mut self) {
        if let Some(body) = self.body.take() {
            http::finish(body);
        }
    }
}

/// Seconds between keep-alive comments on an idle stream.
pub const KEEP_ALIVE_NS: u64 = 15_000_000_000;
