//! An SSE response: frames written as they happen; a write error (client gone) stops writing,
//! never the work behind it.

use a2a_protocol::sse::Envelope;
use a2a_protocol::{RpcError, jsonrpc, sse};
use serde_json::Value;
use wasip2::http::types::ResponseOutparam;

use crate::http;

/// An open event stream.
pub struct Sse {
    body: Option<http::Started>,
    /// How the events are framed.
    envelope: Envelope,
    /// A first frame held back until something else is written (see [`Sse::hold_task`]).
    held: Option<String>,
}

impl Sse {
    /// Sends the 200 `text/event-stream` head; events are framed by `envelope`.
    pub fn start(out: ResponseOutparam, envelope: Envelope) -> Sse {
        let body = http::start(
            out,
            200,
            &[
                ("content-type", "text/event-stream"),
                ("cache-control", "no-cache"),
            ],
        );
        Sse {
            body,
            envelope,
            held: None,
        }
    }

    fn write(&mut self, text: &str) {
        if let Some(first) = self.held.take() {
            self.write(&first);
        }
        let failed = self
            .body
            .as_ref()
            .is_some_and(|(_, stream)| http::write_all(stream, text.as_bytes()).is_err());
        if failed && let Some(started) = self.body.take() {
            http::abandon(started);
        }
    }

    /// A result frame whose member JSON is already serialised.
    pub fn frame(&mut self, seq: Option<u64>, member: &str, member_json: &str) {
        let event = sse::result_event(seq, &self.envelope, member, member_json);
        self.write(&event);
    }

    /// A task snapshot frame (first and last frames carry no id).
    pub fn task(&mut self, task: &a2a_protocol::Task) {
        self.frame(
            None,
            "task",
            &serde_json::to_string(task).unwrap_or_default(),
        );
    }

    /// The settled task that ends a stream; a 0.3 stream has it only in place of a held opening
    /// frame (so it carries one task).
    pub fn settled(&mut self, task: &a2a_protocol::Task) {
        if !self.envelope.ends_with_snapshot() {
            if !self.holds() {
                return;
            }
            self.drop_held();
        }
        self.task(task);
    }

    /// Holds the opening task frame back: it goes out before the next write, and never if the
    /// turn answers with a message alone ([`Sse::drop_held`]), so such a stream is one message frame.
    pub fn hold_task(&mut self, task: &a2a_protocol::Task) {
        let json = serde_json::to_string(task).unwrap_or_default();
        self.held = Some(sse::result_event(None, &self.envelope, "task", &json));
    }

    /// Whether a frame is held back.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// Writes the held frame now.
    pub fn flush_held(&mut self) {
        if let Some(first) = self.held.take() {
            self.write(&first);
        }
    }

    /// Forgets the held frame.
    pub fn drop_held(&mut self) {
        self.held = None;
    }

    /// An error frame: a JSON-RPC failure, or a `google.rpc.Status` on the HTTP+JSON binding.
    pub fn error(&mut self, e: &RpcError, legacy: bool) {
        let body = match &self.envelope.rpc_id {
            Some(id) => jsonrpc::failure(id, e, legacy),
            None => a2a_protocol::rest::error_body(a2a_protocol::rest::status(e.kind).0, e),
        };
        let event = sse::event(None, &body);
        self.write(&event);
    }

    /// The envelope as the host's hand-off takes it: the request id (JSON), and whether 0.3.
    pub fn hand_off_envelope(&self) -> (Option<String>, bool) {
        let id = self.envelope.rpc_id.as_ref().map(Value::to_string);
        (id, self.envelope.v03)
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

/// How long a held opening task frame waits for the turn's first event.
pub const FIRST_FRAME_GRACE_NS: u64 = 200_000_000;
