//! Durable state: inbound instance records, tasks (indexed columns + JSON body + CAS version),
//! the message-id index and context bindings. SQLite is the embedded implementation.

mod migrations;
mod sqlite;

pub use sqlite::SqliteStore;

use a2a_protocol::TaskState;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

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
}

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
            Self::DuplicateMessage(r) => write!(f, "message already recorded for task {}", r.task_id),
            Self::Conflict(r) => write!(f, "task {} changed concurrently (now version {})", r.id, r.version),
            Self::NotFound => write!(f, "not found"),
            Self::Invalid(m) | Self::Unavailable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StoreError {}

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
}

/// A stored inbound instance.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRecord {
    /// Id (`<slug>-<8 hex>`, or explicit).
    pub id: String,
    /// Agent name.
    pub name: String,
    /// Agent description.
    pub description: String,
    /// Agent version.
    pub version: String,
    /// JSON-RPC endpoint path.
    pub endpoint_path: String,
    /// Session preset.
    pub preset: String,
    /// Name of the secret holding the bearer token (never the token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_token_env: Option<String>,
    /// Routes are served.
    pub enabled: bool,
    /// Component name.
    pub component: String,
    /// Limits.
    pub limits: crate::config::Limits,
    /// Creation time, ms.
    pub created_at: u64,
    /// Last change, ms.
    pub updated_at: u64,
}

/// A stored outbound connection (SPEC §2.2).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionRecord {
    /// Id (`<slug>-<8 hex>`).
    pub id: String,
    /// Name (tools are named after it).
    pub name: String,
    /// The remote AgentCard URL (never changed by an update).
    pub agent_card_url: String,
    /// Name of the secret holding the bearer token sent to the remote (never the token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env: Option<String>,
    /// The preset whose sessions may use these tools (none: every preset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Connected and offering tools.
    pub enabled: bool,
    /// Longest a remote call may take, ms.
    pub timeout_ms: u64,
    /// Skills that register no tool.
    #[serde(default)]
    pub disabled_skills: Vec<String>,
    /// What a skill's tool shows instead of the remote's name and description.
    #[serde(default)]
    pub skill_overrides: std::collections::BTreeMap<String, SkillOverride>,
    /// Endpoints the remote card announces (and redirects) may reach internal addresses
    /// (loopback, private ranges); link-local ones stay refused.
    #[serde(default)]
    pub allow_private: bool,
    /// Creation time, ms.
    pub created_at: u64,
    /// Last change, ms.
    pub updated_at: u64,
}

/// A skill's tool description override.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillOverride {
    /// Shown name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Shown description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A write in flight; resolves once it is durable (committed).
pub type Pending<T> = oneshot::Receiver<Result<T, StoreError>>;

/// Waits for a write; a dropped writer reads as unavailable.
pub async fn settled<T>(p: Pending<T>) -> Result<T, StoreError> {
    p.await.unwrap_or_else(|_| Err(StoreError::Unavailable("the store is shutting down".into())))
}

/// What the runtime needs from a store. Reads answer at once; writes are queued and resolve
/// once committed.
pub trait Store: Send + Sync {
    /// Insert a task at version 1, applying the message claim atomically when given, and bind
    /// its context to its instance.
    fn create_task(&self, row: TaskRow, claim: Option<MessageClaim>) -> Pending<()>;
    /// Replace a task if its version is `expected` (applying the claim and refreshing the
    /// context binding); returns the new version.
    fn update_task(&self, row: TaskRow, expected: u64, claim: Option<MessageClaim>) -> Pending<u64>;
    /// Insert or replace an instance record.
    fn put_instance(&self, record: InstanceRecord) -> Pending<()>;
    /// Delete an instance record (its tasks stay readable by id from the control API).
    fn delete_instance(&self, id: String) -> Pending<()>;
    /// Insert or replace an outbound connection record.
    fn put_connection(&self, record: ConnectionRecord) -> Pending<()>;
    /// Delete an outbound connection record.
    fn delete_connection(&self, id: String) -> Pending<()>;
    /// Every outbound connection record.
    fn connections(&self) -> Result<Vec<ConnectionRecord>, StoreError>;
    /// Settle every SUBMITTED/WORKING task FAILED with `body_message`; returns how many.
    fn fail_unsettled(&self, now: u64, status_text: String) -> Pending<u64>;
    /// One task; scoped to an instance when `instance_id` is given.
    fn get_task(&self, id: &str, instance_id: Option<&str>) -> Result<Option<TaskRow>, StoreError>;
    /// A filtered page of tasks.
    fn list_tasks(&self, filter: &TaskFilter) -> Result<TaskPage, StoreError>;
    /// What the idempotency index holds for a message id on an instance.
    fn find_message(&self, instance_id: &str, message_id: &str) -> Result<Option<MessageRecord>, StoreError>;
    /// Conversations, newest `last_seen` first, optionally one instance's or one context's.
    fn contexts(&self, instance_id: Option<&str>, context_id: Option<&str>, limit: u32) -> Result<Vec<ContextSummary>, StoreError>;
    /// Task counts by instance and state.
    fn state_counts(&self) -> Result<Vec<(String, TaskState, u64)>, StoreError>;
    /// Every instance record.
    fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError>;
    /// Waits until every queued write is committed.
    fn flush(&self) -> Pending<()>;
}
