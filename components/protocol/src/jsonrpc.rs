//! The JSON-RPC 2.0 envelope: request parsing and response building.

use serde_json::{Map, Value, json};

use crate::errors::{ErrorKind, RpcError};

/// A parsed request. `id` is the request id as sent (string, number or null).
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// The id to echo.
    pub id: Value,
    /// The method name.
    pub method: String,
    /// The params object (`{}` when absent).
    pub params: Value,
    /// A notification: the request has no `id` member, so JSON-RPC 2.0 forbids a reply.
    pub notification: bool,
}

/// Parses a request body. On failure, returns the id to answer with (null when unknown) and the
/// error: PARSE_ERROR for bad JSON, INVALID_REQUEST for a non-request.
pub fn parse_request(body: &[u8]) -> Result<Request, (Value, RpcError)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Value::Null,
            RpcError::new(
                ErrorKind::ParseError,
                format!("request body is not valid JSON: {e}"),
            ),
        )
    })?;
    let Value::Object(mut obj) = value else {
        return Err((
            Value::Null,
            RpcError::new(
                ErrorKind::InvalidRequest,
                "a JSON-RPC request must be a JSON object",
            ),
        ));
    };
    let notification = !obj.contains_key("id");
    let id = match obj.remove("id") {
        None => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => id,
        Some(_) => {
            return Err((
                Value::Null,
                RpcError::new(
                    ErrorKind::InvalidRequest,
                    "\"id\" must be a string, a number or null",
                ),
            ));
        }
    };
    let invalid = |msg: &str| Err((id.clone(), RpcError::new(ErrorKind::InvalidRequest, msg)));
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    let method = match obj.remove("method") {
        Some(Value::String(m)) => m,
        _ => return invalid("\"method\" must be a string"),
    };
    let params = match obj.remove("params") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return Err((
                id,
                RpcError::new(ErrorKind::InvalidParams, "\"params\" must be an object"),
            ));
        }
    };
    Ok(Request {
        id,
        method,
        params,
        notification,
    })
}

/// Decodes `params` into a method's request type; errors are INVALID_PARAMS naming the problem.
pub fn params<T: serde::de::DeserializeOwned>(params: &Value) -> Result<T, RpcError> {
    T::deserialize(params)
        .map_err(|e| RpcError::new(ErrorKind::InvalidParams, format!("invalid params: {e}")))
}

/// A success envelope.
pub fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The text of a success envelope around `result`, a result already serialised: the bytes
/// `success(id, result).to_string()` writes, without building either as a value.
pub fn success_text(id: &Value, result: &str) -> String {
    let id = id.to_string();
    let mut text = String::with_capacity(result.len() + id.len() + 32);
    text.push_str(r#"{"jsonrpc":"2.0","id":"#);
    text.push_str(&id);
    text.push_str(r#","result":"#);
    text.push_str(result);
    text.push('}');
    text
}

/// An error envelope.
pub fn failure(id: &Value, error: &RpcError, legacy: bool) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_json(legacy)})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_text_is_the_envelope_a_value_would_write() {
        let result =
            json!({"id": "t-1", "status": {"state": "TASK_STATE_COMPLETED"}, "n": [1, 2.5, null]});
        for id in [json!(1), json!("a\"b"), Value::Null, json!(-7)] {
            assert_eq!(
                success_text(&id, &result.to_string()),
                success(&id, result.clone()).to_string()
            );
        }
    }

    fn err(body: &str) -> (Value, ErrorKind) {
        let (id, e) = parse_request(body.as_bytes()).unwrap_err();
        (id, e.kind)
    }

    #[test]
    fn parses_a_request_with_missing_params_as_empty_object() {
        let r =
            parse_request(br#"{"jsonrpc":"2.0","id":7,"method":"GetExtendedAgentCard"}"#).unwrap();
        assert_eq!(r.id, json!(7));
        assert_eq!(r.method, "GetExtendedAgentCard");
        assert_eq!(r.params, json!({}));
    }

    #[test]
    fn string_and_null_ids_are_kept() {
        assert_eq!(
            parse_request(br#"{"jsonrpc":"2.0","id":"a","method":"m"}"#)
                .unwrap()
                .id,
            json!("a")
        );
        assert_eq!(
            parse_request(br#"{"jsonrpc":"2.0","method":"m"}"#)
                .unwrap()
                .id,
            Value::Null
        );
    }

    #[test]
    fn malformed_json_is_parse_error() {
        assert_eq!(err("{nope"), (Value::Null, ErrorKind::ParseError));
    }

    #[test]
    fn non_objects_and_bad_envelopes_are_invalid_request() {
        assert_eq!(err("[1]").1, ErrorKind::InvalidRequest);
        assert_eq!(
            err(r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#),
            (json!(1), ErrorKind::InvalidRequest)
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1}"#).1,
            ErrorKind::InvalidRequest
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":{},"method":"m"}"#).1,
            ErrorKind::InvalidRequest
        );
    }

    #[test]
    fn non_object_params_are_invalid_params() {
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1]}"#),
            (json!(1), ErrorKind::InvalidParams)
        );
    }

    #[test]
    fn envelopes() {
        assert_eq!(
            success(&json!(1), json!({"a":1})),
            json!({"jsonrpc":"2.0","id":1,"result":{"a":1}})
        );
        let f = failure(
            &json!("x"),
            &RpcError::new(ErrorKind::MethodNotFound, "no"),
            false,
        );
        assert_eq!(f["error"]["code"], -32601);
        assert_eq!(f["id"], "x");
    }

    #[test]
    fn typed_params_errors_are_invalid_params() {
        let e = params::<crate::types::GetTaskRequest>(&json!({"idd": 1})).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidParams);
        assert!(e.message.contains("id"), "{}", e.message);
    }
}
