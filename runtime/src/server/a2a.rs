//! The A2A surface: an instance's card and JSON-RPC endpoint, with routing, auth, the body
//! limit and the stream slot decided before its component runs.

use std::net::SocketAddr;
use std::sync::Arc;

use a2a_protocol::ErrorKind;
use http::{Method, Request, Response, header};
use http_body_util::Full;
use hyper::body::Incoming;

use crate::app::App;
use crate::body::read_body;
use crate::host::{CallNote, Invocation, Route};
use crate::instances::{Instance, RouteKind};
use crate::responses::{Body, holding_stream, rpc_failure};

/// A request to an instance's card or JSON-RPC endpoint: routing, auth and the body limit before
/// its component runs; the instance id, for the log.
pub async fn request(
    app: &Arc<App>,
    peer: SocketAddr,
    req: Request<Incoming>,
    note: &CallNote,
) -> (Response<Body>, Option<String>) {
    let legacy = app.config.protocol.legacy_error_codes;
    let path = req.uri().path();
    let Some((instance, kind)) = app.routes().resolve(path) else {
        let message =
            format!("no agent at {path}; the control API lists the instances and their card URLs");
        return (invalid(404, &message, legacy), None);
    };
    let id = Some(instance.record.id.clone());
    match serve(app, instance, kind, peer, req, note).await {
        Ok(r) | Err(r) => (r, id),
    }
}

/// An INVALID_REQUEST failure with `status`.
fn invalid(status: u16, message: &str, legacy: bool) -> Response<Body> {
    rpc_failure(status, ErrorKind::InvalidRequest, message, legacy)
}

/// Serves a routed request; `Err` is a refusal before the component ran.
async fn serve(
    app: &Arc<App>,
    instance: Arc<Instance>,
    kind: RouteKind,
    peer: SocketAddr,
    req: Request<Incoming>,
    note: &CallNote,
) -> Result<Response<Body>, Response<Body>> {
    let legacy = app.config.protocol.legacy_error_codes;
    check_method(kind, req.method(), legacy)?;
    if kind == RouteKind::Rpc {
        authenticate(app, &instance, req.headers(), legacy)?;
        let agent = req
            .headers()
            .get(header::USER_AGENT)
            .and_then(|v| v.to_str().ok());
        let now = crate::clock::now_ms();
        app.services()
            .activity
            .seen(&instance.record.id, peer.ip(), agent, now);
    }
    let limit = instance.record.limits.max_body_bytes;
    let (mut parts, body) = read_body(req, limit, &app.config.runtime)
        .await
        .map_err(|(status, message)| invalid(status, &message, legacy))?;
    // Components never see the caller's credentials.
    parts.headers.remove(header::AUTHORIZATION);
    let slot = match kind {
        RouteKind::Rpc => app.stream_slot(&instance, &parts.headers)?,
        RouteKind::Card => None,
    };
    let req = Request::from_parts(parts, Full::new(body));
    let call = Invocation {
        instance,
        route: Route::Http(kind),
        peer,
        note: note.clone(),
    };
    let response = app.host.handle(call, req).await;
    Ok(holding_stream(response, slot))
}

/// The card answers GET and HEAD, the JSON-RPC endpoint POST; anything else is a 405.
fn check_method(kind: RouteKind, method: &Method, legacy: bool) -> Result<(), Response<Body>> {
    let (allowed, allow) = match kind {
        RouteKind::Card => ([Method::GET, Method::HEAD].contains(method), "GET, HEAD"),
        RouteKind::Rpc => (method == Method::POST, "POST"),
    };
    if allowed {
        return Ok(());
    }
    let mut r = invalid(
        405,
        &format!("{method} is not allowed here; use {allow}"),
        legacy,
    );
    r.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    Err(r)
}

/// One `Authorization` header at most, and the instance's token when it has one: a named secret
/// that is not set refuses every call (fail closed).
fn authenticate(
    app: &App,
    instance: &Instance,
    headers: &header::HeaderMap,
    legacy: bool,
) -> Result<(), Response<Body>> {
    let mut presented = headers.get_all(header::AUTHORIZATION).iter();
    let first = presented.next();
    if presented.next().is_some() {
        return Err(invalid(
            400,
            "send one Authorization header, not several",
            legacy,
        ));
    }
    if instance.record.auth_token_env.is_none() {
        return Ok(());
    }
    let presented = first.and_then(|v| v.to_str().ok());
    if instance
        .token
        .as_deref()
        .is_some_and(|t| crate::credentials::bearer_matches(presented, t))
    {
        return Ok(());
    }
    app.services().metrics.rejection("auth");
    Err(unauthorized(legacy))
}

/// HTTP 401 with `WWW-Authenticate: Bearer` and a JSON-RPC UNAUTHORIZED body.
fn unauthorized(legacy: bool) -> Response<Body> {
    let mut r = rpc_failure(
        401,
        ErrorKind::Unauthorized,
        "missing or invalid bearer token: send Authorization: Bearer <token>",
        legacy,
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    r
}
