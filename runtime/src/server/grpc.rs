//! The gRPC binding (`lf.a2a.v1.A2AService`, docs/protocol.md "gRPC"), terminated by the host: each
//! call's protobuf message becomes the ProtoJSON params of its JSON-RPC method (the official
//! proto's generated types do both sides), the instance its `tenant` names serves it exactly as a
//! JSON-RPC request (credentials, limits, stream slot, component), and the answer goes back the
//! same way: a result as one message, SSE events as stream messages, an error as a status with
//! `google.rpc.ErrorInfo` in `grpc-status-details-bin`.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use a2a_pb::protojson as pb;
use a2a_protocol::grpc::{self, Code};
use a2a_protocol::{ErrorKind, RpcError};
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response, header};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use serde_json::Value;
use tonic_types::{ErrorDetails, StatusExt};

use crate::app::App;
use crate::body::read_body;
use crate::hosts::server::CallNote;
use crate::responses::{Body, is_event_stream};

/// What a response body fails with.
type BodyError = <Body as hyper::body::Body>::Error;

/// The largest JSON answer of a unary call read back from the component.
const MAX_ANSWER_BYTES: usize = 32 << 20;

/// The bytes of a message's gRPC frame before the message: a compressed flag and a length.
const FRAME_HEAD: usize = 5;

/// A call to the gRPC service; the instance id it named, for the log.
pub async fn request(
    app: &Arc<App>,
    peer: SocketAddr,
    req: Request<Incoming>,
    note: &CallNote,
) -> (Response<Body>, Option<String>) {
    let Some(rpc) = grpc::rpc(req.uri().path()) else {
        let path = req.uri().path();
        let message = format!(
            "{path} is not an RPC of {}: the card's GRPC interface serves that service",
            grpc::SERVICE
        );
        return (
            status(
                Code::Unimplemented,
                ErrorKind::MethodNotFound,
                &message,
                None,
            ),
            None,
        );
    };
    let deadline = req
        .headers()
        .get("grpc-timeout")
        .and_then(|v| grpc::timeout_ms(v.to_str().ok()?))
        .map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
    // The instance, once the call names it, for the log.
    let served = std::sync::OnceLock::new();
    let call = call(app, peer, rpc, req, note, deadline, &served);
    let outcome = match deadline {
        Some(at) => tokio::time::timeout_at(at, call)
            .await
            .unwrap_or_else(|_| Err(Refusal::deadline())),
        None => call.await,
    };
    let response = outcome.unwrap_or_else(|r| {
        note.ended(rpc, r.error.kind.reason(), r.code.http_status());
        r.into_response()
    });
    (response, served.into_inner())
}

/// Why a call ends with no message: its status, error and retry delay.
struct Refusal {
    code: Code,
    error: RpcError,
}

impl Refusal {
    fn new(code: Code, kind: ErrorKind, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            error: RpcError::new(kind, message),
        }
    }

    fn deadline() -> Refusal {
        let message = "the call's grpc-timeout passed before it was answered";
        Refusal::new(Code::DeadlineExceeded, ErrorKind::Internal, message)
    }

    fn into_response(self) -> Response<Body> {
        let Refusal { code, error } = self;
        status(code, error.kind, &error.message, error.retry_after_ms)
    }
}

/// Reads, routes and serves one call; `Err` ends it with a status and no message.
async fn call(
    app: &Arc<App>,
    peer: SocketAddr,
    rpc: &'static str,
    req: Request<Incoming>,
    note: &CallNote,
    deadline: Option<tokio::time::Instant>,
    served: &std::sync::OnceLock<String>,
) -> Result<Response<Body>, Refusal> {
    if let Some(encoding) = req.headers().get("grpc-encoding")
        && encoding != "identity"
    {
        let message = format!(
            "messages compressed with {} are not accepted: send them uncompressed",
            String::from_utf8_lossy(encoding.as_bytes())
        );
        return Err(Refusal::new(
            Code::Unimplemented,
            ErrorKind::InvalidRequest,
            message,
        ));
    }
    // gRPC is A2A 1.0 only (0.3's service is not served): another `a2a-version` is refused here,
    // where the JSON-RPC endpoint it is carried to would take 0.3.
    let asked = req
        .headers()
        .get("a2a-version")
        .map(|v| v.to_str().unwrap_or("?"));
    if !a2a_protocol::version::is_supported(asked) {
        let message = format!(
            "A2A-Version {} is not supported over gRPC; this service speaks {}",
            asked.unwrap_or(""),
            a2a_protocol::version::SUPPORTED
        );
        return Err(Refusal::new(
            grpc::code(ErrorKind::VersionNotSupported),
            ErrorKind::VersionNotSupported,
            message,
        ));
    }
    let routes = app.routes();
    // The instance is named inside the message: read up to the largest limit, then check its own.
    let largest = routes.max_body_bytes();
    let (parts, body) = read_body(req, largest + FRAME_HEAD as u64, &app.config.runtime)
        .await
        .map_err(|(status, message)| {
            let message = match status {
                413 => format!("the message is larger than any agent here takes ({largest} bytes)"),
                _ => message,
            };
            Refusal::new(
                grpc::code_of_http(status),
                ErrorKind::InvalidRequest,
                message,
            )
        })?;
    let message = unframe(&body)?;
    let mut params = to_json(rpc, message)?;
    let tenant = match params.as_object_mut().and_then(|p| p.remove("tenant")) {
        Some(Value::String(t)) => t,
        _ => String::new(),
    };
    let instance = routes.tenant(&tenant).ok_or_else(|| {
        let message = match tenant.as_str() {
            "" => "no agent answers calls without a tenant here: set the tenant the card's GRPC interface names".to_owned(),
            t => format!("no agent has the tenant {t:?}; each card's GRPC interface names its own"),
        };
        Refusal::new(Code::NotFound, ErrorKind::InvalidRequest, message)
    })?;
    let limit = instance.record.limits.max_body_bytes;
    if message.len() as u64 > limit {
        let message = format!(
            "the message is {} bytes, more than this agent's limit of {limit}",
            message.len()
        );
        return Err(Refusal::new(
            Code::ResourceExhausted,
            ErrorKind::InvalidRequest,
            message,
        ));
    }
    let _ = served.set(instance.record.id.clone());
    let json = jsonrpc(&instance.record.endpoint_path, rpc, params, parts)?;
    let response = match super::a2a::serve_transcoded(app, instance, peer, json, note).await {
        Ok(r) | Err(r) => r,
    };
    answer(rpc, response, deadline).await
}

/// The JSON-RPC request a call runs as: POSTed to the instance's endpoint with the call's
/// metadata (credentials, `a2a-version`, `a2a-extensions`) as headers and its extensions (the
/// client certificate).
fn jsonrpc(
    endpoint: &str,
    rpc: &str,
    params: Value,
    parts: http::request::Parts,
) -> Result<Request<Bytes>, Refusal> {
    let body = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": rpc, "params": params });
    let mut headers = HeaderMap::with_capacity(parts.headers.len() + 2);
    for (name, value) in &parts.headers {
        let n = name.as_str();
        if !(n.starts_with("grpc-") || n == "te" || n == "content-type" || n == "content-length") {
            headers.append(name.clone(), value.clone());
        }
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let accept = match grpc::is_streaming(rpc) {
        true => "text/event-stream",
        false => "application/json",
    };
    headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
    // The component reads the authority (HTTP/2 carries it in the target, not in `Host`).
    let target = match (parts.uri.scheme_str(), parts.uri.authority()) {
        (Some(scheme), Some(authority)) => format!("{scheme}://{authority}{endpoint}"),
        _ => endpoint.to_owned(),
    };
    let mut req = Request::post(target)
        .body(Bytes::from(body.to_string()))
        .map_err(|e| Refusal::new(Code::Internal, ErrorKind::Internal, e.to_string()))?;
    *req.headers_mut() = headers;
    *req.extensions_mut() = parts.extensions;
    Ok(req)
}

/// The one message of a request body: uncompressed, framed once.
fn unframe(body: &[u8]) -> Result<&[u8], Refusal> {
    let invalid = |m: &str| Refusal::new(Code::InvalidArgument, ErrorKind::InvalidRequest, m);
    if body.len() < FRAME_HEAD {
        return Err(invalid("the call carries no message: send exactly one"));
    }
    if body[0] != 0 {
        return Err(Refusal::new(
            Code::Internal,
            ErrorKind::InvalidRequest,
            "the message is flagged compressed but the call names no grpc-encoding",
        ));
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    match body.len() - FRAME_HEAD {
        n if n == len => Ok(&body[FRAME_HEAD..]),
        n if n < len => Err(invalid("the message ends before its declared length")),
        _ => Err(invalid(
            "the call carries more than one message: send exactly one",
        )),
    }
}

/// `message` framed for the wire.
fn frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(FRAME_HEAD + message.len());
    out.put_u8(0);
    out.put_u32(message.len() as u32);
    out.put_slice(message);
    out.freeze()
}

/// The ProtoJSON of a request message of `rpc`.
fn to_json(rpc: &str, message: &[u8]) -> Result<Value, Refusal> {
    fn decode<M: prost::Message + Default + serde::Serialize>(b: &[u8]) -> Result<Value, String> {
        let m = M::decode(b).map_err(|e| format!("the message is not valid protobuf: {e}"))?;
        serde_json::to_value(&m).map_err(|e| format!("the message has no JSON form: {e}"))
    }
    match rpc {
        "SendMessage" | "SendStreamingMessage" => decode::<pb::SendMessageRequest>(message),
        "GetTask" => decode::<pb::GetTaskRequest>(message),
        "ListTasks" => decode::<pb::ListTasksRequest>(message),
        "CancelTask" => decode::<pb::CancelTaskRequest>(message),
        "SubscribeToTask" => decode::<pb::SubscribeToTaskRequest>(message),
        "CreateTaskPushNotificationConfig" => decode::<pb::TaskPushNotificationConfig>(message),
        "GetTaskPushNotificationConfig" => {
            decode::<pb::GetTaskPushNotificationConfigRequest>(message)
        }
        "ListTaskPushNotificationConfigs" => {
            decode::<pb::ListTaskPushNotificationConfigsRequest>(message)
        }
        "GetExtendedAgentCard" => decode::<pb::GetExtendedAgentCardRequest>(message),
        "DeleteTaskPushNotificationConfig" => {
            decode::<pb::DeleteTaskPushNotificationConfigRequest>(message)
        }
        other => unreachable!("{other} is not in methods::NAMES"),
    }
    .map_err(|m| Refusal::new(Code::InvalidArgument, ErrorKind::InvalidParams, m))
}

/// The protobuf of the answer `rpc` returns, from its ProtoJSON.
fn to_proto(rpc: &str, result: &Value) -> Result<Vec<u8>, Refusal> {
    fn encode<M: prost::Message + serde::de::DeserializeOwned>(
        v: &Value,
    ) -> Result<Vec<u8>, String> {
        let m = M::deserialize(v)
            .map_err(|e| format!("the agent's answer does not fit the proto: {e}"))?;
        Ok(m.encode_to_vec())
    }
    match rpc {
        "SendMessage" => encode::<pb::SendMessageResponse>(result),
        "SendStreamingMessage" | "SubscribeToTask" => encode::<pb::StreamResponse>(result),
        "GetTask" | "CancelTask" => encode::<pb::Task>(result),
        "ListTasks" => encode::<pb::ListTasksResponse>(result),
        "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => {
            encode::<pb::TaskPushNotificationConfig>(result)
        }
        "ListTaskPushNotificationConfigs" => {
            encode::<pb::ListTaskPushNotificationConfigsResponse>(result)
        }
        "GetExtendedAgentCard" => encode::<pb::AgentCard>(result),
        // google.protobuf.Empty.
        "DeleteTaskPushNotificationConfig" => Ok(Vec::new()),
        other => unreachable!("{other} is not in methods::NAMES"),
    }
    .map_err(|m| Refusal::new(Code::Internal, ErrorKind::InvalidAgentResponse, m))
}

/// The gRPC answer of the JSON-RPC `response`: a stream's events as it sends them, else its
/// one result or error.
async fn answer(
    rpc: &'static str,
    response: Response<Body>,
    deadline: Option<tokio::time::Instant>,
) -> Result<Response<Body>, Refusal> {
    if is_event_stream(&response) {
        let events = Events {
            body: response.into_body(),
            rpc,
            decoder: Default::default(),
            queued: VecDeque::new(),
            ended: false,
            deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at))),
        };
        return Ok(grpc_response(events.boxed_unsync()));
    }
    let http_status = response.status().as_u16();
    let retry_after = retry_after_ms(response.headers());
    let bytes = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| {
            Refusal::new(
                Code::Internal,
                ErrorKind::Internal,
                format!("the agent's answer could not be read: {e}"),
            )
        })?
        .to_bytes();
    let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    match grpc::answer(&value) {
        Some(Ok(result)) => {
            let message = to_proto(rpc, result)?;
            let trailers = trailers(Code::Ok, None, "", None);
            Ok(framed(vec![
                Frame::data(frame(&message)),
                Frame::trailers(trailers),
            ]))
        }
        Some(Err(error)) => {
            let code = match http_status {
                200 => grpc::code(error.kind),
                s => grpc::code_of_http(s),
            };
            let error = RpcError {
                retry_after_ms: retry_after,
                ..error
            };
            Err(Refusal { code, error })
        }
        None => {
            let message =
                format!("the agent answered HTTP {http_status} with no JSON-RPC response");
            Err(Refusal::new(
                grpc::code_of_http(http_status),
                ErrorKind::Internal,
                message,
            ))
        }
    }
}

/// `Retry-After` (seconds) in milliseconds.
fn retry_after_ms(headers: &HeaderMap) -> Option<u64> {
    let secs: u64 = headers
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .parse()
        .ok()?;
    Some(secs * 1000)
}

/// A 200 response of gRPC messages.
fn grpc_response(body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    r
}

/// A call ended by a status with no message. The status travels as trailers after the
/// headers, not in them (trailers-only), so no body wrapper can end the stream before it.
fn status(
    code: Code,
    kind: ErrorKind,
    message: &str,
    retry_after_ms: Option<u64>,
) -> Response<Body> {
    let t = trailers(code, Some(kind), message, retry_after_ms);
    framed(vec![Frame::trailers(t)])
}

/// A response of these frames.
fn framed(frames: Vec<Frame<Bytes>>) -> Response<Body> {
    let body = http_body_util::StreamBody::new(futures_util::stream::iter(
        frames.into_iter().map(Ok::<_, BodyError>),
    ));
    grpc_response(body.boxed_unsync())
}

/// The trailers that end a call: its status, message and, for an error, the `ErrorInfo` of
/// its kind (and a `RetryInfo` when it may be retried later).
fn trailers(
    code: Code,
    kind: Option<ErrorKind>,
    message: &str,
    retry_after_ms: Option<u64>,
) -> HeaderMap {
    let code = tonic::Code::from_i32(code as i32);
    let status = match kind {
        None => tonic::Status::new(code, message),
        Some(kind) => {
            let mut details =
                ErrorDetails::with_error_info(kind.reason(), "a2a-protocol.org", HashMap::new());
            if let Some(ms) = retry_after_ms {
                details.set_retry_info(Some(Duration::from_millis(ms)));
            }
            tonic::Status::with_error_details(code, message, details)
        }
    };
    let mut headers = HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        headers.insert("grpc-status", HeaderValue::from(code as i32));
    }
    headers
}

/// A JSON-RPC event stream as a stream of `StreamResponse` messages: each event's result one
/// message, an error event the status that ends it, the end of the stream OK.
struct Events {
    body: Body,
    rpc: &'static str,
    decoder: a2a_protocol::sse::Decoder,
    queued: VecDeque<Frame<Bytes>>,
    ended: bool,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Events {
    /// Queues what one event's JSON says; false when it ended the call.
    fn event(&mut self, data: &str) -> bool {
        let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
        let outcome = match grpc::answer(&value) {
            Some(Ok(result)) => to_proto(self.rpc, result),
            Some(Err(error)) => Err(Refusal {
                code: grpc::code(error.kind),
                error,
            }),
            None => Err(Refusal::new(
                Code::Internal,
                ErrorKind::Internal,
                "the agent sent an event that is no JSON-RPC response",
            )),
        };
        match outcome {
            Ok(message) => {
                self.queued.push_back(Frame::data(frame(&message)));
                true
            }
            Err(r) => {
                self.end(r.code, Some(r.error.kind), &r.error.message);
                false
            }
        }
    }

    fn end(&mut self, code: Code, kind: Option<ErrorKind>, message: &str) {
        self.queued
            .push_back(Frame::trailers(trailers(code, kind, message, None)));
        self.ended = true;
    }
}

impl hyper::body::Body for Events {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        loop {
            if let Some(frame) = self.queued.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            if let Some(deadline) = self.deadline.as_mut()
                && deadline.as_mut().poll(cx).is_ready()
            {
                let r = Refusal::deadline();
                self.end(r.code, Some(r.error.kind), &r.error.message);
                continue;
            }
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let events = self.decoder.push(&data);
                    for event in events {
                        if !self.event(&event) {
                            break;
                        }
                    }
                }
                Some(Err(e)) => {
                    let message = format!("the agent's stream failed: {e}");
                    self.end(Code::Internal, Some(ErrorKind::Internal), &message);
                }
                None => self.end(Code::Ok, None, ""),
            }
        }
    }
}
