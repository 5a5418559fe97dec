//! The A2A surface: an instance's card and JSON-RPC endpoint, with routing, auth, the body
//! limit and the stream slot decided before its component runs.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;

use super::body::read_body;
use crate::app::App;
use crate::host::{CallNote, Invocation, Route};
use crate::instances::RouteKind;
use crate::responses::{Body, is_event_stream, rpc_error, rpc_failure};

/// A request to an instance's card or JSON-RPC endpoint: routing, auth and the body limit before
/// its component runs; the instance id, for the log.
pub async fn request(app: &Arc<App>, peer: SocketAddr, req: Request<Incoming>, note: &CallNote) -> (Response<Body>, Option<String>) {
    let legacy = app.config.protocol.legacy_error_codes;
    let services = app.services();
    let path = req.uri().path();
    let Some((instance, kind)) = app.routes().resolve(path) else {
        let message = format!("no agent at {path}; the control API lists the instances and their card URLs");
        return (rpc_failure(404, a2a_protocol::ErrorKind::InvalidRequest, &message, legacy), None);
    };
    let id = Some(instance.record.id.clone());
    let allowed = match kind {
        RouteKind::Card => [Method::GET, Method::HEAD].contains(req.method()),
        RouteKind::Rpc => req.method() == Method::POST,
    };
    if !allowed {
        let allow = if kind == RouteKind::Card { "GET, HEAD" } else { "POST" };
        let mut r = rpc_failure(405, a2a_protocol::ErrorKind::InvalidRequest, &format!("{} is not allowed here; use {allow}", req.method()), legacy);
        r.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static(allow));
        return (r, id);
    }
    if kind == RouteKind::Rpc {
        let mut presented = req.headers().get_all(header::AUTHORIZATION).iter();
        let first = presented.next();
        if presented.next().is_some() {
            return (rpc_failure(400, a2a_protocol::ErrorKind::InvalidRequest, "send one Authorization header, not several", legacy), id);
        }
        if instance.record.auth_token_env.is_some() {
            // A named secret that is not set refuses every call (fail closed).
            let presented = first.and_then(|v| v.to_str().ok());
            if !instance.token.as_deref().is_some_and(|t| crate::credentials::bearer_matches(presented, t)) {
                services.metrics.rejection("auth");
                return (unauthorized(legacy), id);
            }
        }
        let agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok());
        services.activity.seen(&instance.record.id, peer.ip(), agent, crate::clock::now_ms());
    }
    let limit = instance.record.limits.max_body_bytes;
    let (mut parts, body) = match read_body(req, limit, &app.config.runtime).await {
        Ok(r) => r,
        Err((status, message)) => return (rpc_failure(status, a2a_protocol::ErrorKind::InvalidRequest, &message, legacy), id),
    };
    // Components never see the caller's credentials.
    parts.headers.remove(header::AUTHORIZATION);
    // A stream holds a slot of its own from the start: over the cap it is refused at once,
    // never left to exhaust what other requests need.
    let wants_stream = kind == RouteKind::Rpc && a2a_protocol::methods::accepts_sse(parts.headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    let slot = match wants_stream.then(|| services.admission.acquire_stream(&instance.record.id, instance.record.limits.max_streams, app.config.runtime.max_streams)) {
        Some(Err(why)) => {
            services.metrics.rejection("streams");
            let e = a2a_protocol::RpcError { retry_after_ms: Some(1000), ..a2a_protocol::RpcError::new(a2a_protocol::ErrorKind::RateLimited, why) };
            return (rpc_error(429, &e, legacy), id);
        }
        Some(Ok(slot)) => Some(slot),
        None => None,
    };
    let req = Request::from_parts(parts, Full::new(body));
    let call = Invocation { instance, route: Route::Http(kind), peer, note: note.clone() };
    let response = app.host.handle(call, req).await;
    match slot {
        Some(slot) if is_event_stream(&response) => (response.map(|body| Holding { body, _slot: slot }.boxed_unsync()), id),
        _ => (response, id),
    }
}

/// A response body that holds something (an open-stream slot, a busy count) until it ends or
/// is dropped.
pub(super) struct Holding<T> {
    pub(super) body: Body,
    pub(super) _slot: T,
}

impl<T: Unpin> hyper::body::Body for Holding<T> {
    type Data = Bytes;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }
}

/// HTTP 401 with `WWW-Authenticate: Bearer` and a JSON-RPC UNAUTHORIZED body.
fn unauthorized(legacy: bool) -> Response<Body> {
    let mut r = rpc_failure(401, a2a_protocol::ErrorKind::Unauthorized, "missing or invalid bearer token: send Authorization: Bearer <token>", legacy);
    r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    r
}

