//! The HTTP server: hyper 1 over TCP with NODELAY, the routing of the two surfaces (SPEC §1),
//! bearer auth and body limits before any component runs, and graceful shutdown.

mod control;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::host::{Body, Route, full};
use crate::instances::RouteKind;

/// A plain JSON answer `{"error": message}` with `status`.
pub fn plain(status: u16, message: &str) -> Response<Body> {
    json(status, &serde_json::json!({ "error": message }))
}

/// A JSON answer.
pub fn json(status: u16, value: &serde_json::Value) -> Response<Body> {
    Response::builder().status(status).header(header::CONTENT_TYPE, "application/json").body(full(value.to_string())).expect("static response parts are valid")
}

/// The control surface answers only these peers (the TCP peer; proxy headers are ignored).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip == IpAddr::V4(Ipv4Addr::LOCALHOST) || ip == IpAddr::V6(Ipv6Addr::LOCALHOST) || ip == IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped())
}

/// Serves until `shutdown` fires, then stops accepting, lets in-flight requests finish up to the
/// configured grace, and flushes the store.
pub async fn serve(app: Arc<App>, listener: TcpListener, shutdown: CancellationToken) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |req| {
            let app = app.clone();
            async move { Ok::<_, Infallible>(route(&app, peer, req).await) }
        });
        let conn = hyper::server::conn::http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
    drop(listener);
    let grace = Duration::from_millis(app.config.runtime.shutdown_grace_ms);
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!(grace_ms = grace.as_millis() as u64, "in-flight requests did not finish within the shutdown grace");
    }
    let _ = crate::store::settled(crate::store::Store::flush(&*app.store)).await;
    tracing::info!("stopped");
}

async fn route(app: &Arc<App>, peer: SocketAddr, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path();
    let control = ["/a2a/api", "/a2a/ui"].iter().any(|p| path == *p || path.starts_with(&format!("{p}/")));
    if control {
        if !is_loopback(peer.ip()) {
            return plain(403, "the control API answers loopback callers only");
        }
        return control::handle(app, req).await;
    }
    let Some((instance, kind)) = app.routes().resolve(path) else {
        return plain(404, &format!("no agent at {path}"));
    };
    let allowed = match kind {
        RouteKind::Card => [Method::GET, Method::HEAD].contains(req.method()),
        RouteKind::Rpc => req.method() == Method::POST,
    };
    if !allowed {
        let mut r = plain(405, &format!("{} is not allowed here", req.method()));
        let allow = if kind == RouteKind::Card { "GET, HEAD" } else { "POST" };
        r.headers_mut().insert(header::ALLOW, header::HeaderValue::from_static(allow));
        return r;
    }
    if kind == RouteKind::Rpc && instance.record.auth_token_env.is_some() {
        // A named secret that is not set refuses every call (fail closed).
        let presented = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if !instance.token.as_deref().is_some_and(|t| crate::credentials::bearer_matches(presented, t)) {
            app.metrics.rejection("auth");
            return unauthorized(app);
        }
    }
    if kind == RouteKind::Rpc {
        let agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok());
        app.activity.seen(&instance.record.id, peer.ip(), agent, crate::tasks::now_ms());
    }
    let limit = instance.record.limits.max_body_bytes;
    let (mut parts, body) = match read_body(req, limit).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    // Components never see the caller's credentials.
    parts.headers.remove(header::AUTHORIZATION);
    let req = Request::from_parts(parts, Full::new(body));
    app.host.handle(app, instance, Route::Http(kind), peer, req).await
}

/// HTTP 401 with `WWW-Authenticate: Bearer` and a JSON-RPC UNAUTHORIZED body.
fn unauthorized(app: &App) -> Response<Body> {
    let e = a2a_protocol::RpcError::new(a2a_protocol::ErrorKind::Unauthorized, "missing or invalid bearer token: send Authorization: Bearer <token>");
    let body = a2a_protocol::jsonrpc::failure(&serde_json::Value::Null, &e, app.config.protocol.legacy_error_codes);
    let mut r = json(401, &body);
    r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
    r
}

/// Reads the body up to `limit` bytes: 413 beyond (by `Content-Length`, or while reading,
/// never buffering more), 400 if unreadable.
pub async fn read_body(req: Request<Incoming>, limit: u64) -> Result<(http::request::Parts, Bytes), Response<Body>> {
    let too_large = || plain(413, &format!("request body is larger than the limit of {limit} bytes"));
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let (parts, body) = req.into_parts();
    match Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX)).collect().await {
        Ok(c) => Ok((parts, c.to_bytes())),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(too_large()),
        Err(e) => Err(plain(400, &format!("cannot read the request body: {e}"))),
    }
}

/// Used by the control API for its fixed limit.
pub const CONTROL_BODY_LIMIT: u64 = 1 << 20;
