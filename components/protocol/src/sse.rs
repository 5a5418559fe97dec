//! Server-sent events framing (SPEC §5).

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_with_and_without_id() {
        let v = json!({"jsonrpc":"2.0","id":1,"result":{"task":{"id":"t"}}});
        assert_eq!(event(None, &v), "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"task\":{\"id\":\"t\"}}}\n\n");
        assert!(event(Some(42), &v).starts_with("id: 42\ndata: {"));
        assert_eq!(KEEP_ALIVE.lines().next(), Some(": keep-alive"));
    }

    #[test]
    fn newlines_inside_strings_stay_escaped() {
        let e = event(Some(1), &json!({"text": "a\nb\r\nc"}));
        assert_eq!(e.matches('\n').count(), 3);
    }
}
