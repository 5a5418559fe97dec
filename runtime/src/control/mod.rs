//! The control API at `/a2a/api` (docs/control.md "Control API"): reads and typed actions over the runtime's records.
//! Loopback callers only, Host/Origin/content type checked (by the server, before this runs).

mod connections;
mod console;
mod inbound;
mod keys;
mod reads;
mod schemes;
mod views;
mod watch;
mod work;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{Value, json};

use control_api::{Action, Refusal};

use crate::app::App;
use crate::body::read_body;
use crate::hosts::server::{CallNote, Invocation, Route};
use crate::instances::{Instance, RouteKind};
use crate::responses::{Body, json as answer};

/// Actions that change nothing the panel shows (so the feed does not tell of them).
const LOOKS_ONLY: &[&str] = &[
    "outbound.discover",
    "outbound.call",
    "inbound.sendTest",
    "inbound.keys.list",
];

/// The control API's body limit.
const CONTROL_BODY_LIMIT: u64 = 1 << 20;

/// The one failure shape of the control surface, reads and actions alike:
/// `{"ok": false, "message": …}` with `status`.
pub fn refusal(status: u16, message: &str) -> Response<Body> {
    answer(status, &json!({ "ok": false, "message": message }))
}

/// Answers one control request (the guards have passed); the action it named, for the log.
pub async fn handle(app: &Arc<App>, req: Request<Incoming>) -> (Response<Body>, Option<String>) {
    let path = req.uri().path().trim_end_matches('/').to_owned();
    let query = Query(
        form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
            .into_owned()
            .collect(),
    );
    let param = |name: &str| query.get(name);
    if crate::instances::control_surface(&path) == Some("/a2a/ui") {
        return (panel(req.method(), &path, req.headers()), None);
    }
    let response = match (req.method().clone(), path.as_str()) {
        (Method::GET, "/a2a/api") => reads::snapshot(app, &query).await,
        (Method::GET, "/a2a/api/presets") => answer(200, &reads::presets(app)),
        (Method::GET, "/a2a/api/components") => answer(200, &reads::components(app)),
        (Method::GET, "/a2a/api/card") => reads::card(app, param("id")).await,
        (Method::GET, "/a2a/api/card/checks") => reads::card_checks(app, param("id")).await,
        (Method::GET, "/a2a/api/task") => reads::task(app, param("id")).await,
        (Method::GET, "/a2a/api/push") => reads::push(app, param("id"), param("taskId")).await,
        (Method::GET, "/a2a/api/session") => {
            reads::session(app, param("contextId"), param("serverId")).await
        }
        (Method::GET, "/a2a/api/events") => watch::events(app),
        (Method::POST, "/a2a/api/rpc") => console::rpc(app, param("id"), req).await,
        (Method::GET, "/a2a/api/metrics") => reads::metrics(app, param("format")).await,
        (Method::GET, "/a2a/api/update") => answer(
            200,
            &app.update
                .answer(matches!(param("refresh"), Some("1" | "true")))
                .await,
        ),
        (Method::POST, "/a2a/api") => {
            let body = match read_body(req, CONTROL_BODY_LIMIT, &app.config.runtime).await {
                Ok((_, body)) => body,
                Err((status, message)) => return (refusal(status, &message), None),
            };
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Object(action)) => {
                    let name = action
                        .get("action")
                        .and_then(Value::as_str)
                        .map(|a| a.chars().take(64).collect::<String>());
                    let response = match act(app, &action).await {
                        Ok(v) => {
                            if !name.as_deref().is_some_and(|n| LOOKS_ONLY.contains(&n)) {
                                app.services().activity.feed().publish("change", || {
                                    json!({ "action": name, "id": v.get("id").or(action.get("id")) })
                                });
                            }
                            answer(200, &v)
                        }
                        Err(message) => {
                            tracing::info!(action = name.as_deref().unwrap_or(""), why = %message, "control action refused");
                            refusal(409, &message)
                        }
                    };
                    return (response, name);
                }
                Ok(_) => refusal(400, "the body must be a JSON object with an \"action\""),
                Err(e) => refusal(400, &format!("the body is not valid JSON: {e}")),
            }
        }
        (Method::GET | Method::POST, p) => refusal(404, &format!("no control resource at {p}")),
        (m, _) => not_allowed(
            &format!("{m} is not allowed on the control API; use GET or POST"),
            "GET, POST",
        ),
    };
    (response, None)
}

/// A 405 saying `message`, with the methods `allow`ed.
fn not_allowed(message: &str, allow: &'static str) -> Response<Body> {
    let mut r = refusal(405, message);
    r.headers_mut()
        .insert(http::header::ALLOW, http::HeaderValue::from_static(allow));
    r
}

/// The panel's files: GET and HEAD only.
fn panel(method: &Method, path: &str, headers: &http::HeaderMap) -> Response<Body> {
    if method != Method::GET && method != Method::HEAD {
        let why = format!("{method} is not allowed on the panel; use GET");
        return not_allowed(&why, "GET, HEAD");
    }
    crate::panel::serve(method, path, headers)
        .unwrap_or_else(|| refusal(404, &format!("the panel has no file at {path}")))
}

/// Runs one action: `Ok(body)` (200) or `Err(message)` (409) saying what to fix.
async fn act(app: &Arc<App>, body: &serde_json::Map<String, Value>) -> Result<Value, Refusal> {
    match control_api::parse(body)? {
        Action::InboundCreate(a) => inbound::create(app, &a).await,
        Action::InboundUpdate(a) => inbound::update(app, &a).await,
        Action::InboundRemove(a) => inbound::remove(app, a.id.as_str()).await,
        Action::InboundEnable(a) => inbound::set_enabled(app, a.id.as_str(), true).await,
        Action::InboundDisable(a) => inbound::set_enabled(app, a.id.as_str(), false).await,
        Action::InboundSetAuth(a) => inbound::set_auth(app, &a).await,
        Action::InboundSetOidc(a) => schemes::set_oidc(app, &a).await,
        Action::InboundSetMtls(a) => schemes::set_mtls(app, &a).await,
        Action::InboundKeysCreate(a) => keys::create(app, &a).await,
        Action::InboundKeysList(a) => keys::list(app, a.id.as_str()),
        Action::InboundKeysRevoke(a) => keys::revoke(app, &a).await,
        Action::InboundSendTest(a) => inbound::send_test(app, &a).await,
        Action::InboundClose(a) => work::close_peer(app, a.id.as_str()).await,
        Action::TaskCancel(a) => work::cancel_task(app, a.id.as_str()).await,
        Action::SessionCancel(a) => work::end_session(app, &a, false).await,
        Action::SessionClose(a) => work::end_session(app, &a, true).await,
        Action::ComponentReload(a) => work::reload(app, a.name.as_str()).await,
        Action::OutboundCreate(a) => connections::create(app, &a).await,
        Action::OutboundUpdate(a) => connections::update(app, &a).await,
        Action::OutboundRemove(a) => connections::remove(app, a.id.as_str()).await,
        Action::OutboundEnable(a) => connections::set_enabled(app, a.id.as_str(), true).await,
        Action::OutboundDisable(a) => connections::set_enabled(app, a.id.as_str(), false).await,
        Action::OutboundRefresh(a) => connections::refresh(app, a.id.as_str()).await,
        Action::OutboundSetAuth(a) => connections::set_auth(app, &a).await,
        Action::OutboundSetOAuth(a) => connections::set_oauth(app, &a).await,
        Action::OutboundDiscover(a) => connections::discover(app, &a).await,
        Action::OutboundCall(a) => connections::call(app, &a).await,
    }
}

/// `{"ok": true, "message": …}`.
fn done(message: String) -> Value {
    json!({ "ok": true, "message": message })
}

/// The decoded query parameters of a read.
pub struct Query(Vec<(String, String)>);

impl Query {
    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The loopback address the runtime's own calls come from.
fn control_peer() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Runs a request through an instance's own component, as the runtime (no HTTP auth, same gate
/// and task lifecycle): the body it answered.
async fn invoke(
    app: &Arc<App>,
    instance: &Arc<Instance>,
    route: Route,
    req: Request<Bytes>,
) -> Result<(u16, Bytes), String> {
    let call = Invocation {
        instance: instance.clone(),
        route,
        peer: control_peer(),
        caller: None,
        note: CallNote::default(),
    };
    let response = app.host.handle(call, req).await;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("the component's answer broke off: {e:?}"))?
        .to_bytes();
    Ok((status, body))
}

/// Calls a JSON-RPC method on an instance as the runtime; the `result`, or the error's message.
pub async fn call(
    app: &Arc<App>,
    instance: &Arc<Instance>,
    method: &str,
    params: Value,
) -> Result<Value, String> {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string();
    let req = Request::post(&instance.record.endpoint_path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Bytes::from(body))
        .expect("a static request is valid");
    let (status, bytes) = invoke(app, instance, Route::Internal, req).await?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| {
        format!("the component answered {method} with HTTP {status} and a body that is not JSON")
    })?;
    match &v["error"] {
        Value::Null => Ok(v["result"].clone()),
        Value::String(plain) => Err(plain.clone()),
        e => Err(e["message"].as_str().map_or_else(
            || format!("the component refused {method}: {e}"),
            str::to_owned,
        )),
    }
}

/// The instance's card, as its own component serves it.
pub async fn card_of(app: &Arc<App>, instance: &Arc<Instance>) -> Result<Value, String> {
    let path = format!("{}/agent-card.json", instance.record.endpoint_path);
    let req = Request::get(path)
        .header("host", "localhost")
        .body(Bytes::new())
        .expect("a static request is valid");
    let (status, bytes) = invoke(app, instance, Route::Http(RouteKind::Card), req).await?;
    if status != 200 {
        return Err(format!(
            "the component answered the card request with HTTP {status}"
        ));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("the card is not JSON: {e}"))
}
