//! `a2a:edge/storage`, scoped to the request's instance, and the safety net that settles
//! tasks an invocation left behind.

use std::sync::Arc;

use a2a_protocol::TaskState;

use super::EdgeView;
use super::bindings::storage::Host;
use super::bindings::types::{self as wit, MessageClaim, MessageRecord, StoreError, TaskPage, TaskQuery, TaskRow};
use crate::app::App;
use crate::store::{self, PageStart, Store, TaskFilter, settled};

fn state_from_wit(s: wit::TaskState) -> TaskState {
    match s {
        wit::TaskState::Submitted => TaskState::Submitted,
        wit::TaskState::Working => TaskState::Working,
        wit::TaskState::InputRequired => TaskState::InputRequired,
        wit::TaskState::AuthRequired => TaskState::AuthRequired,
        wit::TaskState::Completed => TaskState::Completed,
        wit::TaskState::Failed => TaskState::Failed,
        wit::TaskState::Canceled => TaskState::Canceled,
        wit::TaskState::Rejected => TaskState::Rejected,
    }
}

fn state_to_wit(s: TaskState) -> wit::TaskState {
    match s {
        TaskState::Unspecified | TaskState::Submitted => wit::TaskState::Submitted,
        TaskState::Working => wit::TaskState::Working,
        TaskState::InputRequired => wit::TaskState::InputRequired,
        TaskState::AuthRequired => wit::TaskState::AuthRequired,
        TaskState::Completed => wit::TaskState::Completed,
        TaskState::Failed => wit::TaskState::Failed,
        TaskState::Canceled => wit::TaskState::Canceled,
        TaskState::Rejected => wit::TaskState::Rejected,
    }
}

fn row_to_wit(r: store::TaskRow) -> TaskRow {
    TaskRow {
        id: r.id,
        context_id: r.context_id,
        state: state_to_wit(r.state),
        skill: r.skill,
        created_at: r.created_at,
        updated_at: r.updated_at,
        version: r.version,
        body: r.body,
    }
}

fn error_to_wit(e: store::StoreError) -> StoreError {
    match e {
        store::StoreError::DuplicateMessage(r) => StoreError::DuplicateMessage(record_to_wit(r)),
        store::StoreError::Conflict(r) => StoreError::Conflict(row_to_wit(*r)),
        store::StoreError::NotFound => StoreError::NotFound,
        store::StoreError::Invalid(m) => StoreError::Invalid(m),
        store::StoreError::Unavailable(m) => StoreError::Unavailable(m),
    }
}

fn record_to_wit(r: store::MessageRecord) -> MessageRecord {
    MessageRecord { task_id: r.task_id, fingerprint: r.fingerprint }
}

fn claim_from_wit(c: MessageClaim) -> store::MessageClaim {
    let replaces = c.replaces.map(|r| store::MessageRecord { task_id: r.task_id, fingerprint: r.fingerprint });
    store::MessageClaim { message_id: c.message_id, fingerprint: c.fingerprint, replaces }
}

impl EdgeView<'_> {
    fn instance_id(&self) -> &str {
        &self.req.instance.record.id
    }

    fn row_from_wit(&self, r: TaskRow) -> store::TaskRow {
        store::TaskRow {
            id: r.id,
            instance_id: self.instance_id().to_owned(),
            context_id: r.context_id,
            state: state_from_wit(r.state),
            skill: r.skill,
            created_at: r.created_at,
            updated_at: r.updated_at,
            version: r.version,
            body: r.body,
            peer_id: Some(self.req.peer_id.clone()),
        }
    }

    /// Remembers a context this request works in (what its stream, if any, carries).
    fn touched(&mut self, context_id: String) {
        let mut contexts = self.req.contexts.lock().unwrap();
        if contexts.len() < 8 && !contexts.contains(&context_id) {
            contexts.push(context_id);
        }
    }

    fn wrote(&mut self, id: &str, version: u64) {
        self.req.note.with(|c| {
            c.task_id.get_or_insert_with(|| id.to_owned());
        });
        match self.req.written.iter_mut().find(|(t, _)| t == id) {
            Some(w) => w.1 = version,
            None => self.req.written.push((id.to_owned(), version)),
        }
    }
}

impl Host for EdgeView<'_> {
    async fn create_task(&mut self, row: TaskRow, claim: Option<MessageClaim>) -> wasmtime::Result<Result<(), StoreError>> {
        let row = self.row_from_wit(row);
        let (id, context) = (row.id.clone(), row.context_id.clone());
        let result = settled(self.req.app.store.create_task(row, claim.map(claim_from_wit))).await;
        if result.is_ok() {
            self.wrote(&id, 1);
            self.touched(context);
            self.req.app.activity.task_created(&self.req.peer_id, &id);
        }
        Ok(result.map_err(error_to_wit))
    }

    async fn update_task(&mut self, row: TaskRow, expected_version: u64, claim: Option<MessageClaim>) -> wasmtime::Result<Result<u64, StoreError>> {
        let row = self.row_from_wit(row);
        let (id, terminal) = (row.id.clone(), row.state.is_terminal());
        let failure = (row.state == TaskState::Failed).then(|| status_text(&row.body));
        let result = settled(self.req.app.store.update_task(row, expected_version, claim.map(claim_from_wit))).await;
        if let Ok(v) = result {
            if let Some(reason) = failure {
                tracing::warn!(instance = %self.instance_id(), task = %id, %reason, "task FAILED");
            }
            self.wrote(&id, v);
            if terminal {
                self.req.app.activity.task_settled(&id);
            }
        }
        Ok(result.map_err(error_to_wit))
    }

    fn get_task(&mut self, id: String) -> wasmtime::Result<Option<TaskRow>> {
        let row = self.req.app.store.get_task(&id, Some(self.instance_id())).ok().flatten();
        if let Some(r) = &row {
            self.touched(r.context_id.clone());
        }
        Ok(row.map(row_to_wit))
    }

    fn list_tasks(&mut self, q: TaskQuery) -> wasmtime::Result<Result<TaskPage, StoreError>> {
        let filter = TaskFilter {
            instance_id: Some(self.instance_id().to_owned()),
            context_id: q.context_id,
            state: q.state.map(state_from_wit),
            updated_after: q.updated_after,
            limit: q.page_size.clamp(1, 100),
            start: q.page_token.map_or(PageStart::First, PageStart::Token),
            max_bytes: Some(a2a_protocol::list::MAX_PAGE_BYTES),
            shape: Some((q.include_artifacts, q.history_length.map(i64::from))),
        };
        Ok(self
            .req
            .app
            .store
            .list_tasks(&filter)
            .map(|p| TaskPage { tasks: p.tasks.into_iter().map(row_to_wit).collect(), next_page_token: p.next_token, total_size: p.total })
            .map_err(error_to_wit))
    }

    fn find_message(&mut self, message_id: String) -> wasmtime::Result<Option<MessageRecord>> {
        Ok(self.req.app.store.find_message(self.instance_id(), &message_id).ok().flatten().map(record_to_wit))
    }
}

/// The text of a stored task's status message (what a FAILED task says went wrong).
fn status_text(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["status"]["message"]["parts"][0]["text"].as_str().unwrap_or("(no status message)").chars().take(300).collect()
}

/// Settles FAILED every task an invocation wrote last and left SUBMITTED or WORKING with no
/// turn running: the guest ended (trap, limit or bug) before settling it.
pub async fn settle_abandoned(app: &Arc<App>, instance_id: &str, written: &[(String, u64)], error: Option<String>) {
    for (task_id, version) in written {
        let Ok(Some(row)) = app.store.get_task(task_id, Some(instance_id)) else { continue };
        if row.version != *version || !matches!(row.state, TaskState::Submitted | TaskState::Working) {
            continue;
        }
        app.sessions.cancel_task(&super::sessions::task_key(instance_id, task_id));
        let why = match &error {
            Some(e) => format!("the agent component failed: {}", e.lines().next().unwrap_or("trap")),
            None => "the agent component ended before the task settled".to_owned(),
        };
        let now = crate::tasks::now_ms();
        let (body, update) = crate::tasks::failed(&row.body, now, &why).unwrap_or_else(|| (row.body.clone(), String::new()));
        let failed = store::TaskRow { state: TaskState::Failed, updated_at: now, body, ..row.clone() };
        if settled(app.store.update_task(failed, row.version, None)).await.is_ok() {
            app.activity.task_settled(task_id);
            let key = super::events::log_key(instance_id, task_id);
            if !update.is_empty() {
                app.events.publish(&key, crate::events::FrameKind::StatusUpdate, update);
            }
            app.events.close(&key);
            tracing::warn!(instance = %instance_id, task = %task_id, reason = %why, "task FAILED: settled an abandoned task");
        }
    }
}
