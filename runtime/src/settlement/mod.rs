//! Settling tasks that were left running, on every path that can leave one so: an invocation
//! that ended (a trap, a limit, a failed store write, or a bug) before its tasks settled, a
//! restart, and a node that stopped renewing its leases. Every path settles through the
//! protocol's state machine ([`a2a_protocol::execution::fail_stored`]; the store's
//! [`Tasks::fail_unsettled`] too), and a settlement the
//! store cannot take now (it is down, the disk is full) is owed: retried until the store takes
//! it, so no task stays WORKING while its node lives. A cancel is not settled here: the
//! instance's component settles it CANCELED (the control API's cancel calls CancelTask).

mod owed;
mod written;

use std::sync::Arc;
use std::time::Duration;

use a2a_protocol::TaskState;

use crate::activity::Activity;
use crate::clock::now_ms;
use crate::events::EventHub;
use crate::records::task_key;
use crate::sessions::Sessions;
use crate::store::{Cluster, NewFrame, Store, StoreError, TaskRow, Tasks, numbered};
pub use owed::Owed;
use owed::OwedTask;
pub use written::Written;

/// The status text of the tasks a previous process left running, settled at start.
pub const RESTARTED: &str = "interrupted by runtime restart";

/// The status text of a task whose node stopped renewing its lease.
pub const NODE_LOST: &str = "node lost: the node running this task stopped renewing its lease";

/// A new status message's id.
fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// At start, settles FAILED ([`RESTARTED`]) the tasks a previous process left running; how
/// many. On a shared store the tasks still running may be another node's: they are not this
/// start's to settle (the leases of a node that is gone run out, see [`Settle::lost_nodes`]).
pub async fn at_start(store: &dyn Store) -> Result<u64, StoreError> {
    if store.is_shared() {
        return Ok(0);
    }
    let settled = store.fail_unsettled(now_ms(), RESTARTED.into()).await?;
    if settled > 0 {
        tracing::warn!(
            tasks = settled,
            "settled tasks left running by a previous process as FAILED"
        );
    }
    Ok(settled)
}

/// What settling reaches.
#[derive(Clone)]
pub struct Settle {
    /// The tasks of the store.
    tasks: Arc<dyn Tasks>,
    /// Running turns (canceled).
    sessions: Arc<Sessions>,
    /// Frame logs (told and closed).
    events: Arc<EventHub>,
    /// Peers' active tasks.
    activity: Arc<Activity>,
    /// Settlements waiting for the store.
    owed: Arc<Owed>,
}

impl Settle {
    /// Settlement over these services, keeping what the store cannot take yet in `owed`.
    pub fn new(
        tasks: Arc<dyn Tasks>,
        sessions: Arc<Sessions>,
        events: Arc<EventHub>,
        activity: Arc<Activity>,
        owed: Arc<Owed>,
    ) -> Settle {
        Settle {
            tasks,
            sessions,
            events,
            activity,
            owed,
        }
    }

    /// How many settlements wait for the store.
    pub fn owed(&self) -> usize {
        self.owed.len()
    }

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
            .tasks
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
            let mut owed = self.owed.take().into_iter();
            let mut settled = 0;
            for t in owed.by_ref() {
                match self.settle_owed(t).await {
                    Settled::Done => settled += 1,
                    // Still down: the rest waits for the next pass, not a timeout each.
                    Settled::Owed => break,
                    Settled::Moot => {}
                }
            }
            owed.for_each(|t| self.owed.owe(t));
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

    /// Settles FAILED ([`NODE_LOST`]) up to `limit` running tasks whose lease ran out (their
    /// node stopped renewing it); how many were settled here.
    pub async fn lost_nodes(&self, cluster: &dyn Cluster, limit: u32) -> Result<u64, StoreError> {
        let mut settled = 0;
        for row in cluster.expired_leases(now_ms(), limit).await? {
            let instance = row.instance_id.clone();
            if self.fail(&instance, row, NODE_LOST).await {
                settled += 1;
            }
        }
        Ok(settled)
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
        let now = now_ms();
        let Some((body, update)) =
            a2a_protocol::execution::fail_stored(&row.body, now, why, new_id)
        else {
            return Ok(false);
        };
        let (id, context, expected) = (row.id.clone(), row.context_id.clone(), row.version);
        let failed = TaskRow {
            state: TaskState::Failed,
            updated_at: now,
            body,
            stamp: 0,
            ..row
        };
        let frames = vec![NewFrame::status(update)];
        let w = self
            .tasks
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
        Settle::new(
            store,
            Arc::new(Sessions::new(&[], None, &crate::egress::Exit::direct())),
            Arc::default(),
            Arc::default(),
            Arc::default(),
        )
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
        assert_eq!(s.owed(), 1, "the store was down: owed, not forgotten");
        let stop = tokio_util::sync::CancellationToken::new();
        let paying = tokio::spawn(s.clone().pay_owed(stop.clone()));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(s.owed(), 1, "still owed while the store is down");
        memory.set_down(false);
        while s.owed() > 0 {
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
