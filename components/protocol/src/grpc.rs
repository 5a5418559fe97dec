//! The gRPC binding's decisions (A2A 1.0.1 §10, docs/protocol.md "gRPC"): which RPC a request path
//! names, the JSON-RPC method it runs as, the status each error travels as, `grpc-timeout`, and
//! the card's `host:port` address. The host transcodes protobuf to the ProtoJSON the other
//! bindings carry; everything it decides is here.

use serde_json::Value;

use crate::errors::{ErrorKind, RpcError};
use crate::methods::NAMES;

/// The service every RPC belongs to.
pub const SERVICE: &str = "lf.a2a.v1.A2AService";

/// The RPC a request path names (`/lf.a2a.v1.A2AService/<Method>`), if it is one of ours.
pub fn rpc(path: &str) -> Option<&'static str> {
    let name = path
        .strip_prefix('/')?
        .strip_prefix(SERVICE)?
        .strip_prefix('/')?;
    // The RPCs are the A2A methods, named alike.
    NAMES.into_iter().find(|r| *r == name)
}

/// Whether an RPC answers with a stream of `StreamResponse`s.
pub fn is_streaming(rpc: &str) -> bool {
    matches!(rpc, "SendStreamingMessage" | "SubscribeToTask")
}

/// Whether a `content-type` is gRPC's (`application/grpc`, with or without `+proto`).
pub fn is_grpc(content_type: &str) -> bool {
    let base = content_type.split(';').next().unwrap_or("").trim();
    base == "application/grpc" || base == "application/grpc+proto"
}

/// The gRPC status codes the binding answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Code {
    /// Success.
    Ok = 0,
    /// Bad request content.
    InvalidArgument = 3,
    /// `grpc-timeout` passed.
    DeadlineExceeded = 4,
    /// No such task (or tenant).
    NotFound = 5,
    /// The credentials do not grant this.
    PermissionDenied = 7,
    /// A rate limit, a slot or a size bound is spent.
    ResourceExhausted = 8,
    /// The request is valid but the task's state refuses it.
    FailedPrecondition = 9,
    /// No such RPC, or a compressed message.
    Unimplemented = 12,
    /// A server or agent failure.
    Internal = 13,
    /// Try again shortly.
    Unavailable = 14,
    /// Missing or invalid credentials.
    Unauthenticated = 16,
}

impl Code {
    /// The HTTP status a status of this code stands for: what the log reads of a gRPC answer,
    /// which travels in an HTTP 200.
    pub fn http_status(self) -> u16 {
        match self {
            Code::Ok => 200,
            Code::InvalidArgument | Code::FailedPrecondition => 400,
            Code::Unauthenticated => 401,
            Code::PermissionDenied => 403,
            Code::NotFound | Code::Unimplemented => 404,
            Code::DeadlineExceeded => 408,
            Code::ResourceExhausted => 429,
            Code::Internal => 500,
            Code::Unavailable => 503,
        }
    }
}

/// The status an error travels as: the A2A errors by the v1.0.1 table (TaskNotFound →
/// NOT_FOUND, ContentTypeNotSupported → INVALID_ARGUMENT, InvalidAgentResponse → INTERNAL, the
/// others FAILED_PRECONDITION), the JSON-RPC and transport ones by what they mean.
pub fn code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::TaskNotFound => Code::NotFound,
        ErrorKind::ContentTypeNotSupported
        | ErrorKind::ParseError
        | ErrorKind::InvalidRequest
        | ErrorKind::InvalidParams => Code::InvalidArgument,
        ErrorKind::InvalidAgentResponse | ErrorKind::Internal => Code::Internal,
        ErrorKind::TaskNotCancelable
        | ErrorKind::PushNotificationNotSupported
        | ErrorKind::UnsupportedOperation
        | ErrorKind::ExtendedAgentCardNotConfigured
        | ErrorKind::ExtensionSupportRequired
        | ErrorKind::VersionNotSupported => Code::FailedPrecondition,
        ErrorKind::MethodNotFound => Code::Unimplemented,
        ErrorKind::Unauthorized => Code::Unauthenticated,
        ErrorKind::RateLimited => Code::ResourceExhausted,
        ErrorKind::Unavailable => Code::Unavailable,
    }
}

/// The status of a refusal the host answered before any component ran, by its HTTP status,
/// where the body names no A2A error (a body too large or too slow, a missing route).
pub fn code_of_http(status: u16) -> Code {
    match status {
        400 | 405 | 415 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        408 => Code::DeadlineExceeded,
        413 | 429 => Code::ResourceExhausted,
        503 => Code::Unavailable,
        _ => Code::Internal,
    }
}

/// What a JSON-RPC response says: the result, or the error with its kind (by the reason in its
/// `ErrorInfo`, else by its code) and message. `None` when it is neither.
pub fn answer(response: &Value) -> Option<Result<&Value, RpcError>> {
    if let Some(result) = response.get("result") {
        return Some(Ok(result));
    }
    let error = response.get("error")?;
    let message = error.get("message").and_then(Value::as_str).unwrap_or("");
    let reason = error
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find_map(|d| d.get("reason").and_then(Value::as_str));
    let kind = reason
        .and_then(ErrorKind::from_reason)
        .or_else(|| error.get("code")?.as_i64().and_then(ErrorKind::from_code))
        .unwrap_or(ErrorKind::Internal);
    Some(Err(RpcError::new(kind, message)))
}

/// The longest deadline honoured: gRPC's own cap (eight digits of hours) is far beyond any
/// request this service runs.
const MAX_TIMEOUT_MS: u64 = 24 * 3_600_000;

/// A `grpc-timeout` value in milliseconds (at most a day; sub-millisecond ones round up to 1):
/// 1-8 digits and a unit of `H`, `M`, `S`, `m`, `u` or `n`. `None` when malformed.
pub fn timeout_ms(value: &str) -> Option<u64> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    let ms = match unit {
        "H" => n.saturating_mul(3_600_000),
        "M" => n.saturating_mul(60_000),
        "S" => n.saturating_mul(1000),
        "m" => n,
        "u" => n.div_ceil(1000),
        "n" => n.div_ceil(1_000_000),
        _ => return None,
    };
    Some(ms.clamp(1, MAX_TIMEOUT_MS))
}

/// The card's gRPC interface URL for an endpoint URL: its scheme and authority with the port
/// always named (`http://127.0.0.1:3080`, `https://agents.example.com:443`), as A2A 1.0.1's
/// `AgentInterface.url` is an absolute URL (and clients such as Google ADK check it is one); a
/// client that dials the authority alone (`urlsplit(url).netloc`) reaches the right port.
pub fn url(endpoint_url: &str) -> Option<String> {
    let scheme = endpoint_url.split_once("://")?.0;
    Some(format!("{scheme}://{}", address(endpoint_url)?))
}

/// An endpoint URL's `host:port`, with the scheme's default port when the URL names none.
fn address(endpoint_url: &str) -> Option<String> {
    let (scheme, rest) = endpoint_url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    if authority.is_empty() {
        return None;
    }
    let has_port = match authority.rsplit_once(':') {
        Some((host, port)) => {
            (!host.contains(':') || host.ends_with(']')) && port.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    };
    if has_port {
        return Some(authority.to_owned());
    }
    let port = match scheme {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    Some(format!("{authority}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_name_the_eleven_rpcs_of_the_service_only() {
        for r in NAMES {
            assert_eq!(rpc(&format!("/lf.a2a.v1.A2AService/{r}")), Some(r));
        }
        assert_eq!(rpc("/lf.a2a.v1.A2AService/Nope"), None);
        assert_eq!(rpc("/lf.a2a.v1.Other/SendMessage"), None);
        assert_eq!(rpc("/a2a.v1.A2AService/SendMessage"), None);
        assert_eq!(rpc("lf.a2a.v1.A2AService/SendMessage"), None);
        assert_eq!(rpc("/lf.a2a.v1.A2AService/SendMessage/x"), None);
        let streaming: Vec<_> = NAMES.into_iter().filter(|r| is_streaming(r)).collect();
        assert_eq!(streaming, ["SendStreamingMessage", "SubscribeToTask"]);
    }

    #[test]
    fn grpc_content_types() {
        assert!(is_grpc("application/grpc"));
        assert!(is_grpc("application/grpc+proto"));
        assert!(is_grpc("application/grpc; charset=x"));
        assert!(!is_grpc("application/grpc+json"));
        assert!(!is_grpc("application/grpc-web"));
        assert!(!is_grpc("application/json"));
    }

    #[test]
    fn the_v1_0_1_status_table() {
        use ErrorKind::*;
        let table = [
            (TaskNotFound, Code::NotFound),
            (ContentTypeNotSupported, Code::InvalidArgument),
            (InvalidAgentResponse, Code::Internal),
            (TaskNotCancelable, Code::FailedPrecondition),
            (PushNotificationNotSupported, Code::FailedPrecondition),
            (UnsupportedOperation, Code::FailedPrecondition),
            (ExtendedAgentCardNotConfigured, Code::FailedPrecondition),
            (ExtensionSupportRequired, Code::FailedPrecondition),
            (VersionNotSupported, Code::FailedPrecondition),
            (InvalidParams, Code::InvalidArgument),
            (MethodNotFound, Code::Unimplemented),
            (Unauthorized, Code::Unauthenticated),
            (RateLimited, Code::ResourceExhausted),
            (Unavailable, Code::Unavailable),
            (Internal, Code::Internal),
        ];
        for (kind, want) in table {
            assert_eq!(code(kind), want, "{kind:?}");
        }
        for status in [400, 401, 403, 404, 408, 429, 500, 503] {
            assert_eq!(
                code_of_http(status).http_status(),
                status,
                "a host refusal is logged with the status it had"
            );
        }
        assert_eq!(code_of_http(413), Code::ResourceExhausted);
        assert_eq!(code_of_http(401), Code::Unauthenticated);
        assert_eq!(code_of_http(404), Code::NotFound);
        assert_eq!(code_of_http(500), Code::Internal);
    }

    #[test]
    fn answers_read_results_and_errors_by_reason_then_code() {
        let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"id": "t"}});
        assert_eq!(answer(&ok), Some(Ok(&json!({"id": "t"}))));
        let by_reason = json!({"error": {"code": -32603, "message": "later", "data": [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "UNAVAILABLE", "domain": "a2a-protocol.org"}
        ]}});
        let e = answer(&by_reason).unwrap().unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::Unavailable, "later")
        );
        let by_code = json!({"error": {"code": -32001, "message": "no task"}});
        assert_eq!(
            answer(&by_code).unwrap().unwrap_err().kind,
            ErrorKind::TaskNotFound
        );
        let odd = json!({"error": {"code": 7, "message": "?"}});
        assert_eq!(answer(&odd).unwrap().unwrap_err().kind, ErrorKind::Internal);
        assert_eq!(answer(&json!({"jsonrpc": "2.0"})), None);
    }

    #[test]
    fn timeouts() {
        assert_eq!(timeout_ms("1S"), Some(1000));
        assert_eq!(timeout_ms("250m"), Some(250));
        assert_eq!(timeout_ms("2M"), Some(120_000));
        assert_eq!(timeout_ms("1H"), Some(3_600_000));
        assert_eq!(timeout_ms("1500u"), Some(2));
        assert_eq!(timeout_ms("1n"), Some(1));
        assert_eq!(timeout_ms("0m"), Some(1));
        assert_eq!(timeout_ms("99999999H"), Some(MAX_TIMEOUT_MS));
        for bad in ["", "S", "1", "123456789S", "1s", "-1S", "1.5S", "1 S"] {
            assert_eq!(timeout_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn addresses_are_host_and_port() {
        assert_eq!(
            address("http://127.0.0.1:3080/a2a/x").as_deref(),
            Some("127.0.0.1:3080")
        );
        assert_eq!(
            address("https://agents.example.com/a2a/x").as_deref(),
            Some("agents.example.com:443")
        );
        assert_eq!(
            address("http://agents.example.com").as_deref(),
            Some("agents.example.com:80")
        );
        assert_eq!(
            address("http://[::1]:8080/a").as_deref(),
            Some("[::1]:8080")
        );
        assert_eq!(address("http://[::1]/a").as_deref(), Some("[::1]:80"));
        assert_eq!(address("http://u:p@h:1/a").as_deref(), Some("h:1"));
        assert_eq!(address("ftp://h/a"), None);
        assert_eq!(address("not a url"), None);
    }

    #[test]
    fn urls_are_absolute_with_the_port_named() {
        for (endpoint, want) in [
            ("http://127.0.0.1:3080/a2a/x", Some("http://127.0.0.1:3080")),
            (
                "https://agents.example.com/a2a/x",
                Some("https://agents.example.com:443"),
            ),
            ("http://[::1]/a", Some("http://[::1]:80")),
            ("http://u:p@h:1/a", Some("http://h:1")),
            ("ftp://h/a", None),
            ("not a url", None),
        ] {
            assert_eq!(url(endpoint).as_deref(), want, "{endpoint}");
        }
    }
}
