//! Which methods exist, on which transport (docs/protocol.md "A2A methods").

use crate::errors::{ErrorKind, RpcError};

/// A served method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Blocking (or returnImmediately) send.
    SendMessage,
    /// Streaming send.
    SendStreamingMessage,
    /// One task.
    GetTask,
    /// Filtered, paged tasks.
    ListTasks,
    /// Cancel a task.
    CancelTask,
    /// Stream an existing task.
    SubscribeToTask,
    /// The (same) AgentCard.
    GetExtendedAgentCard,
    /// Register (or replace) a push-notification config of a task.
    CreatePushConfig,
    /// One push-notification config.
    GetPushConfig,
    /// A task's push-notification configs, paged.
    ListPushConfigs,
    /// Remove a push-notification config (idempotent).
    DeletePushConfig,
}

/// Every A2A 1.0 method (also the gRPC service's RPCs).
pub const NAMES: [&str; 11] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "GetExtendedAgentCard",
    "DeleteTaskPushNotificationConfig",
];

/// The push-notification config methods, answered PUSH_NOTIFICATION_NOT_SUPPORTED while push is off.
pub const PUSH_METHODS: [(&str, Method); 4] = [
    ("CreateTaskPushNotificationConfig", Method::CreatePushConfig),
    ("GetTaskPushNotificationConfig", Method::GetPushConfig),
    ("ListTaskPushNotificationConfigs", Method::ListPushConfigs),
    ("DeleteTaskPushNotificationConfig", Method::DeletePushConfig),
];

/// How to answer a request.
#[derive(Clone, Debug, PartialEq)]
pub enum Dispatch {
    /// Serve the method.
    Serve(Method),
    /// Answer this error as a plain JSON-RPC body.
    Json(RpcError),
    /// Answer this error as one SSE frame (the client asked for a stream).
    Frame(RpcError),
}

impl Method {
    /// Whether the method answers with an SSE stream.
    pub fn is_streaming(self) -> bool {
        matches!(self, Self::SendStreamingMessage | Self::SubscribeToTask)
    }
}

/// The A2A 0.3 method names and their 1.0 successors (served by [`crate::compat03`] where the
/// instance's `compat03` is on; elsewhere their callers are
/// told so).
pub const LEGACY_METHODS: [(&str, &str); 11] = [
    ("message/send", "SendMessage"),
    ("message/stream", "SendStreamingMessage"),
    ("tasks/get", "GetTask"),
    ("tasks/list", "ListTasks"),
    ("tasks/cancel", "CancelTask"),
    ("tasks/resubscribe", "SubscribeToTask"),
    (
        "tasks/pushNotificationConfig/set",
        "CreateTaskPushNotificationConfig",
    ),
    (
        "tasks/pushNotificationConfig/get",
        "GetTaskPushNotificationConfig",
    ),
    (
        "tasks/pushNotificationConfig/list",
        "ListTaskPushNotificationConfigs",
    ),
    (
        "tasks/pushNotificationConfig/delete",
        "DeleteTaskPushNotificationConfig",
    ),
    ("agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"),
];

/// Decides how to answer `method` when the client does (or does not) accept `text/event-stream`,
/// on an instance that serves push notifications (`push`) or not.
pub fn dispatch(method: &str, accepts_sse: bool, push: bool) -> Dispatch {
    let m = match method {
        "SendMessage" => Method::SendMessage,
        "SendStreamingMessage" => Method::SendStreamingMessage,
        "GetTask" => Method::GetTask,
        "ListTasks" => Method::ListTasks,
        "CancelTask" => Method::CancelTask,
        "SubscribeToTask" => Method::SubscribeToTask,
        "GetExtendedAgentCard" => Method::GetExtendedAgentCard,
        m => match PUSH_METHODS.iter().find(|(name, _)| *name == m) {
            Some((_, method)) if push => *method,
            Some(_) => {
                return Dispatch::Json(RpcError::new(
                    ErrorKind::PushNotificationNotSupported,
                    "push notifications are not enabled on this agent",
                ));
            }
            None => {
                let message = match LEGACY_METHODS.iter().find(|(old, _)| *old == m) {
                    Some((old, new)) => format!(
                        "{old} is an A2A 0.3 method, which this agent does not serve: it speaks A2A 1.0, where the method is {new} (use an A2A 1.0 client)"
                    ),
                    None => format!("method {m:?} does not exist"),
                };
                return Dispatch::Json(RpcError::new(ErrorKind::MethodNotFound, message));
            }
        },
    };
    match (m.is_streaming(), accepts_sse) {
        (true, false) => Dispatch::Json(RpcError::new(
            ErrorKind::MethodNotFound,
            format!("{method} streams its answer: send it with Accept: text/event-stream"),
        )),
        (false, true) if m == Method::SendMessage => Dispatch::Frame(RpcError::new(
            ErrorKind::MethodNotFound,
            "SendMessage is not served on the streaming path: use SendStreamingMessage, or send without Accept: text/event-stream",
        )),
        _ => Dispatch::Serve(m),
    }
}

/// Whether an `Accept` header value admits `text/event-stream`.
pub fn accepts_sse(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',').any(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("text/event-stream")
        })
    })
}

/// A2A 1.0.1's media type; `application/json` is accepted and answered alike.
pub const A2A_JSON: &str = "application/a2a+json";

/// The media type of a request's answers: the JSON type its `Content-Type` named (either is
/// accepted), else `application/a2a+json` when its `Accept` names it, else `application/json`;
/// none when the request's body is of another type (CONTENT_TYPE_NOT_SUPPORTED).
pub fn answer_type(content_type: Option<&str>, accept: Option<&str>) -> Option<&'static str> {
    let essence = |t: &str| {
        t.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase()
    };
    match content_type.map(essence).as_deref() {
        Some("application/json") => Some("application/json"),
        Some(A2A_JSON) => Some(A2A_JSON),
        Some(_) => None,
        None if accept.is_some_and(|a| a.split(',').any(|t| essence(t) == A2A_JSON)) => {
            Some(A2A_JSON)
        }
        None => Some("application/json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_a_served_method() {
        for name in NAMES {
            let streams = matches!(name, "SendStreamingMessage" | "SubscribeToTask");
            assert!(
                matches!(dispatch(name, streams, true), Dispatch::Serve(m) if m.is_streaming() == streams),
                "{name}"
            );
        }
    }

    #[test]
    fn a2a_0_3_methods_are_told_what_this_agent_speaks() {
        for (old, new) in LEGACY_METHODS {
            let Dispatch::Json(e) = dispatch(old, false, true) else {
                panic!("{old}")
            };
            assert_eq!(e.kind, ErrorKind::MethodNotFound);
            assert!(
                e.message.contains("A2A 0.3") && e.message.contains(new),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn answers_come_in_the_json_type_the_request_used() {
        for (content_type, accept, want) in [
            (Some("application/json"), None, Some("application/json")),
            (
                Some("Application/A2A+JSON; charset=utf-8"),
                None,
                Some(A2A_JSON),
            ),
            (None, Some("application/a2a+json"), Some(A2A_JSON)),
            (
                None,
                Some("text/event-stream, application/a2a+json;q=0.9"),
                Some(A2A_JSON),
            ),
            (None, None, Some("application/json")),
            (
                Some("application/json"),
                Some("application/a2a+json"),
                Some("application/json"),
            ),
            (Some("text/plain"), None, None),
        ] {
            assert_eq!(
                answer_type(content_type, accept),
                want,
                "{content_type:?} {accept:?}"
            );
        }
    }

    #[test]
    fn every_method_on_its_transport() {
        for (name, m) in [
            ("SendMessage", Method::SendMessage),
            ("GetTask", Method::GetTask),
            ("ListTasks", Method::ListTasks),
            ("CancelTask", Method::CancelTask),
            ("GetExtendedAgentCard", Method::GetExtendedAgentCard),
        ] {
            assert_eq!(dispatch(name, false, false), Dispatch::Serve(m));
        }
        assert_eq!(
            dispatch("SendStreamingMessage", true, false),
            Dispatch::Serve(Method::SendStreamingMessage)
        );
        assert_eq!(
            dispatch("SubscribeToTask", true, false),
            Dispatch::Serve(Method::SubscribeToTask)
        );
        assert_eq!(
            dispatch("GetTask", true, false),
            Dispatch::Serve(Method::GetTask)
        );
    }

    #[test]
    fn streaming_methods_need_the_accept_header() {
        for m in ["SendStreamingMessage", "SubscribeToTask"] {
            match dispatch(m, false, true) {
                Dispatch::Json(e) => {
                    assert_eq!(e.kind, ErrorKind::MethodNotFound);
                    assert!(e.message.contains("Accept: text/event-stream"));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn send_message_on_the_streaming_path_is_one_error_frame() {
        assert!(
            matches!(dispatch("SendMessage", true, false), Dispatch::Frame(e) if e.kind == ErrorKind::MethodNotFound)
        );
    }

    #[test]
    fn push_and_unknown_methods() {
        for (name, method) in PUSH_METHODS {
            assert!(
                matches!(dispatch(name, false, false), Dispatch::Json(e) if e.kind == ErrorKind::PushNotificationNotSupported)
            );
            assert_eq!(dispatch(name, false, true), Dispatch::Serve(method));
            assert!(!method.is_streaming());
        }
        for push in [false, true] {
            assert!(
                matches!(dispatch("message/send", false, push), Dispatch::Json(e) if e.kind == ErrorKind::MethodNotFound)
            );
        }
    }

    #[test]
    fn accept_parsing() {
        assert!(accepts_sse(Some("text/event-stream")));
        assert!(accepts_sse(Some(
            "application/json, text/event-stream;q=0.9"
        )));
        assert!(!accepts_sse(Some("application/json")));
        assert!(!accepts_sse(None));
    }
}
