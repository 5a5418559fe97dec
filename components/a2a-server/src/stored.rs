//! This instance's stored tasks, as protocol tasks.

use a2a_guest::server::a2a::edge::storage;
use a2a_protocol::{ErrorKind, RpcError, Task};

/// The task of this instance with `id`, or TASK_NOT_FOUND.
pub fn load(id: &str) -> Result<(storage::TaskRow, Task), RpcError> {
    a2a_protocol::bounds::check_id("id", id)
        .map_err(|e| RpcError::new(ErrorKind::InvalidParams, e))?;
    let row = storage::get_task(id)?
        .ok_or_else(|| RpcError::new(ErrorKind::TaskNotFound, format!("task {id} not found")))?;
    let task = a2a_guest::server::task(&row)?;
    Ok((row, task))
}
