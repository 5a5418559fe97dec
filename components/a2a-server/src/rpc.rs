//! The JSON-RPC endpoint: transport checks, envelope, dispatch.

use a2a_guest::server::a2a::edge::request_context;
use a2a_protocol::methods::{self, Dispatch, Method};
use a2a_protocol::{ErrorKind, RpcError, jsonrpc, version};
use serde_json::Value;
use wasip2::http::types::ResponseOutparam;

use crate::http::{self, Request};
use crate::sse::Sse;
use crate::{send, stream, tasks};

/// Answers one JSON-RPC request.
pub fn serve(req: &Request, out: ResponseOutparam) {
    let instance = request_context::instance();
    let legacy = instance.legacy_error_codes;
    let fail = |out, id: &Value, e: RpcError, extra: &[(&str, &str)], method: &str| {
        request_context::record_call(method, e.kind.reason());
        let retry_after = e.retry_after();
        let mut headers = vec![("content-type", "application/json")];
        headers.extend_from_slice(extra);
        if let Some(secs) = &retry_after {
            headers.push(("retry-after", secs));
        }
        http::respond(
            out,
            e.kind.http_status(),
            &headers,
            jsonrpc::failure(id, &e, legacy).to_string().as_bytes(),
        );
    };
    let json_type = req.header("content-type").map(|c| {
        c.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    });
    if !matches!(
        json_type.as_deref(),
        None | Some("application/json" | "application/a2a+json")
    ) {
        let e = RpcError::new(
            ErrorKind::ContentTypeNotSupported,
            "send the request with Content-Type: application/json",
        );
        return fail(out, &Value::Null, e, &[], "");
    }
    let asked = req
        .header("a2a-version")
        .or_else(|| req.query_param("A2A-Version"));
    if !version::is_supported(asked) {
        let e = RpcError::new(
            ErrorKind::VersionNotSupported,
            format!(
                "A2A-Version {} is not supported; this agent speaks 1.0",
                asked.unwrap_or("")
            ),
        );
        let id = jsonrpc::parse_request(&req.body)
            .map(|r| r.id)
            .unwrap_or(Value::Null);
        return fail(out, &id, e, &[("a2a-version", version::SUPPORTED)], "");
    }
    let request = match jsonrpc::parse_request(&req.body) {
        Ok(r) => r,
        Err((id, e)) => return fail(out, &id, e, &[], ""),
    };
    let name = request.method.as_str();
    if request.notification {
        // JSON-RPC 2.0 forbids answering a notification; every A2A method's answer is what its
        // caller needs (a task id at least), so a notification is not run either.
        request_context::record_call(name, "notification");
        return http::respond(out, 204, &[], b"");
    }
    let ok = |out, v: Value| {
        request_context::record_call(name, "ok");
        http::respond(
            out,
            200,
            &[("content-type", "application/json")],
            jsonrpc::success(&request.id, v).to_string().as_bytes(),
        )
    };
    let method =
        match methods::dispatch(&request.method, methods::accepts_sse(req.header("accept"))) {
            Dispatch::Serve(m) => m,
            Dispatch::Json(e) => return fail(out, &request.id, e, &[], name),
            Dispatch::Frame(e) => {
                request_context::record_call(name, e.kind.reason());
                let mut sse = Sse::start(out, request.id.clone());
                sse.error(&e, legacy);
                return sse.end();
            }
        };
    let result = match method {
        Method::SendMessage => match send::begin(&request.params, &instance, send::Caller::Waits) {
            Ok(send::Begin::Run(mut run)) if run.return_immediately() => {
                ok(out, run.answer());
                return run.drive();
            }
            Ok(send::Begin::Run(mut run)) => {
                run.drive();
                run.outcome()
            }
            Ok(send::Begin::Answer(v)) => Ok(v),
            Err(e) => Err(e),
        },
        Method::SendStreamingMessage => {
            match send::begin(&request.params, &instance, send::Caller::Streams) {
                Ok(begun) => {
                    request_context::record_call(name, "ok");
                    return stream::send(begun, out, request.id.clone());
                }
                Err(e) => Err(e),
            }
        }
        Method::SubscribeToTask => match stream::open(&request.params, req.header("last-event-id"))
        {
            Ok(sub) => {
                request_context::record_call(name, "ok");
                return stream::subscribe(sub, out, request.id.clone());
            }
            Err(e) => Err(e),
        },
        Method::GetTask => tasks::get(&request.params),
        Method::ListTasks => tasks::list(&request.params),
        Method::CancelTask => tasks::cancel(&request.params),
        Method::GetExtendedAgentCard => a2a_protocol::card::extended(&(&instance).into()),
    };
    match result {
        Ok(v) => ok(out, v),
        Err(e) => fail(out, &request.id, e, &[], name),
    }
}
