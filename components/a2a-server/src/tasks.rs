//! The task methods that answer at once: GetTask, ListTasks, CancelTask.

use a2a_protocol::execution::Execution;
use a2a_protocol::list::{ListTasksRequest, response};
use a2a_protocol::{ErrorKind, GetTaskRequest, RpcError, TaskIdRequest, TaskState, jsonrpc};
use serde_json::Value;

use a2a_guest::server::a2a::edge::types::{StoreError, TaskQuery};
use a2a_guest::server::a2a::edge::{events, sessions, storage};
use a2a_guest::{now_ms, uuid_at};

use crate::frames;
use crate::stored::{load, read};

/// `GetTask`: the task's JSON text. A body this build wrote goes out as it is stored (it is
/// the text the task writes: `a_stored_body_parsed_writes_itself_again`); any other, or one
/// cut to a `historyLength`, is parsed and written once.
pub fn get(params: &Value) -> Result<String, RpcError> {
    let p: GetTaskRequest = jsonrpc::params(params)?;
    if p.history_length.is_some_and(|n| n < 0) {
        return Err(RpcError::new(
            ErrorKind::InvalidParams,
            "historyLength must not be negative",
        ));
    }
    let stored = read(&p.id)?;
    if stored.verbatim && p.history_length.is_none() {
        return Ok(stored.row.body);
    }
    let task = a2a_guest::server::task(&stored.row)?;
    serde_json::to_string(&task.with_history_length(p.history_length))
        .map_err(|e| RpcError::new(ErrorKind::Internal, format!("task {}: {e}", p.id)))
}

/// `ListTasks`: newest status first, cursor paging.
pub fn list(params: &Value) -> Result<Value, RpcError> {
    let q = jsonrpc::params::<ListTasksRequest>(params)?.validate()?;
    let page = storage::list_tasks(&TaskQuery {
        context_id: q.context_id.clone(),
        state: q.state.map(TryInto::try_into).transpose()?,
        updated_after: q.updated_after,
        page_size: q.page_size,
        page_token: q.page_token.clone(),
        include_artifacts: q.include_artifacts,
        history_length: q
            .history_length
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
    })?;
    let tasks = page
        .tasks
        .iter()
        .map(|r| a2a_guest::server::task(r).map(|t| q.shape(t)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(response(
        tasks,
        page.next_page_token,
        q.page_size,
        page.total_size,
    ))
}

/// `CancelTask`: stops the running turn, stores CANCELED (which no late completion can
/// overwrite), tells subscribers, and answers the task.
pub fn cancel(params: &Value) -> Result<Value, RpcError> {
    let p: TaskIdRequest = jsonrpc::params(params)?;
    loop {
        let (row, task) = load(&p.id)?;
        if task.status.state.is_terminal() {
            return Err(RpcError::new(
                ErrorKind::TaskNotCancelable,
                format!(
                    "task {} is already {} and cannot be canceled",
                    p.id,
                    task.status.state.as_str()
                ),
            ));
        }
        sessions::cancel_task(&p.id);
        let mut ex = Execution::new(task);
        let now = now_ms();
        let Ok(frame) = ex.set_status(TaskState::Canceled, None, now, || uuid_at(now)) else {
            continue;
        };
        match storage::update_task(
            &a2a_guest::server::row(ex.task(), &row.skill, row.created_at, now, row.version + 1)?,
            row.version,
            None,
            &frames::encode(&[frame]),
        ) {
            Ok(_) => {
                events::close(&p.id);
                return Ok(serde_json::to_value(ex.task()).unwrap_or_default());
            }
            // Changed meanwhile (settled or moved on): decide again on the new state.
            Err(StoreError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
