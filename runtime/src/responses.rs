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

/// A transport failure on the A2A surface: HTTP `status` with a JSON-RPC error envelope, so A2A
/// clients decode every answer the same way.
pub fn rpc_failure(
    status: u16,
    kind: a2a_protocol::ErrorKind,
    message: &str,
    legacy: bool,
) -> Response<Body> {
    rpc_error(status, &a2a_protocol::RpcError::new(kind, message), legacy)
}

/// [`rpc_failure`] of a whole error: its `Retry-After` travels as the header too.
pub fn rpc_error(status: u16, e: &a2a_protocol::RpcError, legacy: bool) -> Response<Body> {
    let mut r = json(
        status,
        &a2a_protocol::jsonrpc::failure(&serde_json::Value::Null, e, legacy),
    );
    if let Some(v) = e
        .retry_after()
        .and_then(|secs| header::HeaderValue::from_str(&secs).ok())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
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
        Some(slot) if is_event_stream(&response) => response.map(|b| Holding::new(b, slot)),
        _ => response,
    }
}

/// A response body that holds something (an open-stream slot, a busy count) until it ends or
/// is dropped.
pub struct Holding<T> {
    body: Body,
    _held: T,
}

impl<T: Unpin + Send + 'static> Holding<T> {
    /// `body`, holding `held` for as long as it lasts.
    pub fn new(body: Body, held: T) -> Body {
        Holding { body, _held: held }.boxed_unsync()
    }
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
