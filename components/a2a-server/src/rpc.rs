//! The endpoint of both bindings: transport checks, the JSON-RPC envelope or the HTTP+JSON
//! route, the one dispatch, and answers framed for the binding.

use a2a_guest::server::a2a::edge::request_context::{self, InstanceInfo};
use a2a_protocol::methods::{self, Dispatch, Method};
use a2a_protocol::sse::Envelope;
use a2a_protocol::{ErrorKind, RpcError, compat03, jsonrpc, rest, version};
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
    /// An A2A 0.3 call: its answers go out in 0.3 shapes.
    v03: bool,
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

    /// An error as the one event of an SSE stream (HTTP 200, `text/event-stream`).
    fn frame(&self, out: ResponseOutparam, e: RpcError) {
        request_context::record_call(self.called(), e.kind.reason());
        let mut sse = Sse::start(out, self.envelope());
        sse.error(&e, self.legacy);
        sse.end()
    }

    /// A streaming method's error before its stream starts: plain JSON for A2A 1.0 (what its
    /// SDKs and the TCK read) and HTTP+JSON, but for a 0.3 JSON-RPC caller the stream's one
    /// event, as 0.3 has it (its SDK reads nothing else there); an error whose HTTP status says
    /// something (429 with `Retry-After`, 503) keeps it.
    fn fail_stream(&self, out: ResponseOutparam, e: RpcError) {
        if self.v03 && self.binding == Binding::JsonRpc && e.kind.http_status() == 200 {
            return self.frame(out, e);
        }
        self.fail(out, e, &[])
    }

    /// An error answer with `status`.
    fn refuse(&self, out: ResponseOutparam, status: u16, e: RpcError, extra: &[(&str, &str)]) {
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
        let called = (self.called(), e.kind.reason());
        http::answer(out, status, &headers, body.to_string().as_bytes(), called);
    }

    /// A result: in the JSON-RPC envelope, or bare.
    fn ok(&self, out: ResponseOutparam, answer: impl Into<Answer>) {
        let body = match (answer.into(), self.v03) {
            // Already serialised and going out as it is: spliced into the envelope.
            (Answer::Text(text), false) => match self.binding {
                Binding::JsonRpc => jsonrpc::success_text(&self.id, &text),
                Binding::Rest => text,
            },
            (answer, v03) => {
                let v = answer.value();
                match self.binding {
                    Binding::JsonRpc if v03 => {
                        jsonrpc::success(&self.id, compat03::result_out(&self.method, &v))
                    }
                    Binding::JsonRpc => jsonrpc::success(&self.id, v),
                    Binding::Rest if v03 => compat03::rest::result_out(&self.method, &v),
                    Binding::Rest => v,
                }
                .to_string()
            }
        };
        let headers = [("content-type", self.media)];
        http::answer(out, 200, &headers, body.as_bytes(), (self.called(), "ok"))
    }

    /// The method as its caller named it (a 0.3 name for a 0.3 call), for the metrics and log.
    fn called(&self) -> &str {
        let old = if self.v03 {
            compat03::name_03(&self.method)
        } else {
            None
        };
        old.unwrap_or(&self.method)
    }

    /// How its stream events are framed.
    fn envelope(&self) -> Envelope {
        Envelope {
            rpc_id: (self.binding == Binding::JsonRpc).then(|| self.id.clone()),
            v03: self.v03,
        }
    }
}

/// A method's result: a value, or its JSON text already written (the same bytes the value
/// would write), which goes out without being built as a value.
enum Answer {
    Value(Value),
    Text(String),
}

impl Answer {
    /// The result as a value (parsing a text: for the 0.3 reshaping only).
    fn value(self) -> Value {
        match self {
            Answer::Value(v) => v,
            Answer::Text(t) => serde_json::from_str(&t).unwrap_or_default(),
        }
    }
}

impl From<Value> for Answer {
    fn from(v: Value) -> Answer {
        Answer::Value(v)
    }
}

impl From<a2a_protocol::idempotency::SendAnswer> for Answer {
    fn from(a: a2a_protocol::idempotency::SendAnswer) -> Answer {
        Answer::Text(serde_json::to_string(&a).unwrap_or_default())
    }
}

/// A request that ends before its method runs: why, and how it is answered.
enum Early {
    /// An error answer with extra headers.
    Fail(RpcError, &'static [(&'static str, &'static str)]),
    /// An error answer with its own status and headers (a 405 with `Allow`).
    Refuse(u16, RpcError, [(&'static str, &'static str); 1]),
    /// A JSON-RPC notification (of the method named): answered 204, not run.
    Notification(String),
}

/// The method a request calls, its params, and whether its caller takes an event stream.
struct Call {
    name: String,
    params: Value,
    accepts_sse: bool,
}

/// Answers one request of either binding: the same checks, the one dispatcher, the same
/// handlers; only the framing differs.
pub fn serve(req: &Request, instance: &InstanceInfo, out: ResponseOutparam, binding: Binding) {
    let media = methods::answer_type(
        req.header("content-type"),
        req.header_list("accept").as_deref(),
    );
    let mut reply = Reply {
        binding,
        id: Value::Null,
        legacy: instance.legacy_error_codes,
        method: String::new(),
        media: media.unwrap_or("application/json"),
        v03: false,
    };
    let call = match accept(req, media.is_some(), instance.compat03, &mut reply) {
        Ok(call) => call,
        Err(Early::Fail(e, extra)) => return reply.fail(out, e, extra),
        Err(Early::Refuse(status, e, extra)) => return reply.refuse(out, status, e, &extra),
        Err(Early::Notification(method)) => {
            return http::answer(out, 204, &[], b"", (&method, "notification"));
        }
    };
    reply.method = call.name;
    // One bound on nesting for every binding (gRPC's decoder would stop deeper anyway).
    if let Err(why) = a2a_protocol::bounds::check_depth("params", &call.params) {
        let e = RpcError::new(ErrorKind::InvalidParams, why);
        return match reply.method.as_str() {
            "SendStreamingMessage" | "SubscribeToTask" => reply.fail_stream(out, e),
            _ => reply.fail(out, e, &[]),
        };
    }
    let name = reply.method.as_str();
    match methods::dispatch(name, call.accepts_sse, instance.push_notifications) {
        Dispatch::Serve(method) => run(method, &call.params, req, instance, reply, out),
        Dispatch::Json(e) => reply.fail(out, e, &[]),
        Dispatch::Frame(e) => reply.frame(out, e),
    }
}

/// The transport checks (media type, A2A version) and the call the request makes, read from
/// its binding's framing (a 0.3 method, with `compat03`, as its 1.0 successor); `reply` learns
/// the JSON-RPC id as soon as it is known, and whether the call is 0.3.
fn accept(req: &Request, media_ok: bool, compat03: bool, reply: &mut Reply) -> Result<Call, Early> {
    if !media_ok {
        let e = RpcError::new(
            ErrorKind::ContentTypeNotSupported,
            "send the request with Content-Type: application/json or application/a2a+json",
        );
        return Err(Early::Fail(e, &[]));
    }
    // An empty version is none (§3.6.2), as `version::is_supported` reads it.
    let asked = req
        .header("a2a-version")
        .or_else(|| req.query_param("A2A-Version"))
        .filter(|v| !v.trim().is_empty());
    // 0.3 over HTTP+JSON has its own paths (`/v1/…`); a request there without a version is
    // 0.3 (§3.6.2), one saying 1.0 is for a tenant named `v1`.
    let rest03 = compat03
        && reply.binding == Binding::Rest
        && compat03::rest::is_path(&req.path)
        && asked.is_none_or(compat03::is_v03);
    let v03_asked = compat03
        && (reply.binding == Binding::JsonRpc || rest03)
        && asked.is_some_and(compat03::is_v03);
    if !version::is_supported(asked) && !v03_asked {
        let mut e = RpcError::new(
            ErrorKind::VersionNotSupported,
            format!(
                "A2A-Version {} is not supported; this agent speaks {}",
                asked.unwrap_or(""),
                if compat03 { "1.0 and 0.3" } else { "1.0" }
            ),
        );
        if reply.binding == Binding::JsonRpc {
            reply.id = jsonrpc::parse_request(&req.body)
                .map(|r| r.id)
                .unwrap_or(Value::Null);
        } else if compat03 && asked.is_some_and(compat03::is_v03) {
            e.message
                .push_str("; A2A 0.3 over HTTP+JSON is served at the /v1/ paths");
        }
        return Err(Early::Fail(e, &[("a2a-version", version::SUPPORTED)]));
    }
    match reply.binding {
        Binding::JsonRpc => {
            let request = jsonrpc::parse_request(&req.body).map_err(|(id, e)| {
                reply.id = id;
                Early::Fail(e, &[])
            })?;
            if request.notification {
                // JSON-RPC 2.0 forbids answering a notification; every A2A method's answer is
                // what its caller needs (a task id at least), so a notification is not run either.
                return Err(Early::Notification(request.method));
            }
            reply.id = request.id;
            let accepts_sse = methods::accepts_sse(req.header_list("accept").as_deref());
            if compat03 && let Some(successor) = compat03::method(&request.method) {
                reply.v03 = true;
                return Ok(Call {
                    name: successor.to_owned(),
                    params: compat03::params_in(successor, &request.params),
                    accepts_sse,
                });
            }
            Ok(Call {
                name: request.method,
                params: request.params,
                accepts_sse,
            })
        }
        Binding::Rest => {
            let route = if rest03 {
                reply.v03 = true;
                compat03::rest::route
            } else {
                rest::route
            };
            rest_call(
                route(&req.method, &req.path, &req.query, &req.body),
                &req.path,
            )
        }
    }
}

/// The call of a routed HTTP+JSON request, or its refusal (a 405 with `Allow`).
fn rest_call(routed: Result<rest::Call, rest::Unrouted>, path: &str) -> Result<Call, Early> {
    match routed {
        Ok(call) => Ok(Call {
            name: call.method.to_owned(),
            params: call.params,
            accepts_sse: rest::streams(path),
        }),
        Err(rest::Unrouted {
            error,
            allow: Some(allow),
        }) => Err(Early::Refuse(405, error, [("allow", allow)])),
        Err(unrouted) => Err(Early::Fail(unrouted.error, &[])),
    }
}

/// Runs a dispatched method and answers it (streams answer as they go).
fn run(
    method: Method,
    params: &Value,
    req: &Request,
    instance: &InstanceInfo,
    reply: Reply,
    out: ResponseOutparam,
) {
    let result = match method {
        Method::SendMessage => {
            match send::begin(params, instance, send::Caller::Waits, req.arrival.clone()) {
                Ok(send::Begin::Run(mut run)) if run.return_immediately() => {
                    reply.ok(out, Answer::Text(run.answer_text()));
                    return run.drive();
                }
                Ok(send::Begin::Run(mut run)) => {
                    run.drive();
                    run.outcome().map(Answer::Text)
                }
                Ok(send::Begin::Answer(v)) => Ok((*v).into()),
                Err(e) => Err(e),
            }
        }
        Method::SendStreamingMessage => {
            match send::begin(params, instance, send::Caller::Streams, req.arrival.clone()) {
                Ok(begun) => {
                    request_context::record_call(reply.called(), "ok");
                    return stream::send(begun, out, reply.envelope());
                }
                Err(e) => return reply.fail_stream(out, e),
            }
        }
        Method::SubscribeToTask => match stream::open(params, req.header("last-event-id")) {
            Ok(sub) => {
                request_context::record_call(reply.called(), "ok");
                return stream::subscribe(sub, out, reply.envelope());
            }
            Err(e) => return reply.fail_stream(out, e),
        },
        Method::GetTask => tasks::get(params).map(Answer::Text),
        Method::ListTasks => tasks::list(params).map(Answer::from),
        Method::CancelTask => tasks::cancel(params).map(Answer::from),
        Method::GetExtendedAgentCard => {
            // The 0.3 fields for a 0.3 call only.
            let mut input: a2a_protocol::card::CardInput = instance.into();
            input.compat03 &= reply.v03;
            a2a_protocol::card::extended(&input).map(Answer::from)
        }
        Method::CreatePushConfig => push::create(params).map(Answer::from),
        Method::GetPushConfig => push::get(params).map(Answer::from),
        Method::ListPushConfigs => push::list(params).map(Answer::from),
        Method::DeletePushConfig => push::delete(params).map(Answer::from),
    };
    match result {
        Ok(v) => reply.ok(out, v),
        Err(e) => reply.fail(out, e, &[]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::tests::request;

    /// A refusal as a test reads it: the status, the kind and the extra headers.
    type Refused = (u16, ErrorKind, Vec<String>);

    /// What `accept` makes of a request: the call's name and whether it streams, or the
    /// refusal (a 405 carries its `Allow`), with the JSON-RPC id the answer echoes.
    fn accepted(
        binding: Binding,
        headers: &[(&str, &str)],
        path: &str,
        body: &str,
    ) -> (Result<(String, bool), Refused>, Value) {
        let mut req = request(headers, "");
        req.path = path.into();
        req.method = "POST".into();
        req.body = body.as_bytes().to_vec();
        let media = methods::answer_type(
            req.header("content-type"),
            req.header_list("accept").as_deref(),
        );
        let mut reply = Reply {
            binding,
            id: Value::Null,
            legacy: false,
            method: String::new(),
            media: "application/json",
            v03: false,
        };
        let result = match accept(&req, media.is_some(), true, &mut reply) {
            Ok(call) => Ok((call.name, call.accepts_sse)),
            Err(Early::Fail(e, extra)) => Err((
                e.kind.http_status(),
                e.kind,
                extra.iter().map(|(n, v)| format!("{n}: {v}")).collect(),
            )),
            Err(Early::Refuse(status, e, extra)) => Err((
                status,
                e.kind,
                extra.iter().map(|(n, v)| format!("{n}: {v}")).collect(),
            )),
            Err(Early::Notification(_)) => unreachable!("no notification is sent here"),
        };
        (result, reply.id)
    }

    const JSON: (&str, &str) = ("content-type", "application/json");
    const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"t"}}"#;

    #[test]
    fn a_json_rpc_call_is_read_with_its_id_and_whether_it_streams() {
        let (call, id) = accepted(Binding::JsonRpc, &[JSON], "", CALL);
        assert_eq!(call, Ok(("GetTask".into(), false)));
        assert_eq!(id, 7);
        let sse = [JSON, ("accept", "text/event-stream")];
        let (call, _) = accepted(Binding::JsonRpc, &sse, "", CALL);
        assert_eq!(call, Ok(("GetTask".into(), true)));
    }

    #[test]
    fn a_body_that_is_not_json_is_refused_before_parsing() {
        let (call, id) = accepted(
            Binding::JsonRpc,
            &[("content-type", "text/plain")],
            "",
            CALL,
        );
        assert!(
            matches!(call, Err((_, ErrorKind::ContentTypeNotSupported, _))),
            "{call:?}"
        );
        assert_eq!(id, Value::Null, "not read, so not echoed");
    }

    #[test]
    fn a_0_3_call_runs_as_its_1_0_successor_and_0_3_is_a_version_spoken() {
        let old = r#"{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"id":"t"}}"#;
        for headers in [&[JSON][..], &[JSON, ("a2a-version", "0.3")][..]] {
            let (call, id) = accepted(Binding::JsonRpc, headers, "", old);
            assert_eq!(call, Ok(("GetTask".into(), false)));
            assert_eq!(id, 8);
        }
        let headers = [JSON, ("a2a-version", "0.3.0")];
        let (call, _) = accepted(Binding::JsonRpc, &headers, "", CALL);
        assert_eq!(call, Ok(("GetTask".into(), false)), "1.0 names stay 1.0");
    }

    #[test]
    fn an_unsupported_version_is_refused_naming_the_one_spoken_and_echoing_the_id() {
        let headers = [JSON, ("a2a-version", "0.2")];
        let (call, id) = accepted(Binding::JsonRpc, &headers, "", CALL);
        assert_eq!(
            call,
            Err((
                ErrorKind::VersionNotSupported.http_status(),
                ErrorKind::VersionNotSupported,
                vec!["a2a-version: 1.0".into()]
            ))
        );
        assert_eq!(id, 7);
    }

    #[test]
    fn a_broken_envelope_is_refused_with_the_id_it_carried() {
        let (call, id) = accepted(
            Binding::JsonRpc,
            &[JSON],
            "",
            r#"{"jsonrpc":"2.0","id":"x"}"#,
        );
        assert!(
            matches!(call, Err((_, ErrorKind::InvalidRequest, _))),
            "{call:?}"
        );
        assert_eq!(id, "x");
        let (call, id) = accepted(Binding::JsonRpc, &[JSON], "", "{");
        assert!(
            matches!(call, Err((_, ErrorKind::ParseError, _))),
            "{call:?}"
        );
        assert_eq!(id, Value::Null);
    }

    #[test]
    fn rest_routes_by_path_and_answers_405_with_allow() {
        let (call, _) = accepted(
            Binding::Rest,
            &[JSON],
            "/message:stream",
            r#"{"message":{}}"#,
        );
        assert_eq!(call, Ok(("SendStreamingMessage".into(), true)));
        let (call, _) = accepted(Binding::Rest, &[JSON], "/tasks/t1", "");
        let Err((405, _, allow)) = call else {
            panic!("POST on a task is not allowed: {call:?}");
        };
        assert!(allow[0].starts_with("allow: "), "{allow:?}");
    }

    #[test]
    fn the_v1_paths_are_0_3_unless_the_caller_says_1_0() {
        let v03 = |headers: &[(&str, &str)], path: &str| {
            let mut req = request(headers, "");
            req.path = path.into();
            req.method = "POST".into();
            req.body = br#"{"message":{}}"#.to_vec();
            let mut reply = Reply {
                binding: Binding::Rest,
                id: Value::Null,
                legacy: false,
                method: String::new(),
                media: "application/json",
                v03: false,
            };
            let call = accept(&req, true, true, &mut reply).map(|c| (c.name, c.params));
            (call.ok(), reply.v03)
        };
        let (call, is_03) = v03(&[JSON], "/v1/message:send");
        assert_eq!(call.map(|c| c.0), Some("SendMessage".into()));
        assert!(is_03, "no A2A-Version on a /v1 path is 0.3");
        let (_, is_03) = v03(&[JSON, ("a2a-version", "0.3")], "/v1/message:send");
        assert!(is_03);
        let (call, is_03) = v03(&[JSON, ("a2a-version", "1.0")], "/v1/message:send");
        assert_eq!(call.map(|c| c.1["tenant"].clone()), Some("v1".into()));
        assert!(!is_03, "1.0 at /v1 is a tenant named v1");
        let (_, is_03) = v03(&[JSON, ("a2a-version", " ")], "/v1/message:send");
        assert!(is_03, "an empty version is none");
        let (call, _) = v03(&[JSON, ("a2a-version", "0.3")], "/message:send");
        assert_eq!(call, None, "0.3 bodies are not read at the 1.0 paths");
    }
}
