//! Runtime-side edits of stored task bodies (settling a task the guest could not).

use a2a_protocol::{Message, Task, TaskState, TaskStatus, TaskStatusUpdateEvent, time::rfc3339_ms};

/// The body of a task settled FAILED with `text` as the agent's status message. A body that does
/// not parse is returned unchanged (its indexed state column still says FAILED).
pub fn fail_body(body: &str, now: u64, text: &str) -> String {
    failed(body, now, text).map_or_else(|| body.to_owned(), |(body, _)| body)
}

/// A task settled FAILED with `text`: its new body and the status-update frame (JSON) telling
/// subscribers; none when the body does not parse.
pub fn failed(body: &str, now: u64, text: &str) -> Option<(String, String)> {
    let mut task = serde_json::from_str::<Task>(body).ok()?;
    let message = Message::agent_text(uuid::Uuid::new_v4().to_string(), &task.context_id, &task.id, text);
    task.history.push(message.clone());
    task.status = TaskStatus { state: TaskState::Failed, message: Some(message), timestamp: Some(rfc3339_ms(now)) };
    let update = TaskStatusUpdateEvent { task_id: task.id.clone(), context_id: task.context_id.clone(), status: task.status.clone(), metadata: None };
    Some((serde_json::to_string(&task).ok()?, serde_json::to_string(&update).ok()?))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
