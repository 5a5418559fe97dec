//! JSON-RPC calls, built in one place: the request envelope and the POST that carries it.

use serde_json::{Value, json};

use crate::answer;

/// `{"jsonrpc": "2.0", "id": id, "method": method, "params": params}`, without `params` when
/// it is null.
pub fn envelope(id: impl Into<Value>, method: &str, params: Value) -> Value {
    let mut body = json!({"jsonrpc": "2.0", "id": id.into(), "method": method});
    if !params.is_null() {
        body["params"] = params;
    }
    body
}

/// A POST of the call `method` (id 1) to `url`, ready to send (headers may be added).
pub fn request(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    client.post(url).json(&envelope(1, method, params))
}

/// A POST of the streaming call `method` (id `"s"`) to `url` under `Accept: text/event-stream`,
/// with `Last-Event-ID` when resuming.
pub fn stream_request(
    client: &reqwest::Client,
    url: &str,
    method: &str,
    params: Value,
    last_event_id: Option<u64>,
) -> reqwest::RequestBuilder {
    let request = client
        .post(url)
        .header("accept", "text/event-stream")
        .json(&envelope("s", method, params));
    match last_event_id {
        Some(id) => request.header("last-event-id", id.to_string()),
        None => request,
    }
}

/// Calls `method` at `url`: (status, body).
pub async fn rpc(url: &str, method: &str, params: Value) -> (u16, Value) {
    answer(request(&reqwest::Client::new(), url, method, params)).await
}

/// The whole answer of `method` on the instance `instance` at `base`.
pub async fn call(base: &str, instance: &str, method: &str, params: Value) -> Value {
    rpc(&format!("{base}/a2a/{instance}"), method, params)
        .await
        .1
}
