//! The safety net of an invocation: tasks it wrote last and left SUBMITTED or WORKING, with no
//! turn running, are settled FAILED once it ends (a trap, a limit, a failed store write, or a
//! bug left them behind). A settlement the store cannot take now (it is down, the disk is
//! full) is owed: retried until the store takes it, so no task stays WORKING while its node
//! lives.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_protocol::TaskState;

use crate::activity::Activity;
use crate::events::EventHub;
use crate::records::task_key;
use crate::sessions::Sessions;
use crate::store::{NewFrame, Store, StoreError, TaskRow, numbered};

/// The tasks an invocation wrote: id, the version and state it wrote last; and whether a write
/// of it failed because the store could not take it.
#[derive(Clone, Default)]
pub struct Written {
    tasks: Arc<Mutex<Vec<(String, u64, TaskState)>>>,
    store_failed: Arc<std::sync::atomic::AtomicBool>,
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
        self.store_failed
            .store(true, std::sync::atomic::Ordering::Relaxed);
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
            None if self.store_failed.load(std::sync::atomic::Ordering::Relaxed) => {
                "the task could not be stored while it ran".to_owned()
            }
            None => "the agent component ended before the task settled".to_owned(),
        }
    }
}

/// Most settlements owed at once; past it the newest are dropped with an error line (restart
/// recovery, or on a shared database the lease, still settles them).
const MAX_OWED: usize = 100_000;

/// Settlements the store refused for now, by task key: the instance, the task, the version the
/// settling path last saw (none: any running version) and why it fails.
#[derive(Default)]
pub struct Owed(Mutex<HashMap<String, OwedTask>>);

#[derive(Clone)]
struct OwedTask {
    instance_id: String,
    task_id: String,
    version: Option<u64>,
    why: String,
}

impl Owed {
    fn owe(&self, t: OwedTask) {
        let mut owed = self.0.lock().unwrap();
        if owed.len() >= MAX_OWED {
            tracing::error!(instance = %t.instance_id, task = %t.task_id, "too many settlements wait for the store: this task is settled at the next start (or by another node's lease check)");
            return;
        }
        owed.insert(task_key(&t.instance_id, &t.task_id), t);
    }

    /// How many settlements wait for the store.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    /// Settlements waiting for the store.
    pub owed: Arc<Owed>,
}

impl Settle {
    /// Settles FAILED, saying `why`, each task of `written` the invocation left running. Only
    /// those tasks are read again: the writes tell the states.
    pub async fn abandoned(
        &self,
        instance_id: &str,
        written: &[(String, u64, TaskState)],
        why: String,
    ) {
        for (task_id, version, _) in written.iter().filter(|(_, _, state)| state.is_running()) {
            self.settle_owed(OwedTask {
                instance_id: instance_id.to_owned(),
                task_id: task_id.clone(),
                version: Some(*version),
                why: why.clone(),
            })
            .await;
        }
    }

    /// Settles `t` FAILED unless it settled or another request wrote it meanwhile; owes it
    /// when the store cannot read or write it now.
    async fn settle_owed(&self, t: OwedTask) -> Settled {
        let row = match self
            .store
            .get_task(t.task_id.clone(), Some(t.instance_id.clone()))
            .await
        {
            Ok(Some(row)) => row,
            Ok(None) => return Settled::Moot,
            Err(StoreError::Unavailable(_)) => {
                self.owed.owe(t);
                return Settled::Owed;
            }
            Err(e) => {
                tracing::error!(instance = %t.instance_id, task = %t.task_id, error = %e, "cannot read a task to settle");
                return Settled::Moot;
            }
        };
        // A newer version was written by another request, which now owns the task.
        if !row.state.is_running() || t.version.is_some_and(|v| v != row.version) {
            return Settled::Moot;
        }
        match self.try_fail(&t.instance_id, row, &t.why).await {
            Err(StoreError::Unavailable(_)) => {
                self.owed.owe(t);
                Settled::Owed
            }
            Err(_) => Settled::Moot,
            Ok(done) if done => Settled::Done,
            Ok(_) => Settled::Moot,
        }
    }

    /// Settles what is owed every second (while anything is) until `stop`: a store that takes
    /// writes again gets them at once.
    pub async fn pay_owed(self, stop: tokio_util::sync::CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            let owed: Vec<OwedTask> = self.owed.0.lock().unwrap().values().cloned().collect();
            let mut settled = 0;
            for t in owed {
                let key = task_key(&t.instance_id, &t.task_id);
                self.owed.0.lock().unwrap().remove(&key);
                match self.settle_owed(t).await {
                    Settled::Done => settled += 1,
                    // Still down: the rest waits for the next pass, not a timeout each.
                    Settled::Owed => break,
                    Settled::Moot => {}
                }
            }
            if settled > 0 {
                let waiting = self.owed.len();
                tracing::warn!(
                    tasks = settled,
                    still_waiting = waiting,
                    "settled FAILED the tasks a store failure had left running"
                );
            }
        }
    }

    /// Settles a running task FAILED saying `why`, its status frame logged with it (through
    /// the state machine: a task that settled meanwhile is left alone); whether it was. A write
    /// the store cannot take now is owed, and retried until it can.
    pub async fn fail(&self, instance_id: &str, row: TaskRow, why: &str) -> bool {
        let owed = OwedTask {
            instance_id: instance_id.to_owned(),
            task_id: row.id.clone(),
            version: Some(row.version),
            why: why.to_owned(),
        };
        match self.try_fail(instance_id, row, why).await {
            Ok(done) => done,
            Err(StoreError::Unavailable(_)) => {
                self.owed.owe(owed);
                false
            }
            Err(_) => false,
        }
    }

    /// [`Settle::fail`] once; the store's refusal as it is.
    async fn try_fail(
        &self,
        instance_id: &str,
        row: TaskRow,
        why: &str,
    ) -> Result<bool, StoreError> {
        let key = task_key(instance_id, &row.id);
        self.sessions.cancel_task(&key);
        let now = crate::clock::now_ms();
        let Some((body, update)) = crate::tasks::failed(&row.body, now, why) else {
            return Ok(false);
        };
        let (id, context, expected) = (row.id.clone(), row.context_id.clone(), row.version);
        let failed = TaskRow {
            state: TaskState::Failed,
            updated_at: now,
            body,
            ..row
        };
        let frames = vec![NewFrame::status(update)];
        let w = self
            .store
            .update_task(failed, expected, None, frames.clone())
            .await?;
        self.activity.task_settled(&id);
        self.activity
            .task_written(instance_id, &id, &context, TaskState::Failed.as_str());
        self.events.committed(&key, numbered(w.first_seq, frames));
        self.events.close(&key);
        tracing::warn!(instance = %instance_id, task = %id, reason = %why, "task FAILED: settled an abandoned task");
        Ok(true)
    }
}

/// How one settlement ended.
enum Settled {
    /// Written.
    Done,
    /// Waiting for the store.
    Owed,
    /// Nothing to do: the task settled, moved on or is gone.
    Moot,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn settle(store: Arc<dyn Store>) -> Settle {
        Settle {
            store,
            sessions: Arc::new(Sessions::new(&[], None, &crate::egress::Exit::direct())),
            events: Arc::default(),
            activity: Arc::default(),
            owed: Arc::default(),
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
        let why = Written::default().why(Some("wasm trap: unreachable".into()));
        s.abandoned("i", &written, why).await;
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

    #[tokio::test]
    async fn a_settlement_the_store_refuses_is_owed_until_it_takes_it() {
        let memory = Arc::new(MemoryStore::default());
        let store: Arc<dyn Store> = memory.clone();
        store
            .create_task(crate::store::contract::row("t", 1), None, None)
            .await
            .unwrap();
        let s = settle(store.clone());
        memory.set_down(true);
        let written = Written::default();
        written.store_failed();
        let why = written.why(None);
        s.abandoned("i", &[("t".to_owned(), 1, TaskState::Working)], why)
            .await;
        assert_eq!(s.owed.len(), 1, "the store was down: owed, not forgotten");
        let stop = tokio_util::sync::CancellationToken::new();
        let paying = tokio::spawn(
            Settle {
                store: store.clone(),
                sessions: s.sessions.clone(),
                events: s.events.clone(),
                activity: s.activity.clone(),
                owed: s.owed.clone(),
            }
            .pay_owed(stop.clone()),
        );
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(s.owed.len(), 1, "still owed while the store is down");
        memory.set_down(false);
        while !s.owed.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.cancel();
        paying.await.unwrap();
        let t = store.get_task("t".into(), None).await.unwrap().unwrap();
        assert_eq!(
            t.state,
            TaskState::Failed,
            "settled once the store took writes"
        );
    }
}
