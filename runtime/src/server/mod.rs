//! The HTTP server: hyper 1 over TCP with NODELAY, the routing of the two surfaces (docs/control.md "Control API"),
//! bearer auth and body limits before any component runs, and graceful shutdown.

mod a2a;
mod grpc;
pub mod probes;
mod slots;
pub mod surface_guard;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulConnection;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::app::App;
use crate::control;
use crate::hosts::server::CallNote;
use crate::responses::{Body, holding, json};
use crate::telemetry::{access, trace};
use crate::tls::{PeerCert, Tls};

pub use slots::Slots;
pub use surface_guard::is_loopback;

/// Which surfaces a listener serves (docs/control.md "Control API").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surfaces {
    /// The A2A endpoints and the control surface (no `--control-listen`).
    Both,
    /// The A2A endpoints only; `/a2a/api` and `/a2a/ui` answer 404.
    Public,
    /// The control surface only.
    Control,
}

/// Serves `listener` (over TLS with `tls`) until `shutdown` fires, then stops accepting and lets in-flight requests
/// finish up to the configured grace. Connections take `slots` (shared by listeners): at the cap
/// new clients wait in the listen backlog, one from an address that holds its share is closed;
/// a failing accept (e.g. out of file descriptors) backs off instead of spinning.
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    surfaces: Surfaces,
    tls: Option<Arc<Tls>>,
    slots: Arc<Slots>,
    shutdown: CancellationToken,
) {
    let tracker = tokio_util::task::TaskTracker::new();
    let grace = Duration::from_millis(app.config.runtime.shutdown_grace_ms);
    let mut backoff = AcceptBackoff::default();
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = slots.free() => p,
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
        let Some(slot) = slots.take(peer.ip(), permit) else {
            continue;
        };
        let (app, shutdown, tls) = (app.clone(), shutdown.clone(), tls.clone());
        tracker.spawn(async move {
            match tls {
                None => connection(app, stream, peer, surfaces, shutdown).await,
                Some(tls) => secure(app, &tls, stream, peer, surfaces, shutdown).await,
            }
            drop(slot);
        });
    }
    drop(listener);
    tracker.close();
    if tokio::time::timeout(grace, tracker.wait()).await.is_err() {
        let grace_ms = grace.as_millis() as u64;
        tracing::warn!(
            grace_ms,
            "in-flight requests did not finish within the shutdown grace"
        );
    }
}

/// Serves one plain connection until it closes: HTTP/2 when it opens with the HTTP/2 preface
/// (prior knowledge, as gRPC clients dial `host:port`), else HTTP/1.1. One that sends nothing
/// for the idle timeout is closed.
async fn connection(
    app: Arc<App>,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    surfaces: Surfaces,
    shutdown: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let idle = Duration::from_millis(app.config.runtime.idle_timeout_ms.max(100));
    let h2 = tokio::select! {
        _ = shutdown.cancelled() => return,
        opened = tokio::time::timeout(idle, prior_knowledge(&stream)) => match opened {
            Ok(Ok(h2)) => h2,
            Ok(Err(_)) | Err(_) => return,
        },
    };
    let conn = Conn {
        app,
        peer,
        surfaces,
        secure: false,
        cert: None,
    };
    conn.serve(TokioIo::new(stream), h2, shutdown).await;
}

/// What a client with prior knowledge of HTTP/2 opens a connection with (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Whether a connection's first bytes are the HTTP/2 preface; they stay unread. An HTTP/1.1
/// request differs from its first byte, so only a preface split across packets waits.
async fn prior_knowledge(stream: &tokio::net::TcpStream) -> std::io::Result<bool> {
    let mut buf = [0u8; H2_PREFACE.len()];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 || !H2_PREFACE.starts_with(&buf[..n]) {
            return Ok(false);
        }
        if n == H2_PREFACE.len() {
            return Ok(true);
        }
        // Peeking again returns the same bytes at once: give the rest a moment to arrive.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Serves one TLS connection: the handshake within the idle timeout and before shutdown (a
/// failed one is logged at debug and closed), then HTTP/2 when ALPN chose it, else HTTP/1.1.
async fn secure(
    app: Arc<App>,
    tls: &Tls,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    surfaces: Surfaces,
    shutdown: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let idle = Duration::from_millis(app.config.runtime.idle_timeout_ms.max(100));
    let handshake = tokio::time::timeout(idle, tls.acceptor().accept(stream));
    let stream = tokio::select! {
        _ = shutdown.cancelled() => return,
        done = handshake => match done {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake did not finish within the idle timeout");
                return;
            }
        },
    };
    let session = stream.get_ref().1;
    let h2 = session.alpn_protocol() == Some(b"h2");
    let cert = session
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| Arc::new(PeerCert::from_der(c)));
    let conn = Conn {
        app,
        peer,
        surfaces,
        secure: true,
        cert,
    };
    conn.serve(TokioIo::new(stream), h2, shutdown).await;
}

/// What every request of one connection shares.
struct Conn {
    app: Arc<App>,
    peer: SocketAddr,
    surfaces: Surfaces,
    /// It came over TLS.
    secure: bool,
    /// The client certificate the handshake verified.
    cert: Option<Arc<PeerCert>>,
}

impl Conn {
    /// Serves `io` until it closes; at shutdown an idle connection (or one half-way through a
    /// request head) is closed at once, one being answered gets up to the grace.
    async fn serve<I>(self, io: TokioIo<I>, h2: bool, shutdown: CancellationToken)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let settings = &self.app.config.runtime;
        let idle = Duration::from_millis(settings.idle_timeout_ms.max(100));
        let grace = Duration::from_millis(settings.shutdown_grace_ms);
        // Requests of this connection being answered (their bodies included), and how many came.
        let busy = Arc::new(Activity::default());
        let counted = busy.clone();
        let Conn {
            app,
            peer,
            surfaces,
            secure,
            cert,
        } = self;
        let link = Link {
            peer,
            surfaces,
            secure,
        };
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            let (app, guard) = (app.clone(), Busy::new(&counted));
            if let Some(cert) = &cert {
                req.extensions_mut().insert(cert.clone());
            }
            // Boxed: hyper moves the request's future a few times, and a pointer is cheaper to
            // move than the state of every route it may take.
            Box::pin(async move {
                let response = route(&app, link, req).await;
                Ok::<_, Infallible>(response.map(|body| holding(body, guard)))
            })
        });
        if h2 {
            // HTTP/2 has no header timeout: a connection that has answered nothing for `idle`
            // (its preface included) is closed.
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(hyper_util::rt::TokioTimer::new())
                .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
                .max_header_list_size(MAX_HEADER_LIST_BYTES)
                .serve_connection(io, service);
            drive(conn, &busy, Some(idle), grace, shutdown).await;
        } else {
            // The header timeout also runs while a kept-alive connection waits for its next
            // request, so it closes slow headers and idle connections alike; a response being
            // streamed is not waiting for a head and is never cut by it.
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(idle)
                .max_headers(100)
                .serve_connection(io, service);
            drive(conn, &busy, None, grace, shutdown).await;
        }
    }
}

/// Streams one HTTP/2 connection may have open at once.
const MAX_STREAMS_PER_CONNECTION: u32 = 100;
/// The largest header block of an HTTP/2 request.
const MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;

/// Where a request came from: its peer, the listener's surfaces, and whether over TLS.
#[derive(Clone, Copy)]
struct Link {
    peer: SocketAddr,
    surfaces: Surfaces,
    secure: bool,
}

/// A connection's requests: how many are being answered, and how many came.
#[derive(Default)]
struct Activity {
    open: AtomicUsize,
    seen: AtomicUsize,
}

/// Runs `conn` until it ends, or until `shutdown`: then it ends at once when idle, else after
/// its requests are answered (at most `grace`). With `idle`, a connection with no request open
/// and none come for that long is closed the same way.
async fn drive<C: GracefulConnection>(
    conn: C,
    activity: &Activity,
    idle: Option<Duration>,
    grace: Duration,
    shutdown: CancellationToken,
) {
    let mut conn = std::pin::pin!(conn);
    let quiet = async {
        let Some(idle) = idle else {
            return std::future::pending().await;
        };
        let mut seen = 0;
        loop {
            tokio::time::sleep(idle).await;
            let now = activity.seen.load(Ordering::Acquire);
            if activity.open.load(Ordering::Acquire) == 0 && now == seen {
                return;
            }
            seen = now;
        }
    };
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = shutdown.cancelled() => {}
        _ = quiet => {}
    }
    if activity.open.load(Ordering::Acquire) > 0 {
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(grace, conn).await;
    }
}

/// Counts a request of a connection from its arrival until its response body is gone.
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Busy {
        activity.open.fetch_add(1, Ordering::AcqRel);
        activity.seen.fetch_add(1, Ordering::AcqRel);
        Busy(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
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
        if self
            .logged
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
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

/// The answer of a public listener to a control request when the control surface listens apart.
const CONTROL_ELSEWHERE: &str = "this listener does not serve the control API: this server serves it on a loopback listener of its own (serve --control-listen ADDRESS); point the CLI there with --api http://ADDRESS/a2a/api or A2A_EDGE_API";

async fn route(app: &Arc<App>, link: Link, req: Request<Incoming>) -> Response<Body> {
    let Link {
        peer,
        surfaces,
        secure,
    } = link;
    let started = Instant::now();
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    if crate::instances::control_surface(&path).is_some() && surfaces != Surfaces::Public {
        let (response, action, refused) = control_request(app, peer, secure, req).await;
        let status = response.status().as_u16();
        let ms = access::ms(started.elapsed());
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
    if crate::instances::control_surface(&path).is_some() && is_loopback(peer.ip()) {
        // The control surface has a listener of its own: say so to the CLI on this machine
        // (anyone else gets the router's 404).
        tracing::debug!(%peer, %method, %path, "control request on the public listener");
        return json(404, &serde_json::json!({ "error": CONTROL_ELSEWHERE }));
    }
    if surfaces != Surfaces::Control && probes::is_probe(&path) {
        let response = probes::answer(app, &path).await;
        // Probes come every few seconds: the readiness changes are logged, not each probe.
        tracing::debug!(%peer, %path, status = response.status().as_u16(), "probe");
        return response;
    }
    let span = request_span(&req, peer);
    let note = CallNote::default();
    let (response, instance) = async {
        if surfaces == Surfaces::Control {
        (
            json(
                404,
                &serde_json::json!({ "error": format!("the control listener serves only /a2a/api and /a2a/ui, not {path}") }),
            ),
            None,
        )
        } else if is_grpc(&req) {
            grpc::request(app, peer, req, &note).await
        } else {
            a2a::request(app, peer, req, &note).await
        }
    }
    .instrument(span.clone())
    .await;
    let status = response.status().as_u16();
    span.record("http.response.status_code", i64::from(status));
    if status >= 500 {
        span.record("otel.status_code", "error");
    }
    let elapsed = started.elapsed();
    let call = note.take();
    let (instance, a2a_method, task) = (
        instance.as_deref().unwrap_or(""),
        call.method.as_deref().unwrap_or(""),
        call.task_id.as_deref().unwrap_or(""),
    );
    let line = access::Line {
        peer,
        instance,
        path: &path,
        a2a_method,
        outcome: call.outcome.as_deref().unwrap_or(""),
        // A gRPC answer is logged with the HTTP status its gRPC status stands for.
        status: call.status.unwrap_or(status),
        elapsed,
        task,
    };
    access::log(&line, &span);
    if !crate::responses::is_event_stream(&response) {
        return response;
    }
    // A stream's line above says when its head went out; this one says when it ended.
    let end = StreamEnd {
        span,
        started,
        frames: 0,
        peer,
        instance: instance.to_owned(),
        method: a2a_method.to_owned(),
        task: task.to_owned(),
    };
    response.map(|body| {
        http_body_util::BodyExt::boxed_unsync(Counted {
            body,
            end: Some(end),
        })
    })
}

/// The span of a request to an agent (HTTP's server-span conventions), a child of the trace
/// its `traceparent` names; the log's lines in it carry its ids. A card read outside any trace
/// gets none when nothing is exported: no task's page can show it, and cards are the traffic
/// that must stay cheapest.
fn request_span<B>(req: &Request<B>, peer: SocketAddr) -> tracing::Span {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    if !trace::exporting() && is_untraced_card_read(req) {
        return tracing::Span::none();
    }
    // A method outside HTTP's own is `_OTHER` (the conventions' bounded set).
    let method = match req.method().as_str() {
        m @ ("GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS") => m,
        _ => "_OTHER",
    };
    let span = tracing::info_span!(
        crate::telemetry::logging::REQUEST_SPAN,
        otel.name = method,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
        trace_id = tracing::field::Empty,
        span_id = tracing::field::Empty,
    );
    trace::continue_from(&span, req.headers());
    span.set_attribute("http.request.method", method.to_owned());
    span.set_attribute("url.path", trace::short(req.uri().path()).to_owned());
    span.set_attribute("network.peer.address", peer.ip().to_string());
    if let Some(agent) = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        span.set_attribute("user_agent.original", trace::short(agent).to_owned());
    }
    span
}

/// Whether a request reads a card ([`crate::instances::is_card_path`])
/// and names no trace it belongs to.
fn is_untraced_card_read<B>(req: &Request<B>) -> bool {
    req.method() == http::Method::GET
        && crate::instances::is_card_path(req.uri().path())
        && !req.headers().contains_key("traceparent")
}

/// Whether a request is a gRPC call (told apart by its content type).
fn is_grpc<B>(req: &Request<B>) -> bool {
    req.method() == http::Method::POST
        && req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(a2a_protocol::grpc::is_grpc)
}

/// What the log says of a stream when it ends: how long it lasted and how many events it sent.
struct StreamEnd {
    /// The request's span: it ends with the stream.
    span: tracing::Span,
    started: Instant,
    frames: u64,
    peer: SocketAddr,
    instance: String,
    method: String,
    task: String,
}

impl Drop for StreamEnd {
    fn drop(&mut self) {
        let (peer, ms, frames) = (self.peer, access::ms(self.started.elapsed()), self.frames);
        let (instance, a2a_method, task) = (&self.instance, &self.method, &self.task);
        // Entered, so the request's span ends with the stream, not when its head went out.
        self.span.in_scope(|| {
            tracing::info!(%peer, instance, a2a_method, task, ms, frames, "a2a stream ended");
        });
    }
}

/// The SSE events `chunk` carries: its `data:` lines (one per event; keep-alive comments are
/// none).
fn events_in(chunk: &[u8]) -> u64 {
    chunk
        .split(|b| *b == b'\n')
        .filter(|line| line.starts_with(b"data:"))
        .count() as u64
}

/// A stream's body, counting the events it sends.
struct Counted {
    body: Body,
    end: Option<StreamEnd>,
}

impl hyper::body::Body for Counted {
    type Data = bytes::Bytes;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                let events = frame.data_ref().map_or(0, |d| events_in(d));
                if let Some(end) = self.end.as_mut() {
                    end.frames += events;
                }
            }
            std::task::Poll::Ready(None | Some(Err(_))) => drop(self.end.take()),
            std::task::Poll::Pending => {}
        }
        polled
    }
}

/// A request to the control surface, after its guards; the action it named and why the guards
/// refused it, for the log.
async fn control_request(
    app: &Arc<App>,
    peer: SocketAddr,
    secure: bool,
    req: Request<Incoming>,
) -> (Response<Body>, Option<String>, Option<&'static str>) {
    let refusal = if !is_loopback(peer.ip()) {
        Err(surface_guard::Forbidden {
            status: 403,
            message: "the control API answers loopback callers only",
        })
    } else {
        surface_guard::check(req.method(), req.uri(), req.headers(), secure)
    };
    if let Err(r) = refusal {
        return (control::refusal(r.status, r.message), None, Some(r.message));
    }
    let (response, action) = control::handle(app, req).await;
    (response, action, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_card_reads_outside_a_trace_go_untraced() {
        let get = |path: &str, traceparent: bool| {
            let mut req = Request::get(path);
            if traceparent {
                req = req.header(
                    "traceparent",
                    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                );
            }
            req.body(()).unwrap()
        };
        assert!(is_untraced_card_read(&get("/a2a/x/agent-card.json", false)));
        assert!(is_untraced_card_read(&get(
            "/.well-known/agent-card.json",
            false
        )));
        assert!(is_untraced_card_read(&get(
            "/.well-known/agent.json",
            false
        )));
        assert!(!is_untraced_card_read(&get("/a2a/x/agent-card.json", true)));
        assert!(!is_untraced_card_read(&get("/a2a/x/tasks/t", false)));
        let post = Request::post("/a2a/x/agent-card.json").body(()).unwrap();
        assert!(!is_untraced_card_read(&post));
    }
}
