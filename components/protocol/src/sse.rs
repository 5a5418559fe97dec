//! Server-sent events framing (docs/protocol.md "A2A methods").

use serde_json::Value;

/// The comment sent while a stream is idle.
pub const KEEP_ALIVE: &str = ": keep-alive\n\n";

/// One event: an optional `id:` line (status and artifact frames carry one) and the JSON data.
/// Compact JSON has no newlines, so the data is one line.
pub fn event(id: Option<u64>, data: &Value) -> String {
    let json = data.to_string();
    match id {
        Some(id) => format!("id: {id}\ndata: {json}\n\n"),
        None => format!("data: {json}\n\n"),
    }
}

/// The member of a StreamResponse a frame carries: the one definition both sides of the WIT
/// boundary map their frame kinds to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member {
    /// A task snapshot.
    Task,
    /// A direct message.
    Message,
    /// A status update.
    StatusUpdate,
    /// An artifact update.
    ArtifactUpdate,
}

impl Member {
    /// The member's name in a StreamResponse.
    pub fn name(self) -> &'static str {
        match self {
            Member::Task => "task",
            Member::Message => "message",
            Member::StatusUpdate => "statusUpdate",
            Member::ArtifactUpdate => "artifactUpdate",
        }
    }

    /// The member's number in a stored frame log.
    pub fn number(self) -> i16 {
        match self {
            Member::Task => 1,
            Member::Message => 2,
            Member::StatusUpdate => 3,
            Member::ArtifactUpdate => 4,
        }
    }

    /// The member a stored number stands for.
    pub fn from_number(n: i16) -> Option<Member> {
        [
            Member::Task,
            Member::Message,
            Member::StatusUpdate,
            Member::ArtifactUpdate,
        ]
        .into_iter()
        .find(|m| m.number() == n)
    }
}

/// How a stream's events are framed.
#[derive(Clone, Debug, PartialEq)]
pub struct Envelope {
    /// The JSON-RPC request id the events answer; none on the HTTP+JSON binding, whose events
    /// are bare StreamResponse objects.
    pub rpc_id: Option<Value>,
    /// Each event in its A2A 0.3 shape (the 0.3 JSON-RPC result, or the 0.3 proto's JSON).
    pub v03: bool,
}

impl Envelope {
    /// Bare StreamResponse objects of A2A 1.0 (the HTTP+JSON binding).
    pub const BARE: Envelope = Envelope {
        rpc_id: None,
        v03: false,
    };

    /// JSON-RPC responses to request `id`, in A2A 1.0.
    pub fn json_rpc(id: Value) -> Envelope {
        Envelope {
            rpc_id: Some(id),
            v03: false,
        }
    }

    /// Whether a stream ends with its task's settled snapshot: an A2A 0.3 client takes one task
    /// per stream, the first, and learns the end from a `final` status update.
    pub fn ends_with_snapshot(&self) -> bool {
        !self.v03
    }
}

/// A result event whose StreamResponse member (`task`, `message`, `statusUpdate`,
/// `artifactUpdate`) is already JSON text, so it is not parsed again (but for 0.3, which
/// reshapes it), framed by `envelope`.
pub fn result_event(
    id: Option<u64>,
    envelope: &Envelope,
    member: &str,
    member_json: &str,
) -> String {
    let data = match envelope {
        Envelope {
            rpc_id: Some(rid),
            v03: false,
        } => format!(r#"{{"jsonrpc":"2.0","id":{rid},"result":{{"{member}":{member_json}}}}}"#),
        Envelope {
            rpc_id: None,
            v03: false,
        } => format!(r#"{{"{member}":{member_json}}}"#),
        Envelope { rpc_id, v03: true } => {
            let value: Value = serde_json::from_str(member_json).unwrap_or(Value::Null);
            let mut response = serde_json::Map::new();
            response.insert(member.to_owned(), value);
            let response = Value::Object(response);
            match rpc_id {
                Some(rid) => {
                    crate::jsonrpc::success(rid, crate::compat03::event_out(&response)).to_string()
                }
                None => crate::compat03::rest::event_out(&response).to_string(),
            }
        }
    };
    match id {
        Some(id) => format!("id: {id}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// Reads an event stream chunk by chunk: complete events out, the rest held (as bytes, so a
/// character split across chunks is never garbled). CRLF line ends count as LF.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// How far `buf` is known to hold no event end, so a large event arriving in many small
    /// chunks is scanned once, not once per chunk.
    scanned: usize,
}

impl Decoder {
    /// Feeds a chunk; the data of every event it completed (its `data:` lines joined by `\n`).
    /// Events without data (comments such as keep-alives) give nothing.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf.extend(chunk.iter().filter(|b| **b != b'\r'));
        let mut out = Vec::new();
        while let Some(end) = self.buf[self.scanned.saturating_sub(1)..]
            .windows(2)
            .position(|w| w == b"\n\n")
            .map(|i| i + self.scanned.saturating_sub(1))
        {
            self.scanned = 0;
            let event: Vec<u8> = self.buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty() {
                out.push(data.join("\n"));
            }
        }
        self.scanned = self.buf.len();
        out
    }
}

/// Parses a `Last-Event-ID` header value.
pub fn last_event_id(header: Option<&str>) -> Option<u64> {
    header?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn member_numbers_round_trip_and_are_distinct() {
        let all = [
            Member::Task,
            Member::Message,
            Member::StatusUpdate,
            Member::ArtifactUpdate,
        ];
        for m in all {
            assert_eq!(Member::from_number(m.number()), Some(m));
        }
        assert_eq!(Member::from_number(0), None);
        assert_eq!(Member::from_number(5), None);
    }

    #[test]
    fn decoder_joins_chunks_skips_comments_and_keeps_split_characters() {
        let mut d = Decoder::default();
        assert!(d.push(b"id: 1\r\ndata: {\"a\":").is_empty());
        assert_eq!(
            d.push(b"1}\r\n\r\n: keep-alive\n\ndata: x\ndata: y\n\ndata: \xc3"),
            ["{\"a\":1}", "x\ny"]
        );
        assert_eq!(
            d.push(b"\xa9\n\n"),
            ["\u{e9}"],
            "a two-byte character split across chunks"
        );
    }

    #[test]
    fn frames_with_and_without_id() {
        let v = json!({"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t"}}});
        assert_eq!(
            event(None, &v),
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\"}}}\n\n"
        );
        assert!(event(Some(42), &v).starts_with("id: 42\ndata: {"));
        assert_eq!(KEEP_ALIVE.lines().next(), Some(": keep-alive"));
    }

    #[test]
    fn result_events_wrap_member_json_without_reparsing() {
        let e = result_event(
            Some(3),
            &Envelope::json_rpc(json!("r1")),
            "statusUpdate",
            r#"{"taskId":"t"}"#,
        );
        assert_eq!(
            e,
            "id: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"result\":{\"statusUpdate\":{\"taskId\":\"t\"}}}\n\n"
        );
        let data = e.lines().nth(1).unwrap().strip_prefix("data: ").unwrap();
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["result"]["statusUpdate"]["taskId"], "t");
        assert!(
            result_event(None, &Envelope::json_rpc(json!(1)), "task", "{}").starts_with("data: ")
        );
        assert_eq!(
            result_event(
                Some(4),
                &Envelope::BARE,
                "artifactUpdate",
                r#"{"taskId":"t"}"#
            ),
            "id: 4\ndata: {\"artifactUpdate\":{\"taskId\":\"t\"}}\n\n",
            "the HTTP+JSON binding's events are bare StreamResponse objects"
        );
        let old = result_event(
            Some(5),
            &Envelope {
                rpc_id: Some(json!(7)),
                v03: true,
            },
            "statusUpdate",
            r#"{"taskId":"t","status":{"state":"TASK_STATE_COMPLETED"}}"#,
        );
        assert_eq!(
            old,
            "id: 5\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"kind\":\"status-update\",\"taskId\":\"t\",\"status\":{\"state\":\"completed\"},\"final\":true}}\n\n",
            "0.3 events are the member alone, kind-tagged"
        );
        let rest = result_event(
            None,
            &Envelope {
                rpc_id: None,
                v03: true,
            },
            "statusUpdate",
            r#"{"taskId":"t","status":{"state":"TASK_STATE_CANCELED"}}"#,
        );
        assert_eq!(
            rest,
            "data: {\"statusUpdate\":{\"taskId\":\"t\",\"status\":{\"state\":\"TASK_STATE_CANCELLED\"},\"final\":true}}\n\n",
            "0.3 HTTP+JSON events are the 0.3 proto's StreamResponse"
        );
    }

    #[test]
    fn last_event_ids() {
        assert_eq!(last_event_id(Some(" 42 ")), Some(42));
        assert_eq!(last_event_id(Some("x")), None);
        assert_eq!(last_event_id(None), None);
    }

    #[test]
    fn newlines_inside_strings_stay_escaped() {
        let e = event(Some(1), &json!({"text": "a\nb\r\nc"}));
        assert_eq!(e.matches('\n').count(), 3);
    }
}
