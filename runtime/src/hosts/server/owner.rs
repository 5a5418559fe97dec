//! Whose tasks a request reaches (docs/auth.md "Authentication"): the capabilities that take a task
//! id (push configs, event logs) ask here whether the caller's principal owns it.

use std::sync::Arc;

use super::bindings::types::StoreError;
use super::services::{Invocation, Services};
use crate::store::Tasks;

/// The tasks a request may reach: its instance's, and of those its principal's.
#[derive(Clone)]
pub struct Owner {
    tasks: Arc<dyn Tasks>,
    instance_id: String,
    /// None: the runtime's own call, which reaches every principal's.
    principal: Option<String>,
}

impl Owner {
    /// The reach of `call`.
    pub fn of(s: &Services, call: &Invocation) -> Owner {
        Owner::new(
            s.store.clone(),
            &call.instance.record.id,
            call.caller.as_ref().map(|c| c.principal.clone()),
        )
    }

    /// The tasks of `instance_id` in `tasks` that `principal` owns (none: all).
    pub fn new(tasks: Arc<dyn Tasks>, instance_id: &str, principal: Option<String>) -> Owner {
        Owner {
            tasks,
            instance_id: instance_id.to_owned(),
            principal,
        }
    }

    /// `NotFound` unless the task is the instance's and the caller's.
    pub async fn owns(&self, task_id: &str) -> Result<(), StoreError> {
        let task = self
            .tasks
            .get_task(task_id.to_owned(), Some(self.instance_id.clone()))
            .await?;
        task.filter(|t| self.principal.as_ref().is_none_or(|p| *p == t.principal))
            .map(drop)
            .ok_or(StoreError::NotFound)
    }
}
