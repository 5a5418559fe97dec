//! A2A 1.0.1 data model in ProtoJSON: camelCase out, snake_case accepted in, unknown fields
//! ignored, enums by name (or number), timestamps as RFC 3339 strings, bytes as base64 strings.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object (`google.protobuf.Struct`).
pub type Struct = Map<String, Value>;

crate::proto_enum! {
    /// Who wrote a message.
    Role {
        /// Invalid on the wire.
        Unspecified = 0 => "ROLE_UNSPECIFIED",
        /// The client.
        User = 1 => "ROLE_USER",
        /// The agent.
        Agent = 2 => "ROLE_AGENT",
    }
}

crate::proto_enum! {
    /// The state of a task (A2A 1.0.1 numbering).
    TaskState {
        /// Invalid on the wire.
        Unspecified = 0 => "TASK_STATE_UNSPECIFIED",
        /// Recorded, not started.
        Submitted = 1 => "TASK_STATE_SUBMITTED",
        /// The executor runs.
        Working = 2 => "TASK_STATE_WORKING",
        /// Done (terminal).
        Completed = 3 => "TASK_STATE_COMPLETED",
        /// Failed (terminal); the status message carries the error.
        Failed = 4 => "TASK_STATE_FAILED",
        /// Canceled by a caller (terminal).
        Canceled = 5 => "TASK_STATE_CANCELED",
        /// Waiting for more input (interrupted).
        InputRequired = 6 => "TASK_STATE_INPUT_REQUIRED",
        /// Rejected by the executor (terminal).
        Rejected = 7 => "TASK_STATE_REJECTED",
        /// Waiting for authentication (interrupted).
        AuthRequired = 8 => "TASK_STATE_AUTH_REQUIRED",
    }
}

/// One piece of content: exactly one of `text`, `raw`, `url`, `data`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    /// Plain text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// File bytes, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    /// A file by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Any JSON value; a `null` given is kept (a `google.protobuf.Value` null is set).
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    pub data: Option<Value>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    /// File name of a `raw` or `url` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// Media type of the content.
    #[serde(default, alias = "media_type", skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// A field's value as given, `null` too (absent is `None` by `default`).
fn given<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part {
            text: Some(text.into()),
            ..Default::default()
        }
    }

    /// A data part.
    pub fn data(data: Value) -> Self {
        Part {
            data: Some(data),
            ..Default::default()
        }
    }

    /// Why this part cannot be kept, if it cannot: not exactly one of `text`, `raw`, `url` and
    /// `data` (a 0.3 `kind`/`file` part has none of them), `raw` that is not base64, or a `url`
    /// without a scheme.
    pub fn check(&self) -> Result<(), String> {
        if !self.is_valid() {
            return Err("must have exactly one of text, raw, url or data (A2A 1.0 parts)".into());
        }
        if let Some(raw) = &self.raw {
            decode_base64(raw).map_err(|e| format!("raw is {e}"))?;
        }
        if let Some(url) = &self.url {
            let scheme = url.split_once(':').map_or("", |(s, _)| s);
            let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if !valid {
                return Err(format!("url {url:?} is not an absolute URL"));
            }
        }
        Ok(())
    }

    /// True when exactly one content member is set (ProtoJSON oneof).
    pub fn is_valid(&self) -> bool {
        [
            self.text.is_some(),
            self.raw.is_some(),
            self.url.is_some(),
            self.data.is_some(),
        ]
        .iter()
        .filter(|set| **set)
        .count()
            == 1
    }
}

/// Decodes the base64 of a `raw` part: standard or URL-safe alphabet, padded or not.
pub fn decode_base64(b64: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let trimmed = b64.trim_end_matches('=');
    STANDARD_NO_PAD
        .decode(trimmed)
        .or_else(|_| URL_SAFE_NO_PAD.decode(trimmed))
        .map_err(|e| format!("not valid base64: {e}"))
}

/// A message between client and agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    /// Client-chosen id; the idempotency key on SendMessage.
    #[serde(alias = "message_id")]
    pub message_id: String,
    /// Conversation key.
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    /// The task this message belongs to or continues.
    #[serde(default, alias = "task_id", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Author.
    pub role: Role,
    /// Content (at least one).
    pub parts: Vec<Part>,
    /// Free-form metadata (`skill` selects a skill).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    /// Extension URIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// Tasks this message refers to.
    #[serde(
        default,
        alias = "reference_task_ids",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// An agent message with one text part.
    pub fn agent_text(
        message_id: String,
        context_id: &str,
        task_id: &str,
        text: impl Into<String>,
    ) -> Self {
        Message {
            message_id,
            context_id: Some(context_id.to_owned()),
            task_id: Some(task_id.to_owned()),
            role: Role::Agent,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    /// `metadata.skill` when it is a string.
    pub fn skill(&self) -> Option<&str> {
        self.metadata.as_ref()?.get("skill")?.as_str()
    }
}

/// A task's current status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    /// The state.
    pub state: TaskState,
    /// What the agent says about it (the error of a FAILED task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// RFC 3339 UTC time of the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// An output of a task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// Unique within the task.
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    /// Human name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Human description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Content.
    pub parts: Vec<Part>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
    /// Extension URIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// A unit of work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Server-generated id.
    pub id: String,
    /// Conversation key.
    #[serde(default, alias = "context_id")]
    pub context_id: String,
    /// Current status.
    pub status: TaskStatus,
    /// Outputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    /// Messages of the task, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// A status change, streamed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// Its context.
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// The new status.
    pub status: TaskStatus,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// An artifact (or a chunk of one), streamed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    /// The task.
    #[serde(alias = "task_id")]
    pub task_id: String,
    /// Its context.
    #[serde(alias = "context_id")]
    pub context_id: String,
    /// The artifact or chunk.
    pub artifact: Artifact,
    /// Append these parts to the artifact of the same id.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    /// This is the artifact's last chunk.
    #[serde(
        default,
        alias = "last_chunk",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub last_chunk: bool,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// One streamed result (and the shape of `SendMessageResponse` for `task`/`message`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    /// A task snapshot.
    Task(Task),
    /// A direct message answer.
    Message(Message),
    /// A status change.
    #[serde(alias = "status_update")]
    StatusUpdate(TaskStatusUpdateEvent),
    /// An artifact update.
    #[serde(alias = "artifact_update")]
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// `SendMessage` / `SendStreamingMessage` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    /// The message to send.
    pub message: Message,
    /// Options.
    #[serde(default)]
    pub configuration: Option<SendMessageConfiguration>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Struct>,
}

/// Options of a send.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    /// Output media types the client accepts.
    #[serde(default, alias = "accepted_output_modes")]
    pub accepted_output_modes: Vec<String>,
    /// Cap on returned history (0 = none).
    #[serde(default, alias = "history_length")]
    pub history_length: Option<i64>,
    /// Answer as soon as the task started.
    #[serde(default, alias = "return_immediately")]
    pub return_immediately: bool,
    /// A push-notification config registered for the new task before it runs.
    #[serde(
        default,
        alias = "task_push_notification_config",
        skip_serializing_if = "Option::is_none"
    )]
    pub task_push_notification_config: Option<crate::push::TaskPushNotificationConfig>,
}

/// `GetTask` params.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    /// Task id.
    pub id: String,
    /// Cap on returned history.
    #[serde(default, alias = "history_length")]
    pub history_length: Option<i64>,
}

/// Params of the methods that only name a task (`CancelTask`, `SubscribeToTask`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskIdRequest {
    /// Task id.
    pub id: String,
}

impl Task {
    /// A copy with history capped to the latest `n` messages (`None` keeps all, `0` drops it).
    pub fn with_history_length(mut self, n: Option<i64>) -> Self {
        if let Some(n) = n {
            let keep = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
            let drop = self.history.len().saturating_sub(keep);
            self.history.drain(..drop);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn message_accepts_snake_case_integer_enums_and_unknown_fields() {
        let m: Message = serde_json::from_value(json!({
            "message_id": "m1", "context_id": "c1", "role": 1, "tckUnknownField": true,
            "parts": [{"text": "hi", "media_type": "text/plain", "extra": 1}]
        }))
        .unwrap();
        assert_eq!(m.message_id, "m1");
        assert_eq!(m.context_id.as_deref(), Some("c1"));
        assert_eq!(m.role, Role::User);
        assert_eq!(m.parts[0].media_type.as_deref(), Some("text/plain"));
    }

    #[test]
    fn message_serialises_camel_case_with_enum_names() {
        let m = Message::agent_text("m".into(), "c", "t", "x");
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            json!({"messageId":"m","contextId":"c","taskId":"t","role":"ROLE_AGENT","parts":[{"text":"x"}]})
        );
    }

    #[test]
    fn unknown_enum_name_and_number_are_errors() {
        assert!(serde_json::from_value::<Role>(json!("ROLE_BOT")).is_err());
        assert!(serde_json::from_value::<TaskState>(json!(99)).is_err());
        assert!(serde_json::from_value::<TaskState>(json!(true)).is_err());
        assert_eq!(
            serde_json::from_value::<TaskState>(json!(8)).unwrap(),
            TaskState::AuthRequired
        );
    }

    #[test]
    fn every_task_state_round_trips_by_name_and_number() {
        for n in 0..=8 {
            let s = TaskState::from_number(n).unwrap();
            assert_eq!(s.number(), n);
            let v = serde_json::to_value(s).unwrap();
            assert_eq!(serde_json::from_value::<TaskState>(v).unwrap(), s);
        }
    }

    #[test]
    fn stream_response_is_a_one_member_object() {
        let t = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Working,
                message: None,
                timestamp: None,
            },
            artifacts: vec![],
            history: vec![],
            metadata: None,
        };
        let v = serde_json::to_value(StreamResponse::Task(t.clone())).unwrap();
        assert_eq!(
            v,
            json!({"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}})
        );
        let back: StreamResponse = serde_json::from_value(v).unwrap();
        assert_eq!(back, StreamResponse::Task(t));
    }

    #[test]
    fn part_oneof_is_checked() {
        assert!(Part::text("a").is_valid());
        assert!(!Part::default().is_valid());
        assert!(
            !Part {
                text: Some("a".into()),
                url: Some("u".into()),
                ..Default::default()
            }
            .is_valid()
        );
    }

    #[test]
    fn history_length_caps_to_latest() {
        let msg = |id: &str| Message::agent_text(id.into(), "c", "t", "x");
        let t = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Completed,
                message: None,
                timestamp: None,
            },
            artifacts: vec![],
            history: vec![msg("1"), msg("2"), msg("3")],
            metadata: None,
        };
        assert_eq!(t.clone().with_history_length(None).history.len(), 3);
        assert!(t.clone().with_history_length(Some(0)).history.is_empty());
        let two = t.with_history_length(Some(2));
        assert_eq!(
            two.history
                .iter()
                .map(|m| m.message_id.as_str())
                .collect::<Vec<_>>(),
            ["2", "3"]
        );
    }

    #[test]
    fn raw_parts_decode_in_either_alphabet() {
        assert_eq!(decode_base64("aGk=").unwrap(), b"hi");
        let part = |v: Value| serde_json::from_value::<Part>(v).unwrap().check();
        part(json!({"text": "hi"})).unwrap();
        part(json!({"raw": "aGk="})).unwrap();
        part(json!({"url": "https://example.com/a.pdf"})).unwrap();
        part(json!({"data": {"a": 1}})).unwrap();
        assert!(
            part(json!({"raw": "not base64!"}))
                .unwrap_err()
                .contains("raw is not valid base64")
        );
        assert!(
            part(json!({"kind": "file", "file": {"uri": "https://x"}}))
                .unwrap_err()
                .contains("exactly one of")
        );
        assert!(
            part(json!({"text": "a", "data": 1}))
                .unwrap_err()
                .contains("exactly one of")
        );
        assert!(
            part(json!({"url": "a.pdf"}))
                .unwrap_err()
                .contains("not an absolute URL")
        );
        assert_eq!(decode_base64("aGk").unwrap(), b"hi");
        assert_eq!(decode_base64("-_8").unwrap(), [0xfb, 0xff]);
        assert!(decode_base64("not base64!").is_err());
        assert!(decode_base64("a").is_err());
    }
}
