//! `POST /a2a/api/rpc?id=<inbound>`: the panel's console. The body is a JSON-RPC request for that
//! instance's component, answered as the A2A endpoint answers it (JSON, or SSE with
//! `Last-Event-ID` honoured), through the same gate, limits and task lifecycle. Like
//! `inbound.sendTest` it runs as the operator: it skips only the bearer check, so the panel never
//! needs the token, and it works on the control listener where the public one is out of reach.

use std::sync::Arc;

use http::{Request, Response, header};
use hyper::body::Incoming;

use super::{CONTROL_BODY_LIMIT, control_peer, refusal};
use crate::app::App;
use crate::body::read_body;
use crate::hosts::server::{CallNote, Invocation, Route};
use crate::responses::{Body, Framing, holding_stream};

/// Runs one console request on the instance `id`.
pub async fn rpc(app: &Arc<App>, id: Option<&str>, req: Request<Incoming>) -> Response<Body> {
    let Some(id) = id.filter(|id| !id.is_empty()) else {
        return refusal(400, "name the instance: POST /a2a/api/rpc?id=<inbound id>");
    };
    let served = app.instances();
    let Some(instance) = served
        .iter()
        .find(|i| i.record.id == id && i.record.enabled)
        .cloned()
    else {
        let known = app.records().iter().any(|r| r.id == id);
        let why = if known {
            format!("inbound instance {id:?} is not served (disabled?): enable it first")
        } else {
            format!("no inbound instance {id:?}")
        };
        return refusal(404, &why);
    };
    let limit = instance
        .record
        .limits
        .max_body_bytes
        .min(CONTROL_BODY_LIMIT);
    let (mut parts, body) = match read_body(req, limit, &app.config.runtime).await {
        Ok(read) => read,
        Err((status, message)) => return refusal(status, &message),
    };
    parts.headers.remove(header::AUTHORIZATION);
    parts.uri = match instance.record.endpoint_path.parse() {
        Ok(uri) => uri,
        Err(_) => return refusal(500, "the instance's endpoint path is not a valid URI"),
    };
    let streams = crate::responses::accepts_sse(&parts.headers);
    let slot = match app
        .services()
        .stream_slot(&instance, streams, Framing::JsonRpc)
    {
        Ok(slot) => slot,
        Err(refused) => return refused,
    };
    let call = Invocation {
        instance,
        route: Route::Internal,
        peer: control_peer(),
        caller: None,
        note: CallNote::default(),
    };
    let response = app
        .host
        .handle(call, Request::from_parts(parts, body))
        .await;
    holding_stream(response, slot)
}
