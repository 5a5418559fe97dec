//! The endpoint of both bindings: transport checks, the JSON-RPC envelope or the HTTP+JSON
//! route, the one dispatch, and answers framed for the binding.

use a2a_guest::server::a2a::edge::request_context;
use a2a_protocol::methods::{self, Dispatch, Method};
use a2a_protocol::{ErrorKind, RpcError, jsonrpc, rest, version};
use serde_json::Value;
use wasip2::http::types::ResponseOutparam;

use crate::http::{self, Request};
use crate::sse::Sse;
use crate::{push, send, stream, tasks};

/// How a request arrived, and so how its answers are framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// The JSON-RPC envelope, POSTed to the endpoint.
    JsonRpc,
    /// The HTTP+JSON binding's paths below the endpoint.
    Rest,
}

/// Where the answers of one request go, framed for its binding.
struct Reply {
    binding: Binding,
    /// The JSON-RPC request id (null until known, and for REST).
    id: Value,
    legacy: bool,
    /// The method, for the metrics (empty until known).
    method: String,
    /// The media type of its JSON answers.
    media: &'static str,
}

impl Reply {
    /// An error answer, with the HTTP status its binding gives it.
    fn fail(&self, out: ResponseOutparam, e: RpcError, extra: &[(&str, &str)]) {
        let status = match self.binding {
            Binding::JsonRpc => e.kind.http_status(),
            Binding::Rest => rest::status(e.kind).0,
        };
        self.refuse(out, status, e, extra);
    }

    /// An error answer with `status`.
    fn refuse(&self, out: ResponseOutparam, status: u16, e: RpcError, extra: &[(&str, &str)]) {
        request_context::record_call(&self.method, e.kind.reason());
        let retry_after = e.retry_after();
        let mut headers = vec![("content-type", self.media)];
        headers.extend_from_slice(extra);
        if let Some(secs) = &retry_after {
            headers.push(("retry-after", secs));
        }
        let body = match self.binding {
            Binding::JsonRpc => jsonrpc::failure(&self.id, &e, self.legacy),
            Binding::Rest => rest::error_body(status, &e),
        };
        http::respond(out, status, &headers, body.to_string().as_bytes());
    }

    /// A result: in the JSON-RPC envelope, or bare.
    fn ok(&self, out: ResponseOutparam, v: Value) {
        request_context::record_call(&self.method, "ok");
        let body = match self.binding {
            Binding::JsonRpc => jsonrpc::success(&self.id, v),
            Binding::Rest => v,
        };
        let headers = [("content-type", self.media)];
        http::respond(out, 200, &headers, body.to_string().as_bytes())
    }

    /// The request id stream events answer (none: bare events).
    fn stream_id(&self) -> Option<Value> {
        (self.binding == Binding::JsonRpc).then(|| self.id.clone())
    }
}

/// Answers one request of either binding: the same checks, the one dispatcher, the same
/// handlers; only the framing differs.
pub fn serve(req: &Request, out: ResponseOutparam, binding: Binding) {
    let instance = request_context::instance();
    let media = methods::answer_type(req.header("content-type"), req.header("accept"));
    let mut reply = Reply {
        binding,
        id: Value::Null,
        legacy: instance.legacy_error_codes,
        method: String::new(),
        media: media.unwrap_or("application/json"),
    };
    if media.is_none() {
        let e = RpcError::new(
            ErrorKind::ContentTypeNotSupported,
            "send the request with Content-Type: application/json or application/a2a+json",
        );
        return reply.fail(out, e, &[]);
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
        if binding == Binding::JsonRpc {
            reply.id = jsonrpc::parse_request(&req.body)
                .map(|r| r.id)
                .unwrap_or(Value::Null);
        }
        return reply.fail(out, e, &[("a2a-version", version::SUPPORTED)]);
    }
    let (name, params, accepts_sse) = match binding {
        Binding::JsonRpc => {
            let request = match jsonrpc::parse_request(&req.body) {
                Ok(r) => r,
                Err((id, e)) => {
                    reply.id = id;
                    return reply.fail(out, e, &[]);
                }
            };
            if request.notification {
                // JSON-RPC 2.0 forbids answering a notification; every A2A method's answer is
                // what its caller needs (a task id at least), so a notification is not run either.
                request_context::record_call(&request.method, "notification");
                return http::respond(out, 204, &[], b"");
            }
            reply.id = request.id;
            let sse = methods::accepts_sse(req.header("accept"));
            (request.method, request.params, sse)
        }
        Binding::Rest => match rest::route(&req.method, &req.path, &req.query, &req.body) {
            Ok(call) => (
                call.method.to_owned(),
                call.params,
                rest::streams(&req.path),
            ),
            Err(rest::Unrouted {
                error,
                allow: Some(allow),
            }) => return reply.refuse(out, 405, error, &[("allow", allow)]),
            Err(unrouted) => return reply.fail(out, unrouted.error, &[]),
        },
    };
    reply.method = name;
    let name = reply.method.as_str();
    let method = match methods::dispatch(name, accepts_sse, instance.push_notifications) {
        Dispatch::Serve(m) => m,
        Dispatch::Json(e) => return reply.fail(out, e, &[]),
        Dispatch::Frame(e) => {
            request_context::record_call(name, e.kind.reason());
            let mut sse = Sse::start(out, reply.stream_id());
            sse.error(&e, reply.legacy);
            return sse.end();
        }
    };
    let result = match method {
        Method::SendMessage => match send::begin(&params, &instance, send::Caller::Waits) {
            Ok(send::Begin::Run(mut run)) if run.return_immediately() => {
                reply.ok(out, run.answer());
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
            match send::begin(&params, &instance, send::Caller::Streams) {
                Ok(begun) => {
                    request_context::record_call(name, "ok");
                    return stream::send(begun, out, reply.stream_id());
                }
                Err(e) => Err(e),
            }
        }
        Method::SubscribeToTask => match stream::open(&params, req.header("last-event-id")) {
            Ok(sub) => {
                request_context::record_call(name, "ok");
                return stream::subscribe(sub, out, reply.stream_id());
            }
            Err(e) => Err(e),
        },
        Method::GetTask => tasks::get(&params),
        Method::ListTasks => tasks::list(&params),
        Method::CancelTask => tasks::cancel(&params),
        Method::GetExtendedAgentCard => a2a_protocol::card::extended(&(&instance).into()),
        Method::CreatePushConfig => push::create(&params),
        Method::GetPushConfig => push::get(&params),
        Method::ListPushConfigs => push::list(&params),
        Method::DeletePushConfig => push::delete(&params),
    };
    match result {
        Ok(v) => reply.ok(out, v),
        Err(e) => reply.fail(out, e, &[]),
    }
}
