//! The HTTP server: hyper 1 over TCP with NODELAY, the routing of the two surfaces (SPEC §1),
//! bearer auth and body limits before any component runs, and graceful shutdown.

mod control;
pub mod guard;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::host::{Body, CallNote, Route, full};
use crate::instances::RouteKind;

pub use guard::is_loopback;

/// A plain JSON answer `{"error": message}` with `status`.
pub fn plain(status: u16, message: &str) -> Response<Body> {
    json(status, &serde_json::json!({ "error": message }))
}

/// A JSON answer.
pub fn json(status: u16, value: &serde_json::Value) -> Response<Body> {
    Response::builder().status(status).header(header::CONTENT_TYPE, "application/json").body(full(value.to_string())).expect("static response parts are valid")
}

/// A transport failure on the A2A surface: HTTP `status` with a JSON-RPC error envelope, so A2A
/// clients decode every answer the same way.
pub fn rpc_failure(status: u16, kind: a2a_protocol::ErrorKind, message: &str, legacy: bool) -> Response<Body> {
    rpc_error(status, &a2a_protocol::RpcError::new(kind, message), legacy)
}

/// [`rpc_failure`] of a whole error: its `Retry-After` travels as the header too.
fn rpc_error(status: u16, e: &a2a_protocol::RpcError, legacy: bool) -> Response<Body> {
    let mut r = json(status, &a2a_protocol::jsonrpc::failure(&serde_json::Value::Null, e, legacy));
    if let Some(v) = e.retry_after().and_then(|secs| header::HeaderValue::from_str(&secs).ok()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// Which surfaces a listener serves (SPEC §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surfaces {
    /// The A2A endpoints and the control surface (no `--control-listen`).
    Both,
    /// The A2A endpoints only; `/a2a/api` and `/a2a/ui` answer 404.
    Public,
    /// The control surface only.
    Control,
}

/// Serves `listener` until `shutdown` fires, then stops accepting and lets in-flight requests
/// finish up to the configured grace. At most `connections` are open at once (shared by every
/// listener): at the cap new clients wait in the listen backlog; a failing accept (e.g. out of
/// file descriptors) backs off instead of spinning.
pub async fn serve(app: Arc<App>, listener: TcpListener, surfaces: Surfaces, connections: Arc<tokio::sync::Semaphore>, shutdown: CancellationToken) {
    let tracker = tokio_util::task::TaskTracker::new();
    let settings = &app.config.runtime;
    let idle = Duration::from_millis(settings.idle_timeout_ms.max(100));
    let grace = Duration::from_millis(settings.shutdown_grace_ms);
    let mut backoff = AcceptBackoff::default();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = connections.clone().acquire_owned() => p.expect("the connection semaphore is never closed"),
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    backoff.reset();
                    a
                }
                Err(e) => {
                    tokio::time::sleep(backoff.failed(&e)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (app, shutdown) = (app.clone(), shutdown.clone());
        // Requests of this connection being answered (their bodies included).
        let busy = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = busy.clone();
        let service = hyper::service::service_fn(move |req| {
            let (app, guard) = (app.clone(), Busy::new(&counted));
            async move { Ok::<_, Infallible>(route(&app, peer, surfaces, req).await.map(|body| Holding { body, _slot: guard }.boxed_unsync())) }
        });
        // The header timeout also runs while a kept-alive connection waits for its next request,
        // so it closes slow headers and idle connections alike; a response being streamed is not
        // waiting for a head and is never cut by it.
        let conn = hyper::server::conn::http1::Builder::new()
            .keep_alive(true)
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(idle)
            .max_headers(100)
            .serve_connection(TokioIo::new(stream), service);
        tracker.spawn(async move {
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = shutdown.cancelled() => {
                    // Idle, or half-way through a request head: closed at once. Answering: up to the grace.
                    if busy.load(std::sync::atomic::Ordering::Acquire) > 0 {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(grace, conn).await;
                    }
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        tracing::warn!(grace_ms = grace.as_millis() as u64, "in-flight requests did not finish within the shutdown grace");
    }
}

/// Counts a request of a connection from its arrival until its response body is gone.
struct Busy(Arc<std::sync::atomic::AtomicUsize>);

impl Busy {
    fn new(count: &Arc<std::sync::atomic::AtomicUsize>) -> Busy {
        count.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Busy(count.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// How long to wait after a failed accept: doubling from 10 ms to 1 s, logged at most once per
/// 10 s with how many failed since.
#[derive(Default)]
struct AcceptBackoff {
    delay_ms: u64,
    failures: u64,
    logged: Option<Instant>,
}

impl AcceptBackoff {
    fn failed(&mut self, e: &std::io::Error) -> Duration {
        self.failures += 1;
        self.delay_ms = (self.delay_ms * 2).clamp(10, 1000);
        if self.logged.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
            tracing::warn!(error = %e, failures = self.failures, "accept failed (out of file descriptors? raise the limit or lower runtime.maxConnections)");
            self.logged = Some(Instant::now());
            self.failures = 0;
        }
        Duration::from_millis(self.delay_ms)
    }

    fn reset(&mut self) {
        self.delay_ms = 0;
    }
}

async fn route(app: &Arc<App>, peer: SocketAddr, surfaces: Surfaces, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    if crate::instances::control_surface(&path).is_some() && surfaces != Surfaces::Public {
        let (response, action, refused) = control_request(app, peer, req).await;
        let status = response.status().as_u16();
        let ms = millis(started);
        let what = action.as_deref().unwrap_or("");
        if let Some(why) = refused {
            tracing::warn!(%peer, %method, %path, status, ms, why, "control request refused");
        } else if status >= 500 {
            tracing::warn!(%peer, %method, %path, action = what, status, ms, "control request failed");
        } else {
            tracing::info!(%peer, %method, %path, action = what, status, ms, "control request");
        }
        return response;
    }
    let note = CallNote::default();
    let (response, instance) = if surfaces == Surfaces::Control {
        (plain(404, &format!("the control listener serves only /a2a/api and /a2a/ui, not {path}")), None)
    } else {
        a2a_request(app, peer, req, &note).await
    };
    let status = response.status().as_u16();
    let ms = millis(started);
    let call = note.take();
    let (instance, a2a_method, task) = (instance.as_deref().unwrap_or(""), call.method.as_deref().unwrap_or(""), call.task_id.as_deref().unwrap_or(""));
    let outcome = call.outcome.as_deref().unwrap_or("");
    if matches!(status, 401 | 403 | 429) || status >= 500 {
        tracing::warn!(%peer, instance, %path, a2a_method, outcome, status, ms, task, "a2a request refused");
    } else {
        tracing::info!(%peer, instance, %path, a2a_method, outcome, status, ms, task, "a2a request");
    }
    response
}

/// Milliseconds since `started`, to the microsecond.
fn millis(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

/// A request to the control surface, after its guards; the action it named and why the guards
/// refused it, for the log.
async fn control_request(app: &Arc<App>, peer: SocketAddr, req: Request<Incoming>) -> (Response<Body>, Option<String>, Option<&'static str>) {
    let refusal = if !is_loopback(peer.ip()) {
        Err(guard::Refusal { status: 403, message: "the control API answers loopback callers only" })
    } else {
        guard::check(req.method(), req.headers())
    };
    if let Err(r) = refusal {
        return (control::refusal(r.status, r.message), None, Some(r.message));
    }
    let (response, action) = control::handle(app, req).await;
    (response, action, None)
}

/// A request to an instance's card or JSON-RPC endpoint: routing, auth and the body limit before
/// its component runs; the instance id, for the log.
async fn a2a_request(app: &Arc<App>, peer: SocketAddr, req: Request<Incoming>, note: &CallNote) -> (Response<Body>, Option<String>) {
    let legacy = app.config.protocol.legacy_error_codes;
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
                app.metrics.rejection("auth");
                return (unauthorized(legacy), id);
            }
        }
        let agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok());
        app.activity.seen(&instance.record.id, peer.ip(), agent, crate::tasks::now_ms());
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
    let slot = match wants_stream.then(|| app.admission.acquire_stream(&instance.record.id, instance.record.limits.max_streams, app.config.runtime.max_streams)) {
        Some(Err(why)) => {
            app.metrics.rejection("streams");
            let e = a2a_protocol::RpcError { retry_after_ms: Some(1000), ..a2a_protocol::RpcError::new(a2a_protocol::ErrorKind::RateLimited, why) };
            return (rpc_error(429, &e, legacy), id);
        }
        Some(Ok(slot)) => Some(slot),
        None => None,
    };
    let req = Request::from_parts(parts, Full::new(body));
    let response = app.host.handle(app, instance, Route::Http(kind), peer, req, note).await;
    match slot {
        Some(slot) if crate::host::is_event_stream(&response) => (response.map(|body| Holding { body, _slot: slot }.boxed_unsync()), id),
        _ => (response, id),
    }
}

/// A response body that holds something (an open-stream slot) until it ends or is dropped.
struct Holding<T> {
    body: Body,
    _slot: T,
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

/// Reads the body up to `limit` bytes: 413 beyond (by `Content-Length`, or while reading,
/// never buffering more), 408 when it arrives slower than the runtime settings allow, 400 if
/// unreadable; the status and what to fix. The bytes are copied into one buffer as they come, so
/// memory follows the bytes received, not the packets they came in.
pub async fn read_body(req: Request<Incoming>, limit: u64, settings: &crate::config::RuntimeSettings) -> Result<(http::request::Parts, Bytes), (u16, String)> {
    let too_large = || (413, format!("request body is larger than the limit of {limit} bytes"));
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let (parts, mut body) = req.into_parts();
    let mut buf = bytes::BytesMut::with_capacity(declared.unwrap_or(0).min(64 << 10) as usize);
    let started = tokio::time::Instant::now();
    loop {
        let deadline = started + settings.body_allowance(buf.len() as u64);
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => {
                let rate = settings.min_body_bytes_per_sec;
                return Err((408, format!("the request body arrived too slowly ({} bytes in {:.1} s; send at least {rate} bytes/s)", buf.len(), started.elapsed().as_secs_f64())));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err((400, format!("cannot read the request body: {e}"))),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if (buf.len() + data.len()) as u64 > limit {
                        return Err(too_large());
                    }
                    buf.extend_from_slice(&data);
                }
            }
        }
    }
    Ok((parts, buf.freeze()))
}

/// Used by the control API for its fixed limit.
pub const CONTROL_BODY_LIMIT: u64 = 1 << 20;
