//! Settlements the store could not take yet, retried until it does.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::records::task_key;

/// Most settlements owed at once; past it the newest are dropped with an error line (restart
/// recovery, or on a shared database the lease, still settles them).
const MAX_OWED: usize = 100_000;

/// Settlements the store refused for now, by task key: the instance, the task, the version the
/// settling path last saw (none: any running version) and why it fails.
#[derive(Default)]
pub struct Owed(Mutex<HashMap<String, OwedTask>>);

/// One settlement owed.
#[derive(Clone)]
pub(super) struct OwedTask {
    pub(super) instance_id: String,
    pub(super) task_id: String,
    pub(super) version: Option<u64>,
    pub(super) why: String,
}

impl Owed {
    pub(super) fn owe(&self, t: OwedTask) {
        let mut owed = self.0.lock().unwrap();
        if owed.len() >= MAX_OWED {
            tracing::error!(instance = %t.instance_id, task = %t.task_id, "too many settlements wait for the store: this task is settled at the next start (or by another node's lease check)");
            return;
        }
        owed.insert(task_key(&t.instance_id, &t.task_id), t);
    }

    /// Takes every settlement owed now, in no order (one that fails again is owed again).
    pub(super) fn take(&self) -> Vec<OwedTask> {
        self.0.lock().unwrap().drain().map(|(_, t)| t).collect()
    }

    /// How many settlements wait for the store.
    pub(super) fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}
