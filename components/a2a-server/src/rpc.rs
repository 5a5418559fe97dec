//! The JSON-RPC endpoint: transport checks, envelope, dispatch.

use a2a_protocol::{ErrorKind, RpcError, jsonrpc, version};
use serde_json::Value;
use wasip2::http::types::ResponseOutparam;

use crate::bindings::a2a::edge::{request_context, storage};
use crate::http::{self, Request};
use crate::{rows, send};

/// Answers one JSON-RPC request.
pub fn serve(req: &Request, out: ResponseOutparam) {
    let instance = request_context::instance();
    let legacy = instance.legacy_error_codes;
    let fail = |out, id: &Value, e: RpcError, extra: &[(&str, &str)]| {
        let mut headers = vec![("content-type", "application/json")];
        headers.extend_from_slice(extra);
        http::respond(out, 200, &headers, jsonrpc::failure(id, &e, legacy).to_string().as_bytes());
    };
    let json_type = req.header("content-type").map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    if !matches!(json_type.as_deref(), None | Some("application/json" | "application/a2a+json")) {
        let e = RpcError::new(ErrorKind::ContentTypeNotSupported, "send the request with Content-Type: application/json");
        return fail(out, &Value::Null, e, &[]);
    }
    let asked = req.header("a2a-version").or_else(|| req.query_param("A2A-Version"));
    if !version::is_supported(asked) {
        let e = RpcError::new(ErrorKind::VersionNotSupported, format!("A2A-Version {} is not supported; this agent speaks 1.0", asked.unwrap_or("")));
        let id = jsonrpc::parse_request(&req.body).map(|r| r.id).unwrap_or(Value::Null);
        return fail(out, &id, e, &[("a2a-version", version::SUPPORTED)]);
    }
    let request = match jsonrpc::parse_request(&req.body) {
        Ok(r) => r,
        Err((id, e)) => return fail(out, &id, e, &[]),
    };
    let ok = |out, v: Value| http::respond(out, 200, &[("content-type", "application/json")], jsonrpc::success(&request.id, v).to_string().as_bytes());
    let result = match request.method.as_str() {
        "SendMessage" => match send::begin(&request.params, &instance) {
            Ok(send::Begin::Run(mut run)) if run.return_immediately() => {
                ok(out, run.answer());
                return run.drive();
            }
            Ok(send::Begin::Run(mut run)) => {
                run.drive();
                Ok(run.answer())
            }
            Ok(send::Begin::Answer(v)) => Ok(v),
            Err(e) => Err(e),
        },
        "GetTask" => get_task(&request.params),
        other => Err(RpcError::new(ErrorKind::MethodNotFound, format!("method {other:?} is not supported"))),
    };
    match result {
        Ok(v) => ok(out, v),
        Err(e) => fail(out, &request.id, e, &[]),
    }
}

/// The task of this instance with `id`, or TASK_NOT_FOUND.
pub fn load_task(id: &str) -> Result<(storage::TaskRow, a2a_protocol::Task), RpcError> {
    let row = storage::get_task(id).ok_or_else(|| RpcError::new(ErrorKind::TaskNotFound, format!("task {id} not found")))?;
    let task = rows::task(&row)?;
    Ok((row, task))
}

fn get_task(params: &Value) -> Result<Value, RpcError> {
    let p: a2a_protocol::GetTaskRequest = jsonrpc::params(params)?;
    let (_, task) = load_task(&p.id)?;
    Ok(serde_json::to_value(task.with_history_length(p.history_length)).unwrap_or_default())
}
