//! Durable state: inbound instance and connection records, tasks (indexed columns + JSON body +
//! CAS version + lease), the message-id index, context bindings, each task's frame log, push
//! configs and their outbox, and (on a shared database) the sealed secrets. SQLite is the
//! embedded implementation, PostgreSQL the shared one of several nodes; an in-memory one serves
//! the host's unit tests.

#[cfg(test)]
pub mod contract;

/// The select both SQL backends read push delivery states with (config columns, counts, the
/// outbox head's attempts and due time); each adds its own `WHERE` and order.
macro_rules! push_status_select {
    () => {
        "SELECT p.instance_id, p.task_id, p.id, p.body, p.delivered, p.failed, p.last_status,
             p.last_attempt_at,
             (SELECT COUNT(*) FROM push_outbox o WHERE o.instance_id = p.instance_id
                 AND o.task_id = p.task_id AND o.config_id = p.id),
             h.attempts, h.next_at
         FROM push_configs p LEFT JOIN push_outbox h ON h.seq = (SELECT MIN(o.seq) FROM push_outbox o
             WHERE o.instance_id = p.instance_id AND o.task_id = p.task_id AND o.config_id = p.id)"
    };
}
#[cfg(test)]
mod lease_tests {
    #[test]
    fn node_ids_are_unique_per_process_start() {
        let (a, b) = (
            super::Lease::new(Some("edge-a"), 1),
            super::Lease::new(Some("edge-a"), 1),
        );
        assert!(
            a.node.starts_with("edge-a-") && a.node.len() == "edge-a-".len() + 8,
            "{}",
            a.node
        );
        assert_ne!(a.node, b.node);
        assert!(!super::Lease::new(None, 1).node.contains(' '));
    }
}
pub mod health;
pub mod memory;
mod postgres;
mod roles;
mod sqlite;

pub use postgres::PostgresStore;
pub use roles::{
    Cluster, FrameLog, KV_ENTRY_BYTES, KeyValues, KvKey, PushOutbox, Records, Store, Tasks,
    over_quota,
};
pub use sqlite::{SqliteStore, backup};

use a2a_protocol::TaskState;
use a2a_protocol::sse::Member;
use std::hash::BuildHasher;
use std::sync::Arc;

use tokio::sync::oneshot;

pub use crate::records::{ConnectionRecord, InstanceRecord};

/// The SQLite database's file name in the data directory.
pub const SQLITE_FILE: &str = "a2a-edge.db";

/// One stored task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    /// Task id.
    pub id: String,
    /// The inbound instance it belongs to.
    pub instance_id: String,
    /// Conversation key.
    pub context_id: String,
    /// Current state.
    pub state: TaskState,
    /// Skill it runs.
    pub skill: String,
    /// Creation time, ms.
    pub created_at: u64,
    /// Latest status change, ms.
    pub updated_at: u64,
    /// CAS version.
    pub version: u64,
    /// The protocol Task, ProtoJSON.
    pub body: String,
    /// The caller that created it.
    pub peer_id: Option<String>,
    /// Who owns it (docs/auth.md "Authentication"): only they see it.
    pub principal: String,
    /// The trace of the request that created it (hex), when it was traced.
    pub trace_id: Option<String>,
    /// Who wrote `body`, as [`Writer::stamp`] has it (0: the runtime, or a release before it).
    pub stamp: u64,
}

/// The build of a component that writes task bodies (its wasm's sha256). A body it wrote is
/// what it writes again for the task the body parses to, so a reader of the same build may
/// send the body as it is (`storage.read-task`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Writer(u64);

impl Writer {
    /// The writer of the component whose wasm has the hex sha256 `sha256`.
    pub fn of(sha256: &str) -> Writer {
        Writer(foldhash::fast::FixedState::with_seed(0).hash_one(sha256))
    }

    /// The stamp of `body` written by this writer: never 0, and another for any other body or
    /// writer (a body changed by anyone else, the runtime's settlement included, loses it).
    pub fn stamp(self, body: &str) -> u64 {
        foldhash::fast::FixedState::with_seed(self.0)
            .hash_one(body)
            .max(1)
    }

    /// Whether this writer wrote `row`'s body as it is now.
    pub fn wrote(self, row: &TaskRow) -> bool {
        row.stamp == self.stamp(&row.body)
    }
}

/// A frame a write appends to its task's log: the StreamResponse member and its JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct NewFrame {
    /// The member it carries.
    pub kind: Member,
    /// The member's JSON.
    pub json: String,
}

impl NewFrame {
    /// A status-update frame.
    pub fn status(json: String) -> NewFrame {
        NewFrame {
            kind: Member::StatusUpdate,
            json,
        }
    }
}

/// The frames a write appended, numbered from the first one's sequence id.
pub fn numbered(first_seq: u64, frames: Vec<NewFrame>) -> impl Iterator<Item = Frame> {
    (first_seq..).zip(frames).map(|(seq, f)| Frame {
        seq,
        kind: f.kind,
        json: f.json.into(),
    })
}

/// A running task settled FAILED with `text` through the protocol's state machine: its new body
/// and the status frame to log with it; a body that does not parse is kept (its indexed state
/// column still says FAILED), with no frame.
pub fn failed(body: &str, now: u64, text: &str) -> (String, Vec<NewFrame>) {
    let new_id = || uuid::Uuid::new_v4().to_string();
    match a2a_protocol::execution::fail_stored(body, now, text, new_id) {
        Some((body, frame)) => (body, vec![NewFrame::status(frame)]),
        None => (body.to_owned(), Vec::new()),
    }
}

/// One frame of a task's log.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    /// Per-task sequence, from 1, assigned by the store in commit order.
    pub seq: u64,
    /// The member it carries.
    pub kind: Member,
    /// The member's JSON.
    pub json: Arc<str>,
}

/// What a read of a task's log found, in one snapshot with the task's state.
#[derive(Clone, Debug, PartialEq)]
pub struct FramePage {
    /// Frames after the cursor, oldest first (retention may have removed some before them).
    pub frames: Vec<Frame>,
    /// The task's latest sequence id.
    pub last_seq: u64,
    /// The task's state.
    pub state: TaskState,
}

/// A task write's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Written {
    /// The task's new version.
    pub version: u64,
    /// The sequence id of the first frame the write appended (the next one when it appended none).
    pub first_seq: u64,
}

/// Frames kept per task: an append past it removes the oldest.
pub const RETAIN_FRAMES: u64 = 1000;

/// Who writes: the node whose running tasks hold its lease.
#[derive(Clone, Debug)]
pub struct Lease {
    /// This node's id.
    pub node: String,
    /// How long a lease lasts unless renewed, ms.
    pub ttl_ms: u64,
}

impl Default for Lease {
    fn default() -> Self {
        Lease {
            node: "local".into(),
            ttl_ms: 15_000,
        }
    }
}

impl Lease {
    /// This process's lease: its node id is the configured name (default: the host name) and a
    /// random suffix, so a restarted node never renews the leases of the process it replaces.
    pub fn new(name: Option<&str>, ttl_ms: u64) -> Lease {
        let name = name.map(str::to_owned).unwrap_or_else(host_name);
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Lease {
            node: format!("{name}-{}", &suffix[..8]),
            ttl_ms,
        }
    }

    /// The lease a write of a task in `state` at `now` takes: held while it runs, none after.
    pub fn until(&self, state: TaskState, now: u64) -> Option<i64> {
        state.is_running().then(|| (now + self.ttl_ms) as i64)
    }
}

fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; the name is NUL-terminated when it fits.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let name = ok
        .then(|| std::ffi::CStr::from_bytes_until_nul(&buf).ok())
        .flatten()
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|n| !n.is_empty() && !n.contains(char::is_whitespace));
    name.unwrap_or_else(|| "node".into())
}

/// What a shared store tells the other nodes: a task's log grew, a task was canceled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// New frames in this task's log (the task key `instance/task`).
    Frames(String),
    /// This task (key) was canceled: the node running its turn stops it.
    Canceled(String),
}

/// Receives a shared store's [`Change`]s.
pub type ChangeHook = Arc<dyn Fn(Change) + Send + Sync>;

pub use crate::sealing::SealedSecret;

/// Why a store call failed.
#[derive(Clone, Debug, PartialEq)]
pub enum StoreError {
    /// The message id's record changed since the writer looked; what it holds now.
    DuplicateMessage(MessageRecord),
    /// The expected version is stale; the current row.
    Conflict(Box<TaskRow>),
    /// No such row.
    NotFound,
    /// A malformed argument; what is wrong.
    Invalid(String),
    /// The database failed.
    Unavailable(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::DuplicateMessage(r) => {
                write!(f, "message already recorded for task {}", r.task_id)
            }
            Self::Conflict(r) => write!(
                f,
                "task {} changed concurrently (now version {})",
                r.id, r.version
            ),
            Self::NotFound => write!(f, "not found"),
            Self::Invalid(m) | Self::Unavailable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StoreError {}

impl StoreError {
    /// A frame for a task that settled: nothing is logged after its final frame.
    pub fn settled(task_id: &str) -> StoreError {
        StoreError::Invalid(format!(
            "task {task_id} has settled: no frame is logged after its final one"
        ))
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Unavailable(format!("database error: {e}"))
    }
}

/// What the idempotency index holds for a message id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageRecord {
    /// The task the message created or continued.
    pub task_id: String,
    /// Digest of the message's taskId and parts.
    pub fingerprint: String,
}

/// A write's claim on a message id: applied only while the index still holds `replaces`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageClaim {
    /// The message id.
    pub message_id: String,
    /// Digest of the message's taskId and parts.
    pub fingerprint: String,
    /// What the index held when the writer decided (none: nothing).
    pub replaces: Option<MessageRecord>,
}

/// Filters and paging of a task listing.
#[derive(Clone, Debug, Default)]
pub struct TaskFilter {
    /// Only this instance's tasks.
    pub instance_id: Option<String>,
    /// Only this context.
    pub context_id: Option<String>,
    /// Only this principal's.
    pub principal: Option<String>,
    /// Only this state.
    pub state: Option<TaskState>,
    /// Only tasks updated at or after this time, ms.
    pub updated_after: Option<u64>,
    /// Page size.
    pub limit: u32,
    /// Where the page starts.
    pub start: PageStart,
    /// Most bytes of bodies in the page, counted after `shape` (at least one row is always
    /// returned).
    pub max_bytes: Option<u64>,
    /// Bodies as the listing shows them: artifacts only when true, history cut to the length.
    pub shape: Option<(bool, Option<i64>)>,
}

/// Cursor (protocol) or offset (control API) paging.
#[derive(Clone, Debug, Default)]
pub enum PageStart {
    /// The first page.
    #[default]
    First,
    /// After the opaque token of a previous page.
    Token(String),
    /// Skip this many rows.
    Offset(u32),
}

/// One page of tasks, newest `updated_at` first.
#[derive(Clone, Debug)]
pub struct TaskPage {
    /// The rows.
    pub tasks: Vec<TaskRow>,
    /// Token of the next page (cursor paging), none on the last page.
    pub next_token: Option<String>,
    /// Size of the filtered set.
    pub total: u32,
}

impl TaskFilter {
    /// The page of `rows` (in listing order, from the page's start): bodies shaped as asked, cut
    /// at the page size or the byte budget (never below one row), with the token of the next
    /// page when more rows follow.
    pub fn page<E>(
        &self,
        rows: impl Iterator<Item = Result<TaskRow, E>>,
        total: u32,
    ) -> Result<TaskPage, E> {
        let limit = self.limit.max(1) as usize;
        let (mut tasks, mut bytes, mut more) = (Vec::new(), 0u64, false);
        for row in rows {
            let mut row = row?;
            if let Some((artifacts, history)) = self.shape
                && let Ok(task) = serde_json::from_str::<a2a_protocol::Task>(&row.body)
            {
                row.body =
                    serde_json::to_string(&a2a_protocol::list::shape(task, artifacts, history))
                        .unwrap_or(row.body);
            }
            bytes += row.body.len() as u64;
            let over_bytes = self.max_bytes.is_some_and(|max| bytes > max) && !tasks.is_empty();
            if tasks.len() == limit || over_bytes {
                more = true;
                break;
            }
            tasks.push(row);
        }
        let next_token = more
            .then(|| {
                tasks
                    .last()
                    .map(|r: &TaskRow| format!("{}:{}", r.updated_at, r.id))
            })
            .flatten();
        Ok(TaskPage {
            tasks,
            next_token,
            total,
        })
    }
}

/// The cursor of a page token (`<updated_at>:<id>` of the previous page's last row).
pub fn parse_token(token: &str) -> Result<(u64, String), StoreError> {
    token
        .split_once(':')
        .and_then(|(at, id)| Some((at.parse().ok()?, id.to_owned())))
        .ok_or_else(|| {
            StoreError::Invalid(format!(
                "pageToken {token:?} is not a token this server issued"
            ))
        })
}

/// One conversation (instance, context) as its persisted tasks describe it.
#[derive(Clone, Debug, PartialEq)]
pub struct ContextSummary {
    /// The instance.
    pub instance_id: String,
    /// The context id.
    pub context_id: String,
    /// Tasks in it.
    pub task_count: u64,
    /// Tasks not yet terminal.
    pub active_count: u64,
    /// Earliest task creation, ms.
    pub first_seen: u64,
    /// Latest task update, ms.
    pub last_seen: u64,
    /// The caller that created its tasks (the least id when several did).
    pub peer_id: Option<String>,
}

/// A push-notification config of a task.
#[derive(Clone, Debug, PartialEq)]
pub struct PushConfig {
    /// The instance of the task.
    pub instance_id: String,
    /// The task.
    pub task_id: String,
    /// The config's id within the task.
    pub id: String,
    /// The `TaskPushNotificationConfig`, ProtoJSON, secrets included (what a delivery sends).
    pub body: String,
}

/// Notifications one config may have waiting: beyond it, the oldest waiting behind the one being
/// tried is given up (counted `failed`), so a receiver that is down cannot grow the outbox without
/// bound, and the newest state of the task is always kept.
pub const MAX_WAITING: u64 = 256;

/// The `lastStatus` of a config whose notification was given up at [`MAX_WAITING`].
pub const OVERFLOW: &str = "too many notifications waiting: the oldest waiting one was dropped";

/// A notification waiting in the outbox: the first undelivered one of its config.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// Outbox order (per config, the delivery order).
    pub seq: u64,
    /// Where it goes.
    pub config: PushConfig,
    /// The `StreamResponse` to POST.
    pub payload: String,
    /// When the task write queued it, ms.
    pub created_at: u64,
    /// Attempts made so far.
    pub attempts: u32,
}

/// One look of the delivery worker at the outbox.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DueLook {
    /// Heads whose time is at most this are due, ms.
    pub now: u64,
    /// Most heads answered.
    pub limit: u32,
    /// Instances whose heads are left out: the worker has all their delivery slots in use.
    pub skip: Vec<String>,
}

impl DueLook {
    /// The first `limit` heads due at `now`, of every instance.
    pub fn at(now: u64, limit: u32) -> DueLook {
        DueLook {
            now,
            limit,
            ..DueLook::default()
        }
    }
}

/// The outbox as the delivery worker sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DueDeliveries {
    /// Due heads (the oldest notification of each config), in turns across instances: each
    /// instance's oldest head, then each one's second, …; within a turn, outbox order. So one
    /// instance's many waiting heads never crowd another's out of a look.
    pub due: Vec<Delivery>,
    /// When the earliest head not due yet is, ms.
    pub next_at: Option<u64>,
    /// Notifications waiting in all.
    pub pending: u64,
}

/// How one delivery attempt ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Attempt {
    /// The webhook answered 2xx with this status: the notification leaves the outbox.
    Delivered(u16),
    /// Try again at `next_at` (ms); what went wrong.
    Retry {
        /// When, ms.
        next_at: u64,
        /// What went wrong.
        error: String,
    },
    /// No more attempts (too many, too old, or refused by the guard): it leaves the outbox.
    GaveUp(String),
}

/// The delivery state of one config.
#[derive(Clone, Debug, PartialEq)]
pub struct PushStatus {
    /// The config.
    pub config: PushConfig,
    /// Notifications delivered.
    pub delivered: u64,
    /// Notifications given up on.
    pub failed: u64,
    /// Notifications waiting.
    pub pending: u64,
    /// Attempts made on the oldest waiting one.
    pub attempts: u32,
    /// The outcome of the latest attempt (an HTTP status or what went wrong).
    pub last_status: Option<String>,
    /// When the latest attempt was, ms.
    pub last_attempt_at: Option<u64>,
    /// When the oldest waiting one is tried next, ms.
    pub next_at: Option<u64>,
}

/// A store call in flight; resolves once it is answered (a write: once it is durable).
pub struct Pending<T>(Answer<T>);

enum Answer<T> {
    /// Answered when made (an inline read, a refused call).
    Ready(Option<Result<T, StoreError>>),
    /// Answered by a store thread.
    Later(oneshot::Receiver<Result<T, StoreError>>),
}

/// The answering side of a [`Pending`].
pub type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

impl<T> Pending<T> {
    /// A call and the reply that answers it.
    pub fn new() -> (Reply<T>, Pending<T>) {
        let (tx, rx) = oneshot::channel();
        (tx, Pending(Answer::Later(rx)))
    }

    /// A call answered already.
    pub fn ready(result: Result<T, StoreError>) -> Pending<T> {
        Pending(Answer::Ready(Some(result)))
    }

    /// Waits from synchronous code (start-up); never on a runtime worker.
    pub fn wait(self) -> Result<T, StoreError> {
        let result = match self.0 {
            Answer::Ready(r) => r.unwrap_or_else(|| Err(gone())),
            Answer::Later(rx) => rx.blocking_recv().unwrap_or_else(|_| Err(gone())),
        };
        health::record(&result);
        result
    }
}

/// What a call to a closed store answers.
const SHUT_DOWN: &str = "the store is shutting down";

fn gone() -> StoreError {
    StoreError::Unavailable(SHUT_DOWN.into())
}

impl<T: Unpin> std::future::Future for Pending<T> {
    type Output = Result<T, StoreError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let polled = match &mut self.0 {
            Answer::Ready(r) => std::task::Poll::Ready(r.take().unwrap_or_else(|| Err(gone()))),
            Answer::Later(rx) => std::pin::Pin::new(rx)
                .poll(cx)
                .map(|r| r.unwrap_or_else(|_| Err(gone()))),
        };
        if let std::task::Poll::Ready(result) = &polled {
            health::record(result);
        }
        polled
    }
}
