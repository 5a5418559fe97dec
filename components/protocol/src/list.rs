//! `ListTasks` (docs/protocol.md "A2A methods"): params, validation and the answer's shape.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::errors::{ErrorKind, RpcError};
use crate::time::parse_rfc3339_ms;
use crate::types::{Task, TaskState};

/// Default page size.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// Largest page size.
pub const MAX_PAGE_SIZE: u32 = 100;

/// `ListTasks` params as sent.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    /// Only this context.
    #[serde(default, alias = "context_id")]
    pub context_id: Option<String>,
    /// Only this state.
    #[serde(default)]
    pub status: Option<TaskState>,
    /// 1..=100, default 50.
    #[serde(default, alias = "page_size")]
    pub page_size: Option<i64>,
    /// Cursor from a previous answer.
    #[serde(default, alias = "page_token")]
    pub page_token: Option<String>,
    /// Only tasks whose status changed at or after this RFC 3339 time.
    #[serde(default, alias = "status_timestamp_after")]
    pub status_timestamp_after: Option<String>,
    /// Include artifacts (default false).
    #[serde(default, alias = "include_artifacts")]
    pub include_artifacts: Option<bool>,
    /// Cap on each task's history.
    #[serde(default, alias = "history_length")]
    pub history_length: Option<i64>,
}

/// A validated listing.
#[derive(Clone, Debug, PartialEq)]
pub struct ListQuery {
    /// Only this context.
    pub context_id: Option<String>,
    /// Only this state.
    pub state: Option<TaskState>,
    /// Page size.
    pub page_size: u32,
    /// Cursor (none for the first page).
    pub page_token: Option<String>,
    /// Only tasks updated at or after this (ms).
    pub updated_after: Option<u64>,
    /// Include artifacts.
    pub include_artifacts: bool,
    /// Cap on history.
    pub history_length: Option<i64>,
}

impl ListTasksRequest {
    /// Validates the params; errors are INVALID_PARAMS saying what to fix.
    pub fn validate(self) -> Result<ListQuery, RpcError> {
        let invalid = |m: String| RpcError::new(ErrorKind::InvalidParams, m);
        let page_size = match self.page_size {
            None => DEFAULT_PAGE_SIZE,
            Some(n) if (1..=i64::from(MAX_PAGE_SIZE)).contains(&n) => n as u32,
            Some(n) => {
                return Err(invalid(format!(
                    "pageSize must be between 1 and {MAX_PAGE_SIZE}, not {n}"
                )));
            }
        };
        if self.history_length.is_some_and(|n| n < 0) {
            return Err(invalid("historyLength must not be negative".into()));
        }
        let updated_after = match self
            .status_timestamp_after
            .as_deref()
            .filter(|s| !s.is_empty())
        {
            None => None,
            Some(t) => Some(parse_rfc3339_ms(t).ok_or_else(|| {
                invalid(format!(
                    "statusTimestampAfter {t:?} is not an RFC 3339 timestamp"
                ))
            })?),
        };
        Ok(ListQuery {
            context_id: self.context_id.filter(|c| !c.is_empty()),
            state: self.status.filter(|s| *s != TaskState::Unspecified),
            page_size,
            page_token: self.page_token.filter(|t| !t.is_empty()),
            updated_after,
            include_artifacts: self.include_artifacts.unwrap_or(false),
            history_length: self.history_length,
        })
    }
}

impl ListQuery {
    /// A task as this listing shows it.
    pub fn shape(&self, task: Task) -> Task {
        shape(task, self.include_artifacts, self.history_length)
    }
}

/// A task as a listing shows it: artifacts only when asked for, history cut to `history_length`.
pub fn shape(mut task: Task, include_artifacts: bool, history_length: Option<i64>) -> Task {
    if !include_artifacts {
        task.artifacts.clear();
    }
    task.with_history_length(history_length)
}

/// Most bytes of task bodies one page copies into a component: a page holds fewer tasks (with
/// a correct `nextPageToken`) rather than more than this, but always at least one.
pub const MAX_PAGE_BYTES: u64 = 8 << 20;

/// The answer: `nextPageToken` (`""` on the last page), `pageSize` and `totalSize` always present.
pub fn response(
    tasks: Vec<Task>,
    next_page_token: Option<String>,
    page_size: u32,
    total_size: u32,
) -> Value {
    json!({ "tasks": tasks, "nextPageToken": next_page_token.unwrap_or_default(), "pageSize": page_size, "totalSize": total_size })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: Value) -> Result<ListQuery, RpcError> {
        serde_json::from_value::<ListTasksRequest>(v)
            .unwrap()
            .validate()
    }

    #[test]
    fn defaults() {
        let q = req(json!({})).unwrap();
        assert_eq!(
            (q.page_size, q.include_artifacts, q.state, q.updated_after),
            (50, false, None, None)
        );
    }

    #[test]
    fn page_size_bounds_are_invalid_params() {
        for bad in [0, 101, -1, 500] {
            let e = req(json!({ "pageSize": bad })).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidParams);
            assert!(e.message.contains("between 1 and 100"), "{}", e.message);
        }
        assert_eq!(req(json!({ "page_size": 100 })).unwrap().page_size, 100);
        assert_eq!(req(json!({ "pageSize": 1 })).unwrap().page_size, 1);
    }

    #[test]
    fn filters_in_snake_and_camel_case() {
        let q = req(json!({ "context_id": "c", "status": "TASK_STATE_WORKING", "statusTimestampAfter": "1970-01-01T00:00:01Z", "include_artifacts": true })).unwrap();
        assert_eq!(q.context_id.as_deref(), Some("c"));
        assert_eq!(q.state, Some(TaskState::Working));
        assert_eq!(q.updated_after, Some(1000));
        assert!(q.include_artifacts);
        assert!(req(json!({ "statusTimestampAfter": "yesterday" })).is_err());
        assert!(req(json!({ "historyLength": -2 })).is_err());
    }

    #[test]
    fn last_page_has_an_empty_token_and_every_field() {
        assert_eq!(
            response(vec![], None, 50, 0),
            json!({ "tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0 })
        );
    }
}
