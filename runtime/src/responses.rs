//! The HTTP answers the runtime writes itself (routing refusals, transport failures on the A2A
//! surface, the control API's JSON), and the body type every response has.

use bytes::Bytes;
use http::{Response, header};
use http_body_util::{BodyExt, Full};

/// A response body of any origin (a guest's or the host's).
pub type Body = wasmtime_wasi_http::p2::body::HyperOutgoingBody;

/// A complete host-made response body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A JSON answer.
pub fn json(status: u16, value: &serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(value.to_string()))
        .expect("static response parts are valid")
}

/// How the runtime frames an error it answers itself on the A2A surface: as the JSON-RPC
/// endpoint does (an error envelope), or as the HTTP+JSON binding does (`google.rpc.Status`),
/// so clients of either decode every answer the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// The JSON-RPC error envelope.
    JsonRpc,
    /// The HTTP+JSON binding's `google.rpc.Status`.
    Rest,
}

/// A transport failure on the A2A surface: HTTP `status` with an error body of `framing`.
pub fn rpc_failure(
    framing: Framing,
    status: u16,
    kind: a2a_protocol::ErrorKind,
    message: &str,
    legacy: bool,
) -> Response<Body> {
    let e = a2a_protocol::RpcError::new(kind, message);
    rpc_error(framing, status, &e, legacy)
}

/// [`rpc_failure`] of a whole error: its `Retry-After` travels as the header too.
pub fn rpc_error(
    framing: Framing,
    status: u16,
    e: &a2a_protocol::RpcError,
    legacy: bool,
) -> Response<Body> {
    let body = match framing {
        Framing::JsonRpc => a2a_protocol::jsonrpc::failure(&serde_json::Value::Null, e, legacy),
        Framing::Rest => a2a_protocol::rest::error_body(status, e),
    };
    let mut r = json(status, &body);
    if let Some(v) = e
        .retry_after()
        .and_then(|secs| header::HeaderValue::from_str(&secs).ok())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// Whether a request asks for an SSE answer (`Accept: text/event-stream`, in any of its
/// `Accept` fields).
pub fn accepts_sse(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| a2a_protocol::methods::accepts_sse(v.to_str().ok()))
}

/// Whether a response is an SSE stream.
pub fn is_event_stream<B>(r: &Response<B>) -> bool {
    r.headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// `response`, holding the open-stream `slot` for as long as its body lasts when it is a
/// stream (a JSON answer frees the slot at once).
pub fn holding_stream<T: Unpin + Send + 'static>(
    response: Response<Body>,
    slot: Option<T>,
) -> Response<Body> {
    match slot {
        Some(slot) if is_event_stream(&response) => response.map(|b| holding(b, slot)),
        _ => response,
    }
}

/// A response body that holds something (an open-stream slot, a busy count) until it ends or
/// is dropped.
struct Holding<T> {
    body: Body,
    _held: T,
}

/// `body`, holding `held` for as long as it lasts.
pub fn holding<T: Unpin + Send + 'static>(body: Body, held: T) -> Body {
    Holding { body, _held: held }.boxed_unsync()
}

impl<T: Unpin> hyper::body::Body for Holding<T> {
    type Data = Bytes;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }
}
