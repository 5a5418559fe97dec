//! When a reused `messageId` is a retry (docs/protocol.md "A2A methods"): the resend must name the same task (or none),
//! not contradict its context, carry the same parts, and find the task unchanged since that
//! message's turn (no later message, no cancel; a turn still running counts as unchanged).
//! Anything else is a new message, so a message is never answered with a task it does not name.

use sha2::{Digest, Sha256};

use crate::{Message, Role, Task, TaskState};

/// What a retry must repeat exactly: the `taskId` it names (or none) and its parts, as a hex
/// sha256 digest (what the idempotency index keeps next to the message id).
pub fn fingerprint(message: &Message) -> String {
    let canonical = serde_json::json!({ "taskId": message.task_id, "parts": message.parts });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `message` (whose fingerprint is `fingerprint`) retries the earlier message with the
/// same id, recorded with `recorded` for `task`.
pub fn is_retry(message: &Message, fingerprint: &str, recorded: &str, task: &Task) -> bool {
    let same_context = message
        .context_id
        .as_deref()
        .is_none_or(|c| c == task.context_id);
    let last_user = task.history.iter().rev().find(|m| m.role == Role::User);
    let unchanged = task.status.state != TaskState::Canceled
        && last_user.is_some_and(|m| m.message_id == message.message_id);
    fingerprint == recorded && same_context && unchanged
}

/// What a send is answered with once its task stands as `task`: the agent's direct message
/// when the turn answered with one (its completed status carries it), else the task with at
/// most `history_length` messages. A resend gets the same answer as the first send.
pub fn answer(mut task: Task, history_length: Option<i64>) -> SendAnswer {
    if is_direct(&task)
        && let Some(m) = task.status.message.take()
    {
        return SendAnswer::Message(m);
    }
    SendAnswer::Task(task.with_history_length(history_length))
}

/// Whether a send on `task` is answered with the agent's direct message: its completed
/// status carries one.
fn is_direct(task: &Task) -> bool {
    task.status.message.is_some() && task.status.state == TaskState::Completed
}

/// [`answer`] as JSON text. `written` is the task's text as its last write stored it (the
/// bytes `task` writes), when there is one: an answer that is the whole task splices it in
/// instead of writing the task again.
pub fn answer_text(task: &Task, history_length: Option<i64>, written: Option<&str>) -> String {
    match written {
        Some(body) if history_length.is_none() && !is_direct(task) => {
            format!(r#"{{"task":{body}}}"#)
        }
        _ => serde_json::to_string(&answer(task.clone(), history_length)).unwrap_or_default(),
    }
}

/// A send's answer: `{"message": …}` or `{"task": …}`, serialised once where it goes out.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SendAnswer {
    /// The agent's direct message.
    Message(Message),
    /// The task as it stands.
    Task(Task),
}

impl SendAnswer {
    /// Its member's name (`message`, `task`), as a stream frame names it.
    pub fn kind(&self) -> &'static str {
        match self {
            SendAnswer::Message(_) => "message",
            SendAnswer::Task(_) => "task",
        }
    }

    /// Its member's JSON text.
    pub fn inner_text(&self) -> String {
        match self {
            SendAnswer::Message(m) => serde_json::to_string(m),
            SendAnswer::Task(t) => serde_json::to_string(t),
        }
        .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::{Execution, Progress};
    use crate::{Part, TaskStatus};

    #[test]
    fn a_written_task_is_spliced_into_the_answer_as_its_value_would_write_it() {
        let working = serde_json::json!({ "id": "t", "contextId": "c", "status": { "state": "TASK_STATE_WORKING" },
            "history": [{ "messageId": "m", "role": "ROLE_USER", "parts": [{ "text": "hi" }] }] });
        let mut ex = Execution::new(serde_json::from_value(working).unwrap());
        let text = |ex: &Execution, n| {
            let written = serde_json::to_string(ex.task()).unwrap();
            let slow = serde_json::to_string(&answer(ex.task().clone(), n)).unwrap();
            (answer_text(ex.task(), n, Some(&written)), slow)
        };
        let (spliced, slow) = text(&ex, None);
        assert_eq!(spliced, slow);
        assert!(spliced.starts_with(r#"{"task":{"id":"t""#), "{spliced}");
        let (cut, slow) = text(&ex, Some(0));
        assert_eq!(cut, slow, "a history cut is written, not spliced");
        assert!(!cut.contains("history"), "{cut}");
        let m = Message::agent_text("a".into(), "c", "t", "hello");
        ex.apply(Progress::Message(m), 1, || "x".into()).unwrap();
        let (direct, slow) = text(&ex, None);
        assert_eq!(direct, slow, "a direct message is the answer, not the task");
        assert!(direct.starts_with(r#"{"message":"#), "{direct}");
    }

    #[test]
    fn the_answer_is_the_direct_message_when_the_turn_gave_one_else_the_task() {
        let working = serde_json::json!({ "id": "t", "contextId": "c", "status": { "state": "TASK_STATE_WORKING" } });
        let mut ex = Execution::new(serde_json::from_value(working).unwrap());
        let m = Message::agent_text("a".into(), "c", "t", "hi");
        ex.apply(Progress::Message(m.clone()), 1, || "x".into())
            .unwrap();
        let direct = answer(ex.task().clone(), None);
        assert_eq!(
            serde_json::to_value(&direct).unwrap(),
            serde_json::json!({ "message": m })
        );
        assert_eq!(direct.kind(), "message");
        let mut failed = ex.task().clone();
        failed.status.state = TaskState::Failed;
        let task = serde_json::to_value(answer(failed, Some(0))).unwrap();
        assert!(
            task["task"]["history"]
                .as_array()
                .is_none_or(|h| h.is_empty())
        );
    }

    fn msg(id: &str, task: Option<&str>, context: Option<&str>, text: &str) -> Message {
        Message {
            message_id: id.into(),
            context_id: context.map(Into::into),
            task_id: task.map(Into::into),
            role: Role::User,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: vec![],
            reference_task_ids: vec![],
        }
    }

    fn task(state: TaskState, history: Vec<Message>) -> Task {
        Task {
            id: "A".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state,
                message: None,
                timestamp: None,
            },
            artifacts: vec![],
            history,
            metadata: None,
        }
    }

    #[test]
    fn an_identical_resend_is_a_retry_also_while_its_turn_runs() {
        let first = msg("m1", None, None, "hi");
        let fp = fingerprint(&first);
        for state in [
            TaskState::Working,
            TaskState::Completed,
            TaskState::InputRequired,
            TaskState::Failed,
        ] {
            assert!(
                is_retry(&first, &fp, &fp, &task(state, vec![first.clone()])),
                "{state:?}"
            );
        }
        assert!(
            is_retry(
                &msg("m1", None, Some("c1"), "hi"),
                &fp,
                &fp,
                &task(TaskState::Completed, vec![first.clone()])
            ),
            "the task's own context"
        );
    }

    #[test]
    fn anything_else_is_a_new_message() {
        let first = msg("m1", None, None, "hi");
        let fp = fingerprint(&first);
        let t = task(TaskState::InputRequired, vec![first.clone()]);
        let other_parts = msg("m1", None, None, "hello");
        assert!(
            !is_retry(&other_parts, &fingerprint(&other_parts), &fp, &t),
            "other parts"
        );
        let names_task = msg("m1", Some("A"), None, "hi");
        assert!(
            !is_retry(&names_task, &fingerprint(&names_task), &fp, &t),
            "a taskId the first message did not name"
        );
        let other_context = msg("m1", None, Some("c2"), "hi");
        assert!(
            !is_retry(&other_context, &fingerprint(&other_context), &fp, &t),
            "another context"
        );
        let later = task(
            TaskState::Completed,
            vec![first.clone(), msg("m2", Some("A"), None, "more")],
        );
        assert!(
            !is_retry(&first, &fp, &fp, &later),
            "the task took a later message"
        );
        assert!(
            !is_retry(
                &first,
                &fp,
                &fp,
                &task(TaskState::Canceled, vec![first.clone()])
            ),
            "the task was canceled"
        );
    }

    #[test]
    fn fingerprints_cover_task_id_and_parts_only() {
        let a = msg("m1", None, None, "hi");
        assert_eq!(
            fingerprint(&a),
            fingerprint(&msg("other-id", None, Some("c9"), "hi"))
        );
        assert_ne!(
            fingerprint(&a),
            fingerprint(&msg("m1", Some("A"), None, "hi"))
        );
        assert_eq!(fingerprint(&a).len(), 64);
    }
}
