//! The HTTP+JSON binding (A2A 1.0.1 §11). A REST request becomes the method name and params the
//! one dispatcher ([`crate::methods::dispatch`]) serves for JSON-RPC too, and an error becomes a
//! `google.rpc.Status` (AIP-193) with the HTTP status of the v1.0.1 mapping: the bindings differ
//! only in framing.

use serde_json::{Map, Value, json};

use crate::errors::{ErrorKind, RpcError};

/// A REST request, as the method and params of the dispatcher.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// The JSON-RPC method name it stands for.
    pub method: &'static str,
    /// Its params (the body's fields, the path's and the query's).
    pub params: Value,
}

/// Why a REST request names no method: the error, and the methods its path allows when only the
/// method was wrong (a 405 with `Allow`).
#[derive(Clone, Debug, PartialEq)]
pub struct Unrouted {
    /// What to answer.
    pub error: RpcError,
    /// The methods the path serves, for a 405.
    pub allow: Option<&'static str>,
}

/// The first path segments of the binding; anything else first is a tenant.
const ROOTS: [&str; 4] = [
    "message:send",
    "message:stream",
    "tasks",
    "extendedAgentCard",
];

/// The longest path segment, tenant, id or query value taken.
const MAX_SEGMENT: usize = 256;

/// Routes `verb path?query` (`path` relative to the interface URL, from `/`) with its `body`.
pub fn route(verb: &str, path: &str, query: &str, body: &[u8]) -> Result<Call, Unrouted> {
    let mut segments: Vec<String> = Vec::new();
    for raw in path.split('/').filter(|s| !s.is_empty()) {
        segments.push(segment(raw)?);
    }
    let mut params = Map::new();
    if segments.len() > 1 && !ROOTS.contains(&segments[0].as_str()) {
        params.insert("tenant".into(), Value::String(segments.remove(0)));
    }
    let s: Vec<&str> = segments.iter().map(String::as_str).collect();
    let (method, allow, takes_body) = match s.as_slice() {
        ["message:send"] => ("SendMessage", "POST", true),
        ["message:stream"] => ("SendStreamingMessage", "POST", true),
        ["tasks"] => ("ListTasks", "GET", false),
        ["extendedAgentCard"] => ("GetExtendedAgentCard", "GET", false),
        ["tasks", task] => match task.rsplit_once(':') {
            None => ("GetTask", "GET", false),
            Some((_, "cancel")) => ("CancelTask", "POST", true),
            Some((_, "subscribe")) => ("SubscribeToTask", "GET, POST", verb == "POST"),
            Some((_, other)) => return Err(not_found(&format!("tasks have no :{other} method"))),
        },
        ["tasks", _, "pushNotificationConfigs"] => match verb {
            "GET" => ("ListTaskPushNotificationConfigs", "GET, POST", false),
            _ => ("CreateTaskPushNotificationConfig", "GET, POST", true),
        },
        ["tasks", _, "pushNotificationConfigs", _] => match verb {
            "DELETE" => ("DeleteTaskPushNotificationConfig", "GET, DELETE", false),
            _ => ("GetTaskPushNotificationConfig", "GET, DELETE", false),
        },
        _ => return Err(not_found(&format!("no A2A operation at {path}"))),
    };
    if !allow.split(", ").any(|a| a == verb) {
        return Err(Unrouted {
            error: RpcError::new(
                ErrorKind::MethodNotFound,
                format!("{verb} is not allowed on {path}; use {allow}"),
            ),
            allow: Some(allow),
        });
    }
    if takes_body {
        params.extend(body_fields(body)?);
    }
    match s.as_slice() {
        ["tasks", task] => {
            let id = task.rsplit_once(':').map_or(*task, |(id, _)| id);
            params.insert("id".into(), Value::String(id.to_owned()));
        }
        ["tasks", task, "pushNotificationConfigs", rest @ ..] => {
            params.insert("taskId".into(), Value::String((*task).to_owned()));
            if let [config] = rest {
                params.insert("id".into(), Value::String((*config).to_owned()));
            }
        }
        _ => {}
    }
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if name.eq_ignore_ascii_case("A2A-Version") {
            continue;
        }
        if value.len() > MAX_SEGMENT {
            return Err(invalid(&format!(
                "query parameter {name} is longer than {MAX_SEGMENT} bytes"
            )));
        }
        params.insert(name.to_string(), query_value(method, &name, &value)?);
    }
    Ok(Call {
        method,
        params: Value::Object(params),
    })
}

/// A request body's fields: none when it is empty (or only whitespace), else it must be a JSON
/// object.
pub fn body_fields(body: &[u8]) -> Result<Map<String, Value>, Unrouted> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(fields)) => Ok(fields),
        Ok(_) => Err(invalid("the body must be a JSON object")),
        Err(e) => {
            let error = RpcError::new(ErrorKind::ParseError, format!("the body is not JSON: {e}"));
            Err(Unrouted { error, allow: None })
        }
    }
}

/// A query value in the type the method's params give that field.
fn query_value(method: &str, name: &str, value: &str) -> Result<Value, Unrouted> {
    match name {
        "pageSize" | "historyLength" => value
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| invalid(&format!("{name} must be an integer, not {value:?}"))),
        "includeArtifacts" => match value {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(invalid(&format!(
                "{name} must be true or false, not {value:?}"
            ))),
        },
        "contextId" | "status" | "pageToken" | "statusTimestampAfter" | "tenant" => {
            Ok(Value::String(value.to_owned()))
        }
        _ => Err(invalid(&format!(
            "{method} takes no query parameter {name}"
        ))),
    }
}

/// One path segment, percent-decoded.
fn segment(raw: &str) -> Result<String, Unrouted> {
    let decoded = percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| invalid("a path segment is not UTF-8 once decoded"))?;
    if decoded.len() > MAX_SEGMENT || decoded.contains('/') {
        return Err(invalid("a path segment is too long or hides a /"));
    }
    Ok(decoded.into_owned())
}

fn not_found(message: &str) -> Unrouted {
    Unrouted {
        error: RpcError::new(ErrorKind::MethodNotFound, message),
        allow: None,
    }
}

fn invalid(message: &str) -> Unrouted {
    Unrouted {
        error: RpcError::new(ErrorKind::InvalidParams, message),
        allow: None,
    }
}

/// Whether a request to `path` streams its answer (`…/message:stream`, `…:subscribe`): it
/// holds an open-stream slot from the start.
pub fn streams(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    path.ends_with("/message:stream") || path.ends_with(":subscribe")
}

/// The HTTP status and `google.rpc.Code` name an error travels with (the v1.0.1 mapping).
pub fn status(kind: ErrorKind) -> (u16, &'static str) {
    use ErrorKind as K;
    match kind {
        K::ParseError | K::InvalidRequest | K::InvalidParams | K::ContentTypeNotSupported => {
            (400, "INVALID_ARGUMENT")
        }
        K::MethodNotFound | K::TaskNotFound => (404, "NOT_FOUND"),
        K::TaskNotCancelable
        | K::PushNotificationNotSupported
        | K::UnsupportedOperation
        | K::ExtendedAgentCardNotConfigured
        | K::ExtensionSupportRequired
        | K::VersionNotSupported => (400, "FAILED_PRECONDITION"),
        K::Internal | K::InvalidAgentResponse => (500, "INTERNAL"),
        K::Unauthorized => (401, "UNAUTHENTICATED"),
        K::RateLimited => (429, "RESOURCE_EXHAUSTED"),
        K::Unavailable => (503, "UNAVAILABLE"),
    }
}

/// The `google.rpc.Status` body of an error sent with HTTP `code` (its mapped status, or the
/// transport's own: 401, 405, 413, 429).
pub fn error_body(code: u16, e: &RpcError) -> Value {
    let name = match status(e.kind) {
        (mapped, name) if mapped == code => name,
        // The transport's own refusals, named as AIP-193 names their HTTP status.
        _ => match code {
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            405 | 501 => "UNIMPLEMENTED",
            429 => "RESOURCE_EXHAUSTED",
            503 => "UNAVAILABLE",
            500.. => "INTERNAL",
            _ => "INVALID_ARGUMENT",
        },
    };
    json!({ "error": { "code": code, "status": name, "message": e.message, "details": [e.error_info()] } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(verb: &str, path: &str, query: &str, body: &str) -> Call {
        route(verb, path, query, body.as_bytes()).unwrap_or_else(|e| panic!("{verb} {path}: {e:?}"))
    }

    fn refused(verb: &str, path: &str, query: &str, body: &str) -> Unrouted {
        route(verb, path, query, body.as_bytes()).expect_err(path)
    }

    #[test]
    fn every_operation_of_the_binding_becomes_its_method() {
        let send = call(
            "POST",
            "/message:send",
            "",
            r#"{"message":{"messageId":"m"}}"#,
        );
        assert_eq!(send.method, "SendMessage");
        assert_eq!(send.params, json!({"message": {"messageId": "m"}}));
        assert_eq!(
            call("POST", "/message:stream", "", "{}").method,
            "SendStreamingMessage"
        );
        let get = call("GET", "/tasks/t-1", "historyLength=3", "");
        assert_eq!(
            (get.method, get.params),
            ("GetTask", json!({"id": "t-1", "historyLength": 3}))
        );
        let list = call(
            "GET",
            "/tasks",
            "contextId=c&status=TASK_STATE_WORKING&pageSize=10&pageToken=p&historyLength=0&statusTimestampAfter=2026-01-01T00%3A00%3A00Z&includeArtifacts=true",
            "",
        );
        assert_eq!(list.method, "ListTasks");
        assert_eq!(
            list.params,
            json!({"contextId": "c", "status": "TASK_STATE_WORKING", "pageSize": 10, "pageToken": "p", "historyLength": 0, "statusTimestampAfter": "2026-01-01T00:00:00Z", "includeArtifacts": true})
        );
        let cancel = call(
            "POST",
            "/tasks/t-1:cancel",
            "",
            r#"{"metadata":{"why":"x"}}"#,
        );
        assert_eq!(
            (cancel.method, cancel.params),
            ("CancelTask", json!({"metadata": {"why": "x"}, "id": "t-1"}))
        );
        for verb in ["GET", "POST"] {
            let sub = call(verb, "/tasks/t-1:subscribe", "", "");
            assert_eq!(
                (sub.method, sub.params),
                ("SubscribeToTask", json!({"id": "t-1"}))
            );
        }
        let create = call(
            "POST",
            "/tasks/t-1/pushNotificationConfigs",
            "",
            r#"{"url":"https://h/hook"}"#,
        );
        assert_eq!(create.method, "CreateTaskPushNotificationConfig");
        assert_eq!(
            create.params,
            json!({"url": "https://h/hook", "taskId": "t-1"})
        );
        let list = call(
            "GET",
            "/tasks/t-1/pushNotificationConfigs",
            "pageSize=5&pageToken=x",
            "",
        );
        assert_eq!(list.method, "ListTaskPushNotificationConfigs");
        assert_eq!(
            list.params,
            json!({"taskId": "t-1", "pageSize": 5, "pageToken": "x"})
        );
        let get = call("GET", "/tasks/t-1/pushNotificationConfigs/c-1", "", "");
        assert_eq!(
            (get.method, get.params),
            (
                "GetTaskPushNotificationConfig",
                json!({"taskId": "t-1", "id": "c-1"})
            )
        );
        let delete = call("DELETE", "/tasks/t-1/pushNotificationConfigs/c-1", "", "");
        assert_eq!(delete.method, "DeleteTaskPushNotificationConfig");
        assert_eq!(
            call("GET", "/extendedAgentCard", "", "").method,
            "GetExtendedAgentCard"
        );
    }

    #[test]
    fn a_tenant_prefix_is_taken_into_the_params() {
        let c = call("GET", "/acme/tasks/t%2D1", "", "");
        assert_eq!(c.params, json!({"tenant": "acme", "id": "t-1"}));
        let c = call("POST", "/acme/message:send", "", "{}");
        assert_eq!(
            (c.method, c.params),
            ("SendMessage", json!({"tenant": "acme"}))
        );
        assert_eq!(
            call("GET", "/tasks", "", "").params,
            json!({}),
            "tasks alone is no tenant"
        );
    }

    #[test]
    fn wrong_paths_methods_bodies_and_queries_say_what_to_fix() {
        let e = refused("GET", "/message:send", "", "");
        assert_eq!(
            (e.error.kind, e.allow),
            (ErrorKind::MethodNotFound, Some("POST"))
        );
        let e = refused("DELETE", "/tasks/t", "", "");
        assert_eq!(e.allow, Some("GET"));
        assert_eq!(
            refused("GET", "/nothing", "", "").error.kind,
            ErrorKind::MethodNotFound
        );
        assert_eq!(
            refused("POST", "/tasks/t:pause", "", "").error.kind,
            ErrorKind::MethodNotFound
        );
        assert_eq!(
            refused("POST", "/message:send", "", "{").error.kind,
            ErrorKind::ParseError
        );
        assert_eq!(
            refused("POST", "/message:send", "", "[1]").error.kind,
            ErrorKind::InvalidParams
        );
        let e = refused("GET", "/tasks", "pageSize=ten", "");
        assert!(
            e.error.message.contains("pageSize must be an integer"),
            "{e:?}"
        );
        let e = refused("GET", "/tasks", "includeArtifacts=yes", "");
        assert_eq!(e.error.kind, ErrorKind::InvalidParams);
        let e = refused("GET", "/tasks/t", "bogus=1", "");
        assert!(
            e.error
                .message
                .contains("GetTask takes no query parameter bogus"),
            "{e:?}"
        );
        let long = "x".repeat(MAX_SEGMENT + 1);
        assert_eq!(
            refused("GET", &format!("/tasks/{long}"), "", "").error.kind,
            ErrorKind::InvalidParams
        );
        assert_eq!(
            refused("GET", "/tasks/a%2Fb", "", "").error.kind,
            ErrorKind::InvalidParams
        );
        assert_eq!(
            call("GET", "/tasks/t", "A2A-Version=1.0", "").params,
            json!({"id": "t"}),
            "the version parameter is the transport's"
        );
    }

    #[test]
    fn errors_are_google_rpc_status_with_the_v1_0_1_statuses() {
        let e = RpcError::new(ErrorKind::TaskNotFound, "no task t");
        assert_eq!(
            error_body(404, &e),
            json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "no task t", "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}
            ]}})
        );
        assert_eq!(
            status(ErrorKind::TaskNotCancelable),
            (400, "FAILED_PRECONDITION")
        );
        assert_eq!(
            status(ErrorKind::PushNotificationNotSupported),
            (400, "FAILED_PRECONDITION")
        );
        assert_eq!(
            status(ErrorKind::UnsupportedOperation),
            (400, "FAILED_PRECONDITION")
        );
        assert_eq!(
            status(ErrorKind::VersionNotSupported),
            (400, "FAILED_PRECONDITION")
        );
        assert_eq!(
            status(ErrorKind::ContentTypeNotSupported),
            (400, "INVALID_ARGUMENT")
        );
        assert_eq!(status(ErrorKind::InvalidAgentResponse), (500, "INTERNAL"));
        assert_eq!(status(ErrorKind::Unauthorized), (401, "UNAUTHENTICATED"));
        assert_eq!(status(ErrorKind::RateLimited), (429, "RESOURCE_EXHAUSTED"));
        assert_eq!(status(ErrorKind::Unavailable), (503, "UNAVAILABLE"));
    }
}
