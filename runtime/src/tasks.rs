//! Runtime-side edits of stored task bodies (settling a task the guest could not).

use a2a_protocol::{Message, Task, TaskState, TaskStatus, time::rfc3339_ms};

/// The body of a task settled FAILED with `text` as the agent's status message. A body that does
/// not parse is returned unchanged (its indexed state column still says FAILED).
pub fn fail_body(body: &str, now: u64, text: &str) -> String {
    let Ok(mut task) = serde_json::from_str::<Task>(body) else { return body.to_owned() };
    let message = Message::agent_text(uuid::Uuid::new_v4().to_string(), &task.context_id, &task.id, text);
    task.history.push(message.clone());
    task.status = TaskStatus { state: TaskState::Failed, message: Some(message), timestamp: Some(rfc3339_ms(now)) };
    serde_json::to_string(&task).unwrap_or_else(|_| body.to_owned())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
