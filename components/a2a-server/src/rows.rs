//! Between the protocol's Task and the host's task rows; ids and clocks.

use a2a_protocol::{ErrorKind, RpcError, Task, TaskState};

use crate::bindings::a2a::edge::types::{self as wit, TaskRow};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    let t = wasip2::clocks::wall_clock::now();
    t.seconds * 1000 + u64::from(t.nanoseconds / 1_000_000)
}

/// A random (v4) UUID.
pub fn uuid() -> String {
    a2a_protocol::ids::uuid_v4(&wasip2::random::random::get_random_bytes(16))
}

pub fn to_wit(s: TaskState) -> wit::TaskState {
    match s {
        TaskState::Submitted | TaskState::Unspecified => wit::TaskState::Submitted,
        TaskState::Working => wit::TaskState::Working,
        TaskState::InputRequired => wit::TaskState::InputRequired,
        TaskState::AuthRequired => wit::TaskState::AuthRequired,
        TaskState::Completed => wit::TaskState::Completed,
        TaskState::Failed => wit::TaskState::Failed,
        TaskState::Canceled => wit::TaskState::Canceled,
        TaskState::Rejected => wit::TaskState::Rejected,
    }
}

/// The row of a task at `version`.
pub fn row(task: &Task, skill: &str, created_at: u64, updated_at: u64, version: u64) -> TaskRow {
    TaskRow {
        id: task.id.clone(),
        context_id: task.context_id.clone(),
        state: to_wit(task.status.state),
        skill: skill.to_owned(),
        created_at,
        updated_at,
        version,
        body: serde_json::to_string(task).unwrap_or_default(),
    }
}

/// The task a row stores.
pub fn task(row: &TaskRow) -> Result<Task, RpcError> {
    serde_json::from_str(&row.body).map_err(|e| RpcError::new(ErrorKind::Internal, format!("stored task {} is unreadable: {e}", row.id)))
}
