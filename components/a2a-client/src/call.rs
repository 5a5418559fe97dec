//! One remote skill call (docs/outbound.md "Outbound connections"): card, send (stream or poll), cancel on abort, the tool text.

use a2a_protocol::client::{Endpoint, Remote, endpoint, poll_delay_ms};
use a2a_protocol::{StreamResponse, compat03};
use serde_json::{Value, json};
use wasip2::http::types::Method;

use crate::net::{self, Ctx};
use a2a_guest::client::a2a::edge::outbound;
use a2a_guest::client::exports::a2a::edge::client::{CallError, CallRequest};
use a2a_guest::uuid;

const JSON: (&str, &str) = ("content-type", "application/json");

/// The remote card as JSON.
pub fn card(ctx: &Ctx) -> Result<Value, CallError> {
    let url = outbound::connection().agent_card_url;
    net::json(
        ctx,
        Method::Get,
        &url,
        &[("accept", "application/json")],
        &[],
    )
}

/// Runs the call and answers the tool text.
pub fn run(ctx: &Ctx, req: CallRequest) -> Result<String, CallError> {
    let card = card(ctx)?;
    let ep = endpoint(&card).map_err(CallError::InvalidResponse)?;
    let mut message = json!({
        "messageId": uuid(),
        "role": "ROLE_USER",
        "parts": [{ "text": req.prompt }],
        "contextId": req.context_id,
        "metadata": { "skill": req.skill },
    });
    if let Some(t) = &req.task_id {
        message["taskId"] = json!(t);
    }
    let mut remote = Remote::default();
    let result = drive(ctx, &ep, message, &mut remote);
    if let Err(e) = result {
        // An abort or timeout with a known remote task cancels it there too.
        if matches!(e, CallError::Aborted | CallError::Transport(_))
            && !remote.settled()
            && let Some(id) = remote.task_id()
        {
            let _ = rpc(&Ctx::cleanup(), &ep, "CancelTask", json!({ "id": id }));
        }
        return Err(e);
    }
    remote.outcome().map_err(CallError::RemoteFailed)
}

fn drive(ctx: &Ctx, ep: &Endpoint, message: Value, remote: &mut Remote) -> Result<(), CallError> {
    if ep.streaming {
        stream(ctx, ep, json!({ "message": message }), remote)?;
    } else {
        let answer = rpc(
            ctx,
            ep,
            "SendMessage",
            json!({ "message": message, "configuration": { "returnImmediately": true } }),
        )?;
        remote.apply(parse(answer)?);
    }
    // Poll until settled (a blocking remote, or a stream that ended early).
    let mut n = 0;
    while !remote.settled() {
        let Some(id) = remote.task_id().map(str::to_owned) else {
            return Err(CallError::InvalidResponse(
                "the remote agent answered without a task id".into(),
            ));
        };
        ctx.sleep(poll_delay_ms(n))?;
        n += 1;
        let task = rpc(ctx, ep, "GetTask", json!({ "id": id, "historyLength": 0 }))?;
        remote.apply(parse(json!({ "task": task }))?);
    }
    Ok(())
}

/// The JSON-RPC request body of a 1.0 call, in the version the agent speaks; its
/// `A2A-Version` header.
fn request(ep: &Endpoint, method: &str, params: Value) -> (String, (&'static str, &'static str)) {
    let (method, params, version) = match ep.v03 {
        true => (
            compat03::name_03(method).unwrap_or(method),
            compat03::params_out(method, &params),
            "0.3",
        ),
        false => (method, params, "1.0"),
    };
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    (body.to_string(), ("a2a-version", version))
}

/// One JSON-RPC call; its `result` (as 1.0 has it).
fn rpc(ctx: &Ctx, ep: &Endpoint, method: &str, params: Value) -> Result<Value, CallError> {
    let (body, version) = request(ep, method, params);
    let answer = net::json(
        ctx,
        Method::Post,
        &ep.url,
        &[JSON, version],
        body.as_bytes(),
    )?;
    result(ep, method, answer)
}

/// The `result` of a JSON-RPC answer to `method` (as 1.0 has it), or its error.
fn result(ep: &Endpoint, method: &str, answer: Value) -> Result<Value, CallError> {
    let answer = match answer.get("error") {
        Some(e) => Err(CallError::RemoteFailed(format!(
            "the remote agent refused {method}: {} ({})",
            e["message"].as_str().unwrap_or("no message"),
            e["code"]
        ))),
        None => answer.get("result").cloned().ok_or_else(|| {
            CallError::InvalidResponse(format!(
                "the answer to {method} has neither result nor error"
            ))
        }),
    }?;
    Ok(match ep.v03 {
        true => compat03::result_in(method, &answer),
        false => answer,
    })
}

fn parse(result: Value) -> Result<StreamResponse, CallError> {
    serde_json::from_value(result).map_err(|e| {
        CallError::InvalidResponse(format!(
            "the remote agent's answer is not an A2A result: {e}"
        ))
    })
}

/// SendStreamingMessage: applies frames until the stream ends or the task settles.
fn stream(ctx: &Ctx, ep: &Endpoint, params: Value, remote: &mut Remote) -> Result<(), CallError> {
    const METHOD: &str = "SendStreamingMessage";
    let (body, version) = request(ep, METHOD, params);
    let url = &ep.url;
    let headers = [JSON, version, ("accept", "text/event-stream")];
    let mut r = net::send(ctx, Method::Post, url, &headers, body.as_bytes())?;
    if !r.content_type.starts_with("text/event-stream") {
        let bytes = r.bytes(ctx)?;
        if !(200..300).contains(&r.status) {
            return Err(CallError::Http((
                r.status,
                String::from_utf8_lossy(&bytes).chars().take(300).collect(),
            )));
        }
        let answer: Value = serde_json::from_slice(&bytes)
            .map_err(|e| CallError::InvalidResponse(format!("{url} did not answer JSON: {e}")))?;
        remote.apply(parse(result(ep, METHOD, answer)?)?);
        return Ok(());
    }
    let mut events = a2a_protocol::sse::Decoder::default();
    while let Some(chunk) = r.chunk(ctx)? {
        for data in events.push(&chunk) {
            let answer: Value = serde_json::from_str(&data).map_err(|e| {
                CallError::InvalidResponse(format!("a stream event is not JSON: {e}"))
            })?;
            remote.apply(parse(result(ep, METHOD, answer)?)?);
            if remote.settled() {
                return Ok(());
            }
        }
        if let Some(stop) = ctx.stopped() {
            return Err(stop);
        }
    }
    Ok(())
}
