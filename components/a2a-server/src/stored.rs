//! This instance's stored tasks, as protocol tasks.

use a2a_guest::server::a2a::edge::storage;
use a2a_protocol::{ErrorKind, RpcError, Task};

/// The task of this instance with `id`, or TASK_NOT_FOUND.
pub fn load(id: &str) -> Result<(storage::TaskRow, Task), RpcError> {
    let row = found(id, storage::get_task(checked(id)?)?)?;
    let task = a2a_guest::server::task(&row)?;
    Ok((row, task))
}

/// The stored row of this instance's task `id`, saying whether its body is this build's own
/// writing (then it is the text the task writes), or TASK_NOT_FOUND.
pub fn read(id: &str) -> Result<storage::StoredTask, RpcError> {
    found(id, storage::read_task(checked(id)?)?)
}

fn checked(id: &str) -> Result<&str, RpcError> {
    a2a_protocol::bounds::check_id("id", id)
        .map_err(|e| RpcError::new(ErrorKind::InvalidParams, e))?;
    Ok(id)
}

fn found<T>(id: &str, row: Option<T>) -> Result<T, RpcError> {
    row.ok_or_else(|| RpcError::new(ErrorKind::TaskNotFound, format!("task {id} not found")))
}
