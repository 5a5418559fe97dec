//! The push-notification config methods: checked by the protocol crate, stored (and the
//! webhook judged, and every later task write delivered) by the host.

use a2a_guest::server::a2a::edge::push as host;
use a2a_guest::server::a2a::edge::types::StoreError;
use a2a_protocol::push::{ConfigRef, ListConfigs, TaskPushNotificationConfig, list_response, page};
use a2a_protocol::{ErrorKind, RpcError, jsonrpc};
use serde_json::Value;

/// A host refusal as the protocol error it is: an unknown task is TASK_NOT_FOUND.
fn refused(e: StoreError, task_id: &str) -> RpcError {
    match e {
        StoreError::NotFound => {
            RpcError::new(ErrorKind::TaskNotFound, format!("task {task_id} not found"))
        }
        e => e.into(),
    }
}

/// The task id a request names (required).
fn task_of(task_id: &str) -> Result<&str, RpcError> {
    if task_id.is_empty() {
        return Err(RpcError::new(
            ErrorKind::InvalidParams,
            "taskId is required",
        ));
    }
    a2a_protocol::bounds::check_id("taskId", task_id)
        .map_err(|e| RpcError::new(ErrorKind::InvalidParams, e))?;
    Ok(task_id)
}

/// A stored config, as the protocol type.
fn parse(json: &str) -> Result<TaskPushNotificationConfig, RpcError> {
    serde_json::from_str(json).map_err(|e| {
        RpcError::new(
            ErrorKind::Internal,
            format!("a stored push config is unreadable: {e}"),
        )
    })
}

/// The checked config of `task_id` as the host stores it.
pub fn stored(config: TaskPushNotificationConfig, task_id: &str) -> Result<String, RpcError> {
    let config = config.checked(task_id)?;
    Ok(serde_json::to_string(&config).unwrap_or_default())
}

/// Registers a config for an existing task; the config as stored.
pub fn register(
    config: TaskPushNotificationConfig,
    task_id: &str,
) -> Result<TaskPushNotificationConfig, RpcError> {
    let config = config.checked(task_id)?;
    let json = serde_json::to_string(&config).unwrap_or_default();
    host::set_config(&json).map_err(|e| refused(e, task_id))?;
    Ok(config)
}

/// `CreateTaskPushNotificationConfig`: the config as stored (its id defaults to the task's).
pub fn create(params: &Value) -> Result<Value, RpcError> {
    let config: TaskPushNotificationConfig = jsonrpc::params(params)?;
    let task_id = task_of(&config.task_id)?.to_owned();
    let config = register(config, &task_id)?;
    Ok(serde_json::to_value(config.shown()).unwrap_or_default())
}

/// `GetTaskPushNotificationConfig`.
pub fn get(params: &Value) -> Result<Value, RpcError> {
    let r: ConfigRef = jsonrpc::params(params)?;
    let json = host::get_config(task_of(&r.task_id)?, &r.id).map_err(|e| match e {
        StoreError::NotFound => RpcError::new(
            ErrorKind::TaskNotFound,
            format!(
                "task {} has no push-notification config {:?}",
                r.task_id, r.id
            ),
        ),
        e => e.into(),
    })?;
    Ok(serde_json::to_value(parse(&json)?.shown()).unwrap_or_default())
}

/// `ListTaskPushNotificationConfigs`: oldest first, paged by the last id.
pub fn list(params: &Value) -> Result<Value, RpcError> {
    let q: ListConfigs = jsonrpc::params(params)?;
    let task_id = task_of(&q.task_id)?;
    let configs = host::list_configs(task_id)
        .map_err(|e| refused(e, task_id))?
        .iter()
        .map(|c| parse(c).map(TaskPushNotificationConfig::shown))
        .collect::<Result<Vec<_>, _>>()?;
    let (shown, next) = page(&configs, q.page_size, &q.page_token)?;
    Ok(list_response(shown, next))
}

/// `DeleteTaskPushNotificationConfig`: idempotent; answers the empty object.
pub fn delete(params: &Value) -> Result<Value, RpcError> {
    let r: ConfigRef = jsonrpc::params(params)?;
    let task_id = task_of(&r.task_id)?;
    host::delete_config(task_id, &r.id).map_err(|e| refused(e, task_id))?;
    Ok(Value::Object(Default::default()))
}
