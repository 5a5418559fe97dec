//! What one invocation wrote, so that the tasks it leaves running are settled when it ends.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use a2a_protocol::TaskState;

/// The tasks an invocation wrote: id, the version and state it wrote last; and whether a write
/// of it failed because the store could not take it.
#[derive(Clone, Default)]
pub struct Written {
    tasks: Arc<Mutex<Vec<(String, u64, TaskState)>>>,
    store_failed: Arc<AtomicBool>,
}

impl Written {
    /// Remembers a write.
    pub fn wrote(&self, id: &str, version: u64, state: TaskState) {
        let mut all = self.tasks.lock().unwrap();
        match all.iter_mut().find(|(t, ..)| t == id) {
            Some(w) => (w.1, w.2) = (version, state),
            None => all.push((id.to_owned(), version, state)),
        }
    }

    /// Remembers that a write failed because the store could not take it.
    pub fn store_failed(&self) {
        self.store_failed.store(true, Ordering::Relaxed);
    }

    /// Every write remembered.
    pub fn take(&self) -> Vec<(String, u64, TaskState)> {
        std::mem::take(&mut *self.tasks.lock().unwrap())
    }

    /// Why the tasks the invocation left running fail, as their status says it (callers read
    /// it: the store's own words stay in the log): `trap` is how the invocation failed, if it did.
    pub fn why(&self, trap: Option<String>) -> String {
        match trap {
            Some(e) => format!(
                "the agent component failed: {}",
                e.lines().next().unwrap_or("trap")
            ),
            None if self.store_failed.load(Ordering::Relaxed) => {
                "the task could not be stored while it ran".to_owned()
            }
            None => "the agent component ended before the task settled".to_owned(),
        }
    }
}
