//! The A2A 1.0.1 error table (docs/protocol.md "A2A methods"), with `google.rpc.ErrorInfo` data and the seed's legacy
//! numbering behind a switch (docs/serving.md "Configuration", `[protocol] legacyErrorCodes`).

use serde_json::{Value, json};

/// Every error the service emits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Body is not JSON.
    ParseError,
    /// Not a JSON-RPC 2.0 request object.
    InvalidRequest,
    /// Unknown method, or the wrong transport for a method.
    MethodNotFound,
    /// Missing or invalid params; non-streaming gate rejection.
    InvalidParams,
    /// Unexpected host or component failure.
    Internal,
    /// No such task on this instance.
    TaskNotFound,
    /// Cancel of a terminal task.
    TaskNotCancelable,
    /// Push methods while push is off.
    PushNotificationNotSupported,
    /// Subscribe to a terminal task; message to a running or terminal task.
    UnsupportedOperation,
    /// Output modes exclude text; non-JSON request content type.
    ContentTypeNotSupported,
    /// A remote agent answered nonsense (outbound client).
    InvalidAgentResponse,
    /// Extended card not configured (reserved).
    ExtendedAgentCardNotConfigured,
    /// A required extension is not supported (reserved).
    ExtensionSupportRequired,
    /// `A2A-Version` major.minor is not 1.0.
    VersionNotSupported,
    /// Missing or wrong bearer token (HTTP 401).
    Unauthorized,
    /// The caller's rate limit is spent (HTTP 429 with `Retry-After`).
    RateLimited,
    /// The task store does not answer now (HTTP 503 with `Retry-After`): retry the same
    /// request, which is safe (a resend of a message is answered with its task).
    Unavailable,
}

impl ErrorKind {
    /// The JSON-RPC code; `legacy` gives the seed's numbers where they differ.
    pub fn code(self, legacy: bool) -> i64 {
        match self {
            Self::ParseError => -32700,
            Self::InvalidRequest => -32600,
            Self::MethodNotFound => -32601,
            Self::InvalidParams => -32602,
            Self::Internal => -32603,
            Self::TaskNotFound => -32001,
            Self::TaskNotCancelable => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation => -32004,
            Self::ContentTypeNotSupported => -32005,
            Self::InvalidAgentResponse if legacy => -32008,
            Self::InvalidAgentResponse => -32006,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::ExtensionSupportRequired => -32008,
            Self::VersionNotSupported if legacy => -32007,
            Self::VersionNotSupported => -32009,
            Self::Unauthorized => -32040,
            Self::RateLimited => -32000,
            // JSON-RPC's own internal error: the reason and HTTP 503 tell it apart.
            Self::Unavailable => -32603,
        }
    }

    /// The `ErrorInfo.reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::ParseError => "PARSE_ERROR",
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::MethodNotFound => "METHOD_NOT_FOUND",
            Self::InvalidParams => "INVALID_PARAMS",
            Self::Internal => "INTERNAL_ERROR",
            Self::TaskNotFound => "TASK_NOT_FOUND",
            Self::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            Self::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            Self::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            Self::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            Self::InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            Self::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            Self::ExtensionSupportRequired => "EXTENSION_SUPPORT_REQUIRED",
            Self::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::RateLimited => "RATE_LIMITED",
            Self::Unavailable => "UNAVAILABLE",
        }
    }

    /// The kind an `ErrorInfo.reason` names.
    pub fn from_reason(reason: &str) -> Option<ErrorKind> {
        ALL.into_iter().find(|k| k.reason() == reason)
    }

    /// The kind a standard JSON-RPC code names (-32603 is INTERNAL; the reason tells UNAVAILABLE
    /// apart).
    pub fn from_code(code: i64) -> Option<ErrorKind> {
        ALL.into_iter()
            .find(|k| *k != Self::Unavailable && k.code(false) == code)
    }

    /// The HTTP status the error travels with: 401, 429 and 503 where HTTP has a word for it,
    /// else 200 (JSON-RPC carries the error in the body).
    pub fn http_status(self) -> u16 {
        match self {
            Self::Unauthorized => 401,
            Self::RateLimited => 429,
            Self::Unavailable => 503,
            _ => 200,
        }
    }
}

/// Every kind, in the order of the table.
const ALL: [ErrorKind; 17] = [
    ErrorKind::ParseError,
    ErrorKind::InvalidRequest,
    ErrorKind::MethodNotFound,
    ErrorKind::InvalidParams,
    ErrorKind::Internal,
    ErrorKind::TaskNotFound,
    ErrorKind::TaskNotCancelable,
    ErrorKind::PushNotificationNotSupported,
    ErrorKind::UnsupportedOperation,
    ErrorKind::ContentTypeNotSupported,
    ErrorKind::InvalidAgentResponse,
    ErrorKind::ExtendedAgentCardNotConfigured,
    ErrorKind::ExtensionSupportRequired,
    ErrorKind::VersionNotSupported,
    ErrorKind::Unauthorized,
    ErrorKind::RateLimited,
    ErrorKind::Unavailable,
];

/// An error answer: a kind and a message that says what to fix.
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// Human text.
    pub message: String,
    /// When the caller may try again, ms (sent as `Retry-After`, rounded up to seconds).
    pub retry_after_ms: Option<u64>,
}

impl RpcError {
    /// An error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        RpcError {
            kind,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    /// A spent rate limit: retry in `ms`.
    pub fn rate_limited(ms: u64) -> Self {
        RpcError {
            retry_after_ms: Some(ms),
            ..RpcError::new(
                ErrorKind::RateLimited,
                format!("rate limit exceeded: retry in {:.1} s", ms as f64 / 1000.0),
            )
        }
    }

    /// The task store does not answer now: retry in a moment. The cause stays in the server's
    /// log; a remote caller learns only that it may retry.
    pub fn unavailable() -> Self {
        RpcError {
            retry_after_ms: Some(2000),
            ..RpcError::new(
                ErrorKind::Unavailable,
                "the agent cannot keep tasks right now: retry in a few seconds",
            )
        }
    }

    /// The `Retry-After` header value (whole seconds, at least 1), when there is one.
    pub fn retry_after(&self) -> Option<String> {
        self.retry_after_ms
            .map(|ms| ms.div_ceil(1000).max(1).to_string())
    }

    /// The `google.rpc.ErrorInfo` that names the error (JSON-RPC `data`, REST `details`).
    pub fn error_info(&self) -> Value {
        json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.kind.reason(),
            "domain": "a2a-protocol.org",
        })
    }

    /// The JSON-RPC `error` member.
    pub fn to_json(&self, legacy: bool) -> Value {
        json!({
            "code": self.kind.code(legacy),
            "message": self.message,
            "data": [self.error_info()],
        })
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.kind.reason(),
            self.kind.code(false),
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_codes_match_spec_table() {
        let codes: Vec<i64> = ALL.iter().map(|k| k.code(false)).collect();
        assert_eq!(
            codes,
            [
                -32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005,
                -32006, -32007, -32008, -32009, -32040, -32000, -32603
            ]
        );
    }

    #[test]
    fn standard_codes_are_distinct() {
        // Unavailable shares JSON-RPC's internal error code; its reason tells it apart.
        let mut codes: Vec<i64> = ALL.iter().map(|k| k.code(false)).collect();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), ALL.len() - 1);
        let mut reasons: Vec<&str> = ALL.iter().map(|k| k.reason()).collect();
        reasons.sort();
        reasons.dedup();
        assert_eq!(reasons.len(), ALL.len());
    }

    #[test]
    fn an_unavailable_store_travels_as_503_with_retry_after_and_no_cause() {
        let e = RpcError::unavailable();
        assert_eq!(
            (e.kind.code(false), e.kind.reason(), e.kind.http_status()),
            (-32603, "UNAVAILABLE", 503)
        );
        assert_eq!(e.retry_after().as_deref(), Some("2"));
        assert!(!e.message.contains("database"), "{}", e.message);
    }

    #[test]
    fn legacy_switch_restores_seed_numbers_only_where_they_differ() {
        assert_eq!(ErrorKind::VersionNotSupported.code(true), -32007);
        assert_eq!(ErrorKind::InvalidAgentResponse.code(true), -32008);
        for k in ALL {
            if !matches!(
                k,
                ErrorKind::VersionNotSupported | ErrorKind::InvalidAgentResponse
            ) {
                assert_eq!(k.code(true), k.code(false), "{k:?}");
            }
        }
    }

    #[test]
    fn rate_limits_travel_as_429_with_retry_after() {
        let e = RpcError::rate_limited(1200);
        assert_eq!(
            (e.kind.code(false), e.kind.reason(), e.kind.http_status()),
            (-32000, "RATE_LIMITED", 429)
        );
        assert_eq!(e.retry_after().as_deref(), Some("2"));
        assert_eq!(
            RpcError::rate_limited(1).retry_after().as_deref(),
            Some("1")
        );
        assert_eq!(
            RpcError::new(ErrorKind::TaskNotFound, "x").retry_after(),
            None
        );
        assert_eq!(ErrorKind::Unauthorized.http_status(), 401);
        assert_eq!(ErrorKind::InvalidParams.http_status(), 200);
    }

    #[test]
    fn error_json_carries_error_info() {
        let v = RpcError::new(ErrorKind::TaskNotFound, "task t1 not found").to_json(false);
        assert_eq!(v["code"], -32001);
        assert_eq!(v["message"], "task t1 not found");
        assert_eq!(
            v["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(v["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(v["data"][0]["domain"], "a2a-protocol.org");
    }
}
