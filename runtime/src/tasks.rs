//! Runtime-side settlement of stored tasks the guest could not settle (a trap, a restart),
//! through the protocol crate's state machine like every other change of state.

use a2a_protocol::execution::Execution;
use a2a_protocol::{StreamResponse, Task, TaskState};

/// A task settled FAILED with `text` as the agent's status message: its new body and the
/// status-update frame (JSON) telling subscribers; none when the body does not parse or the
/// task may not become FAILED (it settled meanwhile).
pub fn failed(body: &str, now: u64, text: &str) -> Option<(String, String)> {
    let mut ex = Execution::new(serde_json::from_str::<Task>(body).ok()?);
    let frame = ex
        .set_status(TaskState::Failed, Some(text.to_owned()), now, || {
            uuid::Uuid::new_v4().to_string()
        })
        .ok()?;
    let StreamResponse::StatusUpdate(update) = frame else {
        return None;
    };
    Some((
        serde_json::to_string(ex.task()).ok()?,
        serde_json::to_string(&update).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settles_through_the_state_machine() {
        let working = r#"{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}"#;
        let (body, frame) = failed(working, 5, "the agent component failed").unwrap();
        let task: Task = serde_json::from_str(&body).unwrap();
        assert_eq!(task.status.state, TaskState::Failed);
        assert_eq!(
            task.history.len(),
            1,
            "the status message is in the history"
        );
        assert!(
            frame.contains("TASK_STATE_FAILED") && frame.contains("the agent component failed")
        );
        let completed = r#"{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}"#;
        assert_eq!(
            failed(completed, 5, "late"),
            None,
            "a settled task never becomes FAILED"
        );
    }
}
