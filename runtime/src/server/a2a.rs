//! The A2A surface: an instance's card and JSON-RPC endpoint, with routing, auth, the body
//! limit and the stream slot decided before its component runs.

use std::net::SocketAddr;
use std::sync::Arc;

use a2a_protocol::ErrorKind;
use http::{Method, Request, Response, header};
use hyper::body::Incoming;

use crate::app::App;
use crate::body::read_body;
use crate::hosts::server::{CallNote, Invocation, Route};
use crate::identity::{self, Caller, Scheme};
use crate::instances::{Instance, RouteKind};
use crate::responses::{Body, Framing, accepts_sse, holding_stream, rpc_failure};
use crate::tls::PeerCert;

/// A request to an instance's card or JSON-RPC endpoint: routing, auth and the body limit before
/// its component runs; the instance id, for the log.
pub async fn request(
    app: &Arc<App>,
    peer: SocketAddr,
    req: Request<Incoming>,
    note: &CallNote,
) -> (Response<Body>, Option<String>) {
    let path = req.uri().path();
    let Some((instance, kind)) = app.routes().resolve(path) else {
        let message =
            format!("no agent at {path}; the control API lists the instances and their card URLs");
        return (
            Refusals::of(app, RouteKind::Rpc, req.headers()).invalid(404, &message),
            None,
        );
    };
    let id = Some(instance.record.id.clone());
    match serve(app, instance, kind, peer, req, note).await {
        Ok(r) | Err(r) => (r, id),
    }
}

/// How one request's refusals are framed: as its binding answers errors, in the JSON media
/// type the request used.
#[derive(Clone, Copy)]
struct Refusals {
    framing: Framing,
    legacy: bool,
    media: &'static str,
}

impl Refusals {
    fn of(app: &App, kind: RouteKind, headers: &header::HeaderMap) -> Refusals {
        let framing = match kind {
            RouteKind::Rest => Framing::Rest,
            RouteKind::Card | RouteKind::Rpc => Framing::JsonRpc,
        };
        let legacy = app.config.protocol.legacy_error_codes;
        let value = |name| headers.get(name).and_then(|v| v.to_str().ok());
        let media =
            a2a_protocol::methods::answer_type(value(header::CONTENT_TYPE), value(header::ACCEPT))
                .unwrap_or("application/json");
        Refusals {
            framing,
            legacy,
            media,
        }
    }

    /// A failure of `kind` with `status`, in the request's media type.
    fn failure(self, status: u16, kind: ErrorKind, message: &str) -> Response<Body> {
        let mut r = rpc_failure(self.framing, status, kind, message, self.legacy);
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static(self.media),
        );
        r
    }

    /// An INVALID_REQUEST failure with `status`.
    fn invalid(self, status: u16, message: &str) -> Response<Body> {
        self.failure(status, ErrorKind::InvalidRequest, message)
    }

    /// HTTP 401 with a `WWW-Authenticate: Bearer` challenge naming the error `refused` had, and
    /// an UNAUTHORIZED body saying what `record` takes.
    fn unauthorized(
        self,
        record: &crate::records::InstanceRecord,
        refused: &identity::Refused,
    ) -> Response<Body> {
        let takes: Vec<&str> = identity::schemes(record)
            .map(|s| match s {
                Scheme::Bearer => "Authorization: Bearer <token>",
                Scheme::ApiKey => "X-API-Key: <key>",
                Scheme::Oidc(_) => "Authorization: Bearer <token from the OpenID Connect issuer>",
                Scheme::Mtls => "a client certificate (over TLS)",
            })
            .collect();
        let what = match refused.error {
            Some("insufficient_scope") => "the token lacks a required scope",
            Some(_) => "invalid credentials",
            None => "missing credentials",
        };
        let message = format!("{what}: send {}", takes.join(" or "));
        let mut r = self.failure(401, ErrorKind::Unauthorized, &message);
        let mut challenge = format!("Bearer realm=\"{}\"", record.id);
        if let Some(error) = refused.error {
            challenge.push_str(&format!(", error=\"{error}\""));
        }
        if let (Some("insufficient_scope"), Some(s)) = (refused.error, &record.oidc) {
            challenge.push_str(&format!(", scope=\"{}\"", s.scopes.join(" ")));
        }
        if let Ok(v) = header::HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }
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
    let refuse = Refusals::of(app, kind, req.headers());
    check_method(kind, req.method(), refuse)?;
    // The card is public: its requests are nobody's, and reach no task.
    let caller = match kind {
        RouteKind::Card => Caller::anonymous(),
        _ => admit(app, &instance, peer, &req, note, refuse).await?,
    };
    let limit = instance.record.limits.max_body_bytes;
    let (parts, body) = read_body(req, limit, &app.config.runtime)
        .await
        .map_err(|(status, message)| refuse.invalid(status, &message))?;
    let call = invocation(instance, kind, peer, caller, note);
    dispatch(app, call, kind, parts, body, refuse).await
}

/// A JSON-RPC request the host made of another binding's (gRPC): admitted and served as one
/// that came over HTTP, its body already read and bounded.
pub async fn serve_transcoded(
    app: &Arc<App>,
    instance: Arc<Instance>,
    peer: SocketAddr,
    req: Request<bytes::Bytes>,
    note: &CallNote,
) -> Result<Response<Body>, Response<Body>> {
    let refuse = Refusals::of(app, RouteKind::Rpc, req.headers());
    let caller = admit(app, &instance, peer, &req, note, refuse).await?;
    let (parts, body) = req.into_parts();
    let call = invocation(instance, RouteKind::Rpc, peer, caller, note);
    dispatch(app, call, RouteKind::Rpc, parts, body, refuse).await
}

/// The component call of an admitted request.
fn invocation(
    instance: Arc<Instance>,
    kind: RouteKind,
    peer: SocketAddr,
    caller: Caller,
    note: &CallNote,
) -> Invocation {
    Invocation {
        instance,
        route: Route::Http(kind),
        peer,
        caller: Some(caller),
        note: note.clone(),
    }
}

/// The caller of a request to `instance`, by its credentials (refused: noted and answered),
/// and its visit counted.
async fn admit<B>(
    app: &App,
    instance: &Instance,
    peer: SocketAddr,
    req: &Request<B>,
    note: &CallNote,
    refuse: Refusals,
) -> Result<Caller, Response<Body>> {
    let cert = req.extensions().get::<Arc<PeerCert>>().cloned();
    let caller = authenticate(app, instance, req.headers(), cert.as_deref(), refuse)
        .await
        .map_err(|(why, r)| {
            note.refused(why);
            r
        })?;
    let agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let now = crate::clock::now_ms();
    app.services()
        .activity
        .seen(&instance.record.id, peer.ip(), agent, now);
    Ok(caller)
}

/// Runs an admitted request's component (`call`, arrived by `kind`), after its stream slot.
async fn dispatch(
    app: &Arc<App>,
    call: Invocation,
    kind: RouteKind,
    mut parts: http::request::Parts,
    body: bytes::Bytes,
    refuse: Refusals,
) -> Result<Response<Body>, Response<Body>> {
    // Components never see the caller's credentials.
    parts.headers.remove(header::AUTHORIZATION);
    parts.headers.remove(identity::API_KEY_HEADER);
    if kind == RouteKind::Rest {
        parts.uri = below(&parts.uri, &call.instance.record.endpoint_path)
            .map_err(|e| refuse.invalid(400, &e))?;
    }
    let streams = match kind {
        RouteKind::Rpc => accepts_sse(&parts.headers),
        RouteKind::Rest => a2a_protocol::rest::streams(parts.uri.path()),
        RouteKind::Card => false,
    };
    let slot = app
        .services()
        .stream_slot(&call.instance, streams, refuse.framing)?;
    let req = Request::from_parts(parts, body);
    let response = app.host.handle(call, req).await;
    Ok(holding_stream(response, slot))
}

/// The request target below `endpoint` (what the HTTP+JSON binding routes on), query kept.
fn below(uri: &http::Uri, endpoint: &str) -> Result<http::Uri, String> {
    let path = uri.path().strip_prefix(endpoint).unwrap_or("/");
    let target = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    target
        .parse()
        .map_err(|e| format!("the request target is not valid: {e}"))
}

/// The card answers GET and HEAD, the JSON-RPC endpoint POST; anything else is a 405.
fn check_method(kind: RouteKind, method: &Method, refuse: Refusals) -> Result<(), Response<Body>> {
    let (allowed, allow) = match kind {
        RouteKind::Card => ([Method::GET, Method::HEAD].contains(method), "GET, HEAD"),
        RouteKind::Rpc => (method == Method::POST, "POST"),
        // The binding says which method each of its paths takes; these are all it uses.
        RouteKind::Rest => (
            [Method::GET, Method::POST, Method::DELETE].contains(method),
            "GET, POST, DELETE",
        ),
    };
    if allowed {
        return Ok(());
    }
    let mut r = refuse.invalid(405, &format!("{method} is not allowed here; use {allow}"));
    r.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    Err(r)
}

/// One `Authorization` and one `X-API-Key` header at most, then the caller by the instance's
/// schemes (docs/auth.md "Authentication"): a token secret that is not set refuses the token (fail
/// closed).
async fn authenticate(
    app: &App,
    instance: &Instance,
    headers: &header::HeaderMap,
    cert: Option<&PeerCert>,
    refuse: Refusals,
) -> Result<Caller, (&'static str, Response<Body>)> {
    for (name, why) in [
        (
            header::AUTHORIZATION.as_str(),
            "several_authorization_headers",
        ),
        (identity::API_KEY_HEADER, "several_api_key_headers"),
    ] {
        if headers.get_all(name).iter().nth(1).is_some() {
            let r = refuse.invalid(400, &format!("send one {name} header, not several"));
            return Err((why, r));
        }
    }
    let token = instance.token.as_deref();
    identity::authenticate(&instance.record, token, headers, cert, &app.verifier)
        .await
        .map_err(|refused| {
            app.services().metrics.rejection("auth");
            (refused.why, refuse.unauthorized(&instance.record, &refused))
        })
}
