//! What a `SendMessage` must carry before anything runs: the message and the configuration
//! checked against what this agent takes.

use crate::{ErrorKind, Message, Role, RpcError, SendMessageConfiguration};

/// What the agent a send reaches takes.
#[derive(Clone, Copy, Debug)]
pub struct Takes {
    /// The most parts one message may have.
    pub max_parts: u32,
    /// Whether push notifications are enabled.
    pub push_notifications: bool,
}

/// Checks a send's message and configuration: the message id, the user role, the bounds, at
/// least one valid part, base64 that decodes, push only where enabled, output modes that admit
/// text. The error says what to change.
pub fn check(
    message: &Message,
    config: &SendMessageConfiguration,
    takes: Takes,
) -> Result<(), RpcError> {
    let invalid = |m: String| Err(RpcError::new(ErrorKind::InvalidParams, m));
    if message.message_id.is_empty() {
        return invalid("message.messageId is required".into());
    }
    if message.role != Role::User {
        return invalid("message.role must be ROLE_USER".into());
    }
    if let Err(e) = message.check_bounds(takes.max_parts) {
        return invalid(e);
    }
    if message.parts.is_empty() || !message.parts.iter().all(|p| p.is_valid()) {
        return invalid(
            "message.parts must hold at least one part, each with exactly one of text, raw, url or data".into(),
        );
    }
    if let Some((i, e)) = message
        .parts
        .iter()
        .enumerate()
        .find_map(|(i, p)| Some((i, crate::decode_base64(p.raw.as_deref()?).err()?)))
    {
        return invalid(format!("message.parts[{i}].raw is {e}"));
    }
    if config.task_push_notification_config.is_some() && !takes.push_notifications {
        return Err(RpcError::new(
            ErrorKind::PushNotificationNotSupported,
            "push notifications are not enabled on this agent: send without taskPushNotificationConfig",
        ));
    }
    let modes = &config.accepted_output_modes;
    if !modes.is_empty() && !modes.iter().any(|m| m == "*/*" || m.starts_with("text/")) {
        return Err(RpcError::new(
            ErrorKind::ContentTypeNotSupported,
            "acceptedOutputModes must admit text (text/plain, text/* or */*)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TAKES: Takes = Takes {
        max_parts: 4,
        push_notifications: false,
    };

    fn message(v: serde_json::Value) -> Message {
        let mut m = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        m.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        serde_json::from_value(m).unwrap()
    }

    fn config(v: serde_json::Value) -> SendMessageConfiguration {
        serde_json::from_value(v).unwrap()
    }

    /// The refusal of a send: its kind and message.
    fn refused(m: serde_json::Value, c: serde_json::Value) -> (ErrorKind, String) {
        let e = check(&message(m), &config(c), TAKES).unwrap_err();
        (e.kind, e.message)
    }

    #[test]
    fn a_plain_user_text_passes() {
        assert!(check(&message(json!({})), &config(json!({})), TAKES).is_ok());
        let modes = json!({"acceptedOutputModes": ["application/json", "text/markdown"]});
        assert!(check(&message(json!({})), &config(modes), TAKES).is_ok());
    }

    #[test]
    fn each_refusal_says_what_to_change() {
        let cases = [
            (
                json!({"messageId": ""}),
                json!({}),
                ErrorKind::InvalidParams,
                "messageId is required",
            ),
            (
                json!({"role": "ROLE_AGENT"}),
                json!({}),
                ErrorKind::InvalidParams,
                "must be ROLE_USER",
            ),
            (
                json!({"parts": []}),
                json!({}),
                ErrorKind::InvalidParams,
                "at least one part",
            ),
            (
                json!({"parts": [{}]}),
                json!({}),
                ErrorKind::InvalidParams,
                "exactly one of text",
            ),
            (
                json!({"parts": [{"text": "a"}, {"text": "b"}, {"text": "c"}, {"text": "d"}, {"text": "e"}]}),
                json!({}),
                ErrorKind::InvalidParams,
                "at most 4",
            ),
            (
                json!({"parts": [{"text": "a"}, {"raw": "%%%"}]}),
                json!({}),
                ErrorKind::InvalidParams,
                "message.parts[1].raw is",
            ),
            (
                json!({}),
                json!({"taskPushNotificationConfig": {"url": "https://h.example/hook"}}),
                ErrorKind::PushNotificationNotSupported,
                "send without taskPushNotificationConfig",
            ),
            (
                json!({}),
                json!({"acceptedOutputModes": ["image/png"]}),
                ErrorKind::ContentTypeNotSupported,
                "must admit text",
            ),
        ];
        for (m, c, kind, says) in cases {
            let (k, text) = refused(m.clone(), c);
            assert_eq!(k, kind, "{m}: {text}");
            assert!(text.contains(says), "{m}: {text:?} should say {says:?}");
        }
    }

    #[test]
    fn push_passes_where_enabled() {
        let c = config(json!({"taskPushNotificationConfig": {"url": "https://h.example/hook"}}));
        let takes = Takes {
            push_notifications: true,
            ..TAKES
        };
        assert!(check(&message(json!({})), &c, takes).is_ok());
    }
}
