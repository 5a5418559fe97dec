//! The store by role: each part of the runtime holds the role it uses; [`Store`] is their sum,
//! what a backend implements.

use std::sync::Arc;

use a2a_protocol::TaskState;

use super::*;

/// What is stored of tasks: their rows, the message-id index, their conversations and the operator's notes on them.
pub trait Tasks: Send + Sync {
    /// The database, as traces name it (`db.system.name`).
    fn system(&self) -> &'static str;
    /// Insert a task at version 1, applying the message claim atomically when given, and bind
    /// its context to its instance; with a push config, register it in the same transaction
    /// (this first write is then notified already).
    fn create_task(
        &self,
        row: TaskRow,
        claim: Option<MessageClaim>,
        push: Option<PushConfig>,
    ) -> Pending<()>;
    /// Replace a task if its version is `expected` (applying the claim, refreshing the context
    /// binding, and appending `frames` to its log); returns the new version and the first
    /// frame's sequence id. Every task write queues a notification for each of the task's push
    /// configs in the same transaction. A running state takes this node's lease.
    fn update_task(
        &self,
        row: TaskRow,
        expected: u64,
        claim: Option<MessageClaim>,
        frames: Vec<NewFrame>,
    ) -> Pending<Written>;
    /// Settle every SUBMITTED/WORKING task FAILED with `status_text` (its status frame logged in
    /// the same transaction); returns how many.
    fn fail_unsettled(&self, now: u64, status_text: String) -> Pending<u64>;
    /// Keeps the operator's account of why a task of an instance failed (never part of the task
    /// a caller reads); the task need not be written yet.
    fn note_task(&self, instance_id: String, task_id: String, note: String) -> Pending<()>;
    /// The account [`Tasks::note_task`] kept, if any.
    fn task_note(&self, instance_id: String, task_id: String) -> Pending<Option<String>>;
    /// One task; scoped to an instance when `instance_id` is given.
    fn get_task(&self, id: String, instance_id: Option<String>) -> Pending<Option<TaskRow>>;
    /// A filtered page of tasks.
    fn list_tasks(&self, filter: TaskFilter) -> Pending<TaskPage>;
    /// What the idempotency index holds for a message id on an instance.
    fn find_message(
        &self,
        instance_id: String,
        message_id: String,
    ) -> Pending<Option<MessageRecord>>;
    /// Conversations, newest `last_seen` first, optionally one instance's or one context's.
    fn contexts(
        &self,
        instance_id: Option<String>,
        context_id: Option<String>,
        limit: u32,
    ) -> Pending<Vec<ContextSummary>>;
    /// Task counts by instance and state.
    fn state_counts(&self) -> Pending<Vec<(String, TaskState, u64)>>;
}

/// Each task's log of stream frames, which resumed subscriptions replay.
pub trait FrameLog: Send + Sync {
    /// Appends frames to an instance's task's log; returns the first one's sequence id.
    fn append_frames(
        &self,
        instance_id: String,
        task_id: String,
        frames: Vec<NewFrame>,
    ) -> Pending<u64>;
    /// Up to `limit` frames after `after` of an instance's task, with its state and latest
    /// sequence id; `NotFound` when the instance has no such task.
    fn frames(
        &self,
        instance_id: String,
        task_id: String,
        after: u64,
        limit: u32,
    ) -> Pending<FramePage>;
    /// Removes the logs of settled tasks last updated before `before` (ms); returns how many
    /// frames went.
    fn prune_frames(&self, before: u64) -> Pending<u64>;
}

/// Push configs and the outbox of notifications waiting for delivery.
pub trait PushOutbox: Send + Sync {
    /// Insert or replace (same id) a push config; `NotFound` when the instance has no such
    /// task, `Invalid` when the task has [`a2a_protocol::push::MAX_PER_TASK`] already.
    fn put_push_config(&self, config: PushConfig) -> Pending<()>;
    /// Delete a push config and its waiting notifications (absent: nothing happens).
    fn delete_push_config(&self, instance_id: String, task_id: String, id: String) -> Pending<()>;
    /// A task's push configs, oldest first.
    fn push_configs(&self, instance_id: String, task_id: String) -> Pending<Vec<PushConfig>>;
    /// The outbox heads due in `look`, when the next one is, how many wait.
    fn due_deliveries(&self, look: DueLook) -> Pending<DueDeliveries>;
    /// Records how the attempt on outbox entry `seq` at `now` ended.
    fn attempted(&self, seq: u64, now: u64, attempt: Attempt) -> Pending<()>;
    /// The delivery state of an instance's configs (one task's, when given).
    fn push_status(&self, instance_id: String, task_id: Option<String>)
    -> Pending<Vec<PushStatus>>;
    /// Notified whenever notifications were queued or an attempt was recorded.
    fn outbox_signal(&self) -> Arc<tokio::sync::Notify>;
    /// Notifications this store gave up at [`MAX_WAITING`] since start.
    fn push_dropped(&self) -> u64;
}

/// The operator's records (instances, outbound connections) and, on shared stores, sealed secrets.
pub trait Records: Send + Sync {
    /// Stores (`Some`) or removes a sealed secret (shared stores only).
    fn put_secret(&self, name: String, sealed: Option<SealedSecret>) -> Pending<()> {
        let _ = (name, sealed);
        Pending::ready(Err(StoreError::Invalid(
            "this store keeps no secrets: they stay in the data directory".into(),
        )))
    }
    /// Every sealed secret (shared stores only).
    fn secrets(&self) -> Pending<Vec<SealedSecret>> {
        Pending::ready(Ok(Vec::new()))
    }
    /// Insert or replace an instance record.
    fn put_instance(&self, record: InstanceRecord) -> Pending<()>;
    /// Delete an instance record (its tasks stay readable by id from the control API).
    fn delete_instance(&self, id: String) -> Pending<()>;
    /// Insert or replace an outbound connection record.
    fn put_connection(&self, record: ConnectionRecord) -> Pending<()>;
    /// Delete an outbound connection record.
    fn delete_connection(&self, id: String) -> Pending<()>;
    /// Every instance record.
    fn instances(&self) -> Pending<Vec<InstanceRecord>>;
    /// Every outbound connection record.
    fn connections(&self) -> Pending<Vec<ConnectionRecord>>;
}

/// What nodes sharing a store learn of each other: task leases and change notices.
pub trait Cluster: Send + Sync {
    /// Extends this node's leases on those of `task_ids` that are running to `now` + the lease
    /// time; the ids renewed (a task not among them is no longer this node's: another node
    /// settled it, or its lease ran out). A task with no turn running here is never renewed, so
    /// one a failed write left behind is settled when its lease runs out.
    fn renew_leases(&self, now: u64, task_ids: Vec<String>) -> Pending<Vec<String>>;
    /// Running tasks whose lease ran out before `now` (their node stopped renewing), at most
    /// `limit`.
    fn expired_leases(&self, now: u64, limit: u32) -> Pending<Vec<TaskRow>>;
    /// Calls `hook` with every change other nodes make (a store no other node writes: never).
    fn watch(&self, hook: ChangeHook) {
        let _ = hook;
    }
    /// Whether several nodes share this store.
    fn is_shared(&self) -> bool {
        false
    }
    /// Whether [`Cluster::watch`]'s notices flow (its listening connection is up); `None` for a
    /// store no other node writes.
    fn listening(&self) -> Option<bool> {
        None
    }
}

/// Where an agent's value lives: its instance (the scope), bucket and key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KvKey {
    /// The instance whose agent keeps it.
    pub scope: String,
    /// The bucket the agent opened.
    pub bucket: String,
    /// The key.
    pub key: String,
}

/// What every stored value counts against its scope's quota besides its bytes (the row's own
/// cost), so a quota also bounds how many values there are.
pub const KV_ENTRY_BYTES: u64 = 64;

impl KvKey {
    /// What the value counts against its scope's quota, with its key, bucket and
    /// [`KV_ENTRY_BYTES`].
    pub fn cost(&self, value: usize) -> u64 {
        (self.bucket.len() + self.key.len() + value) as u64 + KV_ENTRY_BYTES
    }
}

/// The key-value buckets of agent components (`wasi:keyvalue/store`), each instance's apart.
pub trait KeyValues: Send + Sync {
    /// The value at `at`.
    fn kv_get(&self, at: KvKey) -> Pending<Option<Vec<u8>>>;
    /// Sets the value at `at`; refused with [`over_quota`] when the scope would then hold more
    /// than `quota` bytes (buckets, keys and values, see [`KvKey::cost`]).
    fn kv_set(&self, at: KvKey, value: Vec<u8>, quota: u64) -> Pending<()>;
    /// Removes the value at `at` (none there: nothing to do).
    fn kv_delete(&self, at: KvKey) -> Pending<()>;
    /// The keys of `bucket` in `scope`, in order, from the `offset`-th, at most `limit`.
    fn kv_keys(
        &self,
        scope: String,
        bucket: String,
        offset: u64,
        limit: u32,
    ) -> Pending<Vec<String>>;
}

/// The refusal of a write past a scope's key-value quota.
pub fn over_quota(quota: u64) -> StoreError {
    StoreError::Invalid(format!(
        "the instance's key-value store is full ({quota} bytes, the preset's limits): delete keys first"
    ))
}

/// What the runtime needs from a store. Every call is answered through a [`Pending`]: reads of
/// many rows run off the async runtime (a long query never stalls a worker), point reads may
/// answer at once, writes are queued and answered once committed.
pub trait Store: Tasks + FrameLog + PushOutbox + Records + Cluster + KeyValues {
    /// Answers once every write queued before it is committed.
    fn flush(&self) -> Pending<()>;
    /// SQL statements run since start, for the metrics (0 for a store that runs none).
    fn statements(&self) -> u64 {
        0
    }
    /// Commits what is queued and stops; later calls fail as unavailable.
    fn close(&self);
}
