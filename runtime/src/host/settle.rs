//! The safety net of an invocation: tasks it wrote last and left SUBMITTED or WORKING, with no
//! turn running, are settled FAILED once it ends (a trap, a limit, or a bug left them behind).

use std::sync::{Arc, Mutex};

use a2a_protocol::TaskState;

use crate::activity::Activity;
use crate::events::EventHub;
use crate::records::task_key;
use crate::sessions::Sessions;
use crate::store::{NewFrame, Store, TaskRow, numbered};

/// The tasks an invocation wrote: id, the version and state it wrote last.
#[derive(Clone, Default)]
pub struct Written(Arc<Mutex<Vec<(String, u64, TaskState)>>>);

impl Written {
    /// Remembers a write.
    pub fn wrote(&self, id: &str, version: u64, state: TaskState) {
        let mut all = self.0.lock().unwrap();
        match all.iter_mut().find(|(t, ..)| t == id) {
            Some(w) => (w.1, w.2) = (version, state),
            None => all.push((id.to_owned(), version, state)),
        }
    }

    /// Every write remembered.
    pub fn take(&self) -> Vec<(String, u64, TaskState)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// What settling reaches.
pub struct Settle {
    /// The store.
    pub store: Arc<dyn Store>,
    /// Running turns (canceled).
    pub sessions: Arc<Sessions>,
    /// Frame logs (told and closed).
    pub events: Arc<EventHub>,
    /// Peers' active tasks.
    pub activity: Arc<Activity>,
}

impl Settle {
    /// Settles FAILED each task of `written` the invocation left running; `error` is how it
    /// ended, if it failed. Only those tasks are read again: the writes tell the states.
    pub async fn abandoned(
        &self,
        instance_id: &str,
        written: &[(String, u64, TaskState)],
        error: Option<String>,
    ) {
        let why = match &error {
            Some(e) => format!(
                "the agent component failed: {}",
                e.lines().next().unwrap_or("trap")
            ),
            None => "the agent component ended before the task settled".to_owned(),
        };
        for (task_id, version, _) in written.iter().filter(|(_, _, state)| state.is_running()) {
            let Ok(Some(row)) = self
                .store
                .get_task(task_id.clone(), Some(instance_id.to_owned()))
                .await
            else {
                continue;
            };
            // A newer version was written by another request, which now owns the task.
            if row.version != *version {
                continue;
            }
            self.fail(instance_id, row, &why).await;
        }
    }

    /// Settles a running task FAILED saying `why`, its status frame logged with it (through
    /// the state machine: a task that settled meanwhile is left alone); whether it was.
    pub async fn fail(&self, instance_id: &str, row: TaskRow, why: &str) -> bool {
        let key = task_key(instance_id, &row.id);
        self.sessions.cancel_task(&key);
        let now = crate::clock::now_ms();
        let Some((body, update)) = crate::tasks::failed(&row.body, now, why) else {
            return false;
        };
        let (id, context, expected) = (row.id.clone(), row.context_id.clone(), row.version);
        let failed = TaskRow {
            state: TaskState::Failed,
            updated_at: now,
            body,
            ..row
        };
        let frames = vec![NewFrame::status(update)];
        let Ok(w) = self
            .store
            .update_task(failed, expected, None, frames.clone())
            .await
        else {
            return false;
        };
        self.activity.task_settled(&id);
        self.activity
            .task_written(instance_id, &id, &context, TaskState::Failed.as_str());
        self.events.committed(&key, numbered(w.first_seq, frames));
        self.events.close(&key);
        tracing::warn!(instance = %instance_id, task = %id, reason = %why, "task FAILED: settled an abandoned task");
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn settle(store: Arc<dyn Store>) -> Settle {
        Settle {
            store,
            sessions: Arc::new(Sessions::new(&[], None)),
            events: Arc::default(),
            activity: Arc::default(),
        }
    }

    #[tokio::test]
    async fn only_running_tasks_still_at_the_written_version_are_failed() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        for id in ["left", "done", "moved"] {
            store
                .create_task(
                    TaskRow {
                        id: id.into(),
                        ..crate::store::contract::row(id, 1)
                    },
                    None,
                    None,
                )
                .await
                .unwrap();
        }
        store
            .update_task(crate::store::contract::row("moved", 2), 1, None, vec![])
            .await
            .unwrap();
        let s = settle(store.clone());
        let mut log = s
            .events
            .open(store.clone(), "i", "left", None)
            .await
            .unwrap();
        let written = [
            ("left".to_owned(), 1, TaskState::Working),
            ("done".to_owned(), 1, TaskState::Completed),
            ("moved".to_owned(), 1, TaskState::Working),
        ];
        s.abandoned("i", &written, Some("wasm trap: unreachable".into()))
            .await;
        let get = |id: &str| store.get_task(id.into(), None);
        let left = get("left").await.unwrap().unwrap();
        assert_eq!(left.state, TaskState::Failed);
        assert!(
            left.body
                .contains("the agent component failed: wasm trap: unreachable"),
            "{}",
            left.body
        );
        assert_eq!(
            get("done").await.unwrap().unwrap().state,
            TaskState::Submitted,
            "written as settled: not read, not touched"
        );
        assert_eq!(
            get("moved").await.unwrap().unwrap().version,
            2,
            "another request owns it now"
        );
        log.ready().await;
        let frame = log.try_next().expect("subscribers hear of it");
        assert_eq!(frame.kind, a2a_protocol::sse::Member::StatusUpdate);
        log.ready().await;
        assert!(log.is_closed(), "and the log closes");
    }
}
