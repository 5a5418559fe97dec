//! The `scripted` backend: deterministic behaviours for conformance suites (the A2A TCK keys them
//! on the messageId prefix, ITK/ACTS on the first text part's prefix; the longest matching
//! prefix of either wins). Anything else is echoed.

use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use a2a_protocol::execution::Progress;

use super::{Backend, BoxFuture, EventSink, TurnInput, echo};

/// Deterministic conformance behaviours.
pub struct Scripted;

/// Every behaviour, by prefix.
pub const BEHAVIOURS: &[&str] = &[
    "tck-complete-task",
    "tck-delayed-complete",
    "tck-artifact-text",
    "tck-artifact-file-url",
    "tck-artifact-file",
    "tck-artifact-data",
    "tck-message-response",
    "tck-input-required",
    "tck-reject-task",
    "tck-task-failure",
    "tck-stream-artifact-chunked",
    "tck-stream-",
    "tck-long-running",
    "test-resubscribe-message-id",
    "tck-auth-required",
    "tck-multi-turn",
];

/// The behaviour a turn asks for: the longest prefix of its message id or first text.
pub fn behaviour(message_id: &str, first_text: &str) -> Option<&'static str> {
    BEHAVIOURS
        .iter()
        .copied()
        .filter(|b| message_id.starts_with(b) || first_text.starts_with(b))
        .max_by_key(|b| b.len())
}

fn artifact(id: &str, part: serde_json::Value) -> Progress {
    let parts = vec![serde_json::from_value(part).expect("the scripted parts are valid")];
    Progress::Artifact(a2a_protocol::Artifact {
        artifact_id: id.into(),
        name: None,
        description: None,
        parts,
        metadata: None,
        extensions: Vec::new(),
    })
}

/// Sleeps unless canceled first; false when canceled.
async fn wait(cancel: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = tokio::time::sleep(d) => true,
    }
}

impl Backend for Scripted {
    // One arm per TCK behaviour: the table reads better whole than split across functions.
    fn run(&self, input: TurnInput, events: EventSink, cancel: CancellationToken) -> BoxFuture {
        Box::pin(async move {
            let message: serde_json::Value =
                serde_json::from_str(&input.message).unwrap_or_default();
            let first_text = message["parts"]
                .as_array()
                .and_then(|p| p.iter().find_map(|p| p["text"].as_str()))
                .unwrap_or("")
                .to_owned();
            let send = |e: Progress| {
                let _ = events.send(e);
            };
            let canceled = || Progress::Failed("canceled".into());
            match behaviour(&input.message_id, &first_text) {
                Some("tck-complete-task") => {
                    send(Progress::TextDelta("Hello from TCK".into()));
                    send(Progress::Completed);
                }
                Some("tck-delayed-complete") => {
                    if !wait(&cancel, Duration::from_millis(1500)).await {
                        return send(canceled());
                    }
                    send(Progress::TextDelta("Hello from TCK".into()));
                    send(Progress::Completed);
                }
                Some("tck-artifact-text") => {
                    send(artifact(
                        "text-artifact",
                        json!({ "text": "Generated text content" }),
                    ));
                    send(Progress::Completed);
                }
                Some("tck-artifact-file") => {
                    send(artifact(
                        "file-artifact",
                        json!({ "raw": "SGVsbG8gZnJvbSBUQ0s=", "filename": "output.txt", "mediaType": "text/plain" }),
                    ));
                    send(Progress::Completed);
                }
                Some("tck-artifact-file-url") => {
                    send(artifact(
                        "file-url-artifact",
                        json!({ "url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain" }),
                    ));
                    send(Progress::Completed);
                }
                Some("tck-artifact-data") => {
                    send(artifact(
                        "data-artifact",
                        json!({ "data": { "key": "value", "count": 42 }, "mediaType": "application/json" }),
                    ));
                    send(Progress::Completed);
                }
                Some("tck-message-response") => {
                    let m = a2a_protocol::Message::agent_text(
                        uuid::Uuid::new_v4().to_string(),
                        &input.context_id,
                        "",
                        "Direct message response",
                    );
                    send(Progress::Message(a2a_protocol::Message {
                        task_id: None,
                        ..m
                    }));
                }
                Some("tck-input-required") => {
                    send(Progress::InputRequired("Please provide more input".into()))
                }
                Some("tck-auth-required") => send(Progress::AuthRequired(
                    "Please authenticate to continue".into(),
                )),
                Some("tck-multi-turn") if first_text.trim_start().starts_with("done") => {
                    send(Progress::TextDelta("Conversation complete".into()));
                    send(Progress::Completed);
                }
                Some("tck-multi-turn") => send(Progress::InputRequired(
                    "Tell me more, or say \"done\"".into(),
                )),
                Some("tck-reject-task") => {
                    send(Progress::Rejected("Task rejected by the agent".into()))
                }
                Some("tck-task-failure") => {
                    send(Progress::Failed("Task failed as requested".into()))
                }
                Some("tck-stream-artifact-chunked") | Some("tck-stream-") => {
                    for chunk in ["Streaming ", "chunk ", "one, ", "chunk ", "two, ", "done."] {
                        if !wait(&cancel, Duration::from_millis(50)).await {
                            return send(canceled());
                        }
                        send(Progress::TextDelta(chunk.into()));
                    }
                    send(Progress::Completed);
                }
                Some("tck-long-running") | Some("test-resubscribe-message-id") => {
                    for step in 1..=4 {
                        if !wait(&cancel, Duration::from_secs(1)).await {
                            return send(canceled());
                        }
                        send(Progress::TextDelta(format!("step {step} ")));
                    }
                    send(Progress::Completed);
                }
                _ => return echo::Echo.run(input, events, cancel).await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_of_message_id_or_first_text_wins() {
        assert_eq!(
            behaviour("tck-artifact-file-url-1", ""),
            Some("tck-artifact-file-url")
        );
        assert_eq!(
            behaviour("tck-artifact-file-1", ""),
            Some("tck-artifact-file")
        );
        assert_eq!(
            behaviour("m1", "tck-stream-artifact-chunked please"),
            Some("tck-stream-artifact-chunked")
        );
        assert_eq!(behaviour("tck-stream-001", ""), Some("tck-stream-"));
        assert_eq!(
            behaviour("tck-complete-task", "tck-delayed-complete"),
            Some("tck-delayed-complete")
        );
        assert_eq!(behaviour("hello", "world"), None);
    }
}
