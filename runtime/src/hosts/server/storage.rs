//! `a2a:edge/storage`, scoped to the request's instance: every read and write names the
//! instance, so a guest never reaches another instance's tasks.

use std::sync::Arc;

use a2a_protocol::TaskState;
use tracing::Instrument;

use super::bindings::storage::{Host, StoredTask};
use super::bindings::types::{
    MessageClaim, MessageRecord, NewFrame, StoreError, TaskPage, TaskQuery, TaskRow, Written,
};
use super::services::{Books, CallNote, Invocation, Services};

use crate::activity::{Activity, Contexts};
use crate::events::EventHub;
use crate::holds::{Hold, Holds};
use crate::identity::claim_key;
use crate::records::SHARED_PRINCIPAL;
use crate::store::{self, PageStart, TaskFilter, Tasks};

/// The storage capability of one request.
pub struct StorageCtx {
    /// The tasks of the store.
    store: Arc<dyn Tasks>,
    /// Whether other nodes share the store (a held task is written at once).
    shared: bool,
    /// Told of tasks created and settled (a peer's active tasks).
    activity: Arc<Activity>,
    /// The instance every call is scoped to.
    instance_id: String,
    /// The caller, recorded with the tasks it creates.
    peer_id: String,
    /// The caller's principal: it sees only its own tasks and message ids (none: the runtime,
    /// which sees all).
    principal: Option<String>,
    /// Tasks this request wrote last (settled FAILED if left running).
    written: crate::settlement::Written,
    /// The frame logs in memory, told of the frames a write committed.
    events: Arc<EventHub>,
    /// Contexts this request worked in (what its stream, if any, carries).
    contexts: Contexts,
    /// The first task read or written, for the log.
    note: CallNote,
    /// Message ids reserved by requests (shared).
    holds: Holds,
    /// The ids this request reserved and has not written yet.
    held: Vec<Hold>,
    /// The task of `hold-task`, until it settles.
    unwritten: Option<(store::TaskRow, store::MessageClaim)>,
    /// The guard of the webhooks of push configs registered with a new task.
    webhooks: Arc<crate::push::Webhooks>,
    /// The request's trace, recorded with the tasks it creates.
    trace_id: Option<String>,
    /// The build of the component serving the request, which stamps the bodies it writes.
    writer: store::Writer,
}

impl StorageCtx {
    /// The capability of `call` served by `writer`, keeping `books`.
    pub fn prepare(
        s: &Services,
        call: &Invocation,
        books: &Books,
        writer: store::Writer,
    ) -> StorageCtx {
        StorageCtx {
            store: s.store.clone(),
            shared: s.store.is_shared(),
            activity: s.activity.clone(),
            instance_id: call.instance.record.id.clone(),
            peer_id: books.peer_id.clone(),
            principal: call.caller.as_ref().map(|c| c.principal.clone()),
            written: books.written.clone(),
            events: s.events.clone(),
            contexts: books.contexts.clone(),
            note: call.note.clone(),
            holds: s.holds.clone(),
            held: Vec::new(),
            unwritten: None,
            webhooks: s.webhooks.clone(),
            trace_id: crate::telemetry::trace::position(&tracing::Span::current())
                .map(|at| at.trace_id().to_string()),
            writer,
        }
    }

    /// Writes a new task; on success keeps the books.
    async fn create(
        &mut self,
        row: store::TaskRow,
        claim: Option<store::MessageClaim>,
        push: Option<store::PushConfig>,
    ) -> Result<(), StoreError> {
        let write = Write::of(&row, claim.as_ref());
        self.writing(&write);
        self.store
            .create_task(row, claim, push)
            .instrument(self.op("create-task"))
            .await?;
        self.activity.task_created(&self.peer_id, &write.id);
        self.touched(write.context.clone());
        self.wrote(write, 1);
        Ok(())
    }

    /// Notes the write about to be made as the task's latest, before the store commits it: a
    /// webhook delivery the commit starts continues this request's trace even when it begins
    /// before the store call returns.
    fn writing(&self, w: &Write) {
        self.note.task(&self.instance_id, &w.id, &w.context, true);
    }

    /// The books of a durable write: the log, the safety net, the peer's active tasks, and the
    /// claim's id released (it is durable now).
    fn wrote(&mut self, w: Write, version: u64) {
        if let Some(reason) = w.failure {
            let reason = crate::telemetry::logging::printable(&reason);
            tracing::warn!(instance = %self.instance_id, task = %w.id, %reason, "task FAILED");
        }
        self.written.wrote(&w.id, version, w.state);
        self.activity
            .task_written(&self.instance_id, &w.id, &w.context, w.state.as_str());
        if w.state.is_terminal() {
            self.activity.task_settled(&w.id);
        }
        if let Some(m) = w.released {
            self.held.retain(|h| h.message_id() != m);
        }
    }

    /// Ends the request's claims: the message ids it holds are released and a task it held
    /// unwritten is forgotten. Called when its invocation returns, so a kept instance's store
    /// makes no other request wait.
    pub fn end(&mut self) {
        self.held.clear();
        self.unwritten = None;
    }

    /// This instance's task `id` if the caller sees it, noted as read.
    async fn read(&mut self, id: String) -> Result<Option<store::TaskRow>, StoreError> {
        let row = self
            .store
            .get_task(id, Some(self.instance_id.clone()))
            .instrument(self.op("get-task"))
            .await?
            .filter(|r| self.sees(r));
        if let Some(r) = &row {
            self.touched(r.context_id.clone());
            self.note
                .task(&self.instance_id, &r.id, &r.context_id, false);
        }
        Ok(row)
    }

    /// The span of one store operation.
    fn op(&self, operation: &'static str) -> tracing::Span {
        crate::telemetry::trace::store_span(self.store.system(), operation)
    }

    /// Who owns what this request writes.
    fn owner(&self) -> &str {
        self.principal.as_deref().unwrap_or(SHARED_PRINCIPAL)
    }

    /// `row` as stored for this request (a task it creates records its trace).
    fn stored(&self, row: TaskRow) -> store::TaskRow {
        store::TaskRow {
            trace_id: self.trace_id.clone(),
            stamp: self.writer.stamp(&row.body),
            ..row.stored(&self.instance_id, &self.peer_id, self.owner())
        }
    }

    /// A claim under the owner's key.
    fn claim(&self, c: MessageClaim) -> store::MessageClaim {
        let c: store::MessageClaim = c.into();
        store::MessageClaim {
            message_id: claim_key(self.owner(), c.message_id),
            ..c
        }
    }

    /// Whether the caller may see `row`.
    fn sees(&self, row: &store::TaskRow) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == row.principal)
    }

    fn touched(&self, context_id: String) {
        let mut contexts = self.contexts.lock().unwrap();
        if contexts.len() < 8 && !contexts.contains(&context_id) {
            contexts.push(context_id);
        }
    }
}

/// Most frames one write may append (a status change brings one or two).
pub const MAX_FRAMES_PER_WRITE: usize = 16;

/// What the books of a write need of its row and claim.
struct Write {
    id: String,
    context: String,
    state: TaskState,
    /// The status text of a FAILED task (logged).
    failure: Option<String>,
    released: Option<String>,
}

impl Write {
    fn of(row: &store::TaskRow, claim: Option<&store::MessageClaim>) -> Write {
        Write {
            id: row.id.clone(),
            context: row.context_id.clone(),
            state: row.state,
            failure: (row.state == TaskState::Failed).then(|| status_text(&row.body)),
            released: claim.map(|c| c.message_id.clone()),
        }
    }
}

/// The text of a stored task's status message (what a FAILED task says went wrong).
fn status_text(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("(no status message)")
        .chars()
        .take(300)
        .collect()
}

/// A stored row as the guest reads it; an unreadable one as the store error it is.
fn to_guest(row: store::TaskRow) -> Result<TaskRow, StoreError> {
    TaskRow::try_from(row).map_err(Into::into)
}

impl Host for StorageCtx {
    async fn create_task(
        &mut self,
        row: TaskRow,
        claim: Option<MessageClaim>,
        push_config: Option<String>,
    ) -> wasmtime::Result<Result<(), StoreError>> {
        let row = self.stored(row);
        let push = match push_config {
            Some(json) => {
                match super::push::admitted(&self.webhooks, &self.instance_id, &json).await {
                    Ok(c) if c.task_id == row.id => Some(c),
                    Ok(c) => {
                        return Ok(Err(StoreError::Invalid(format!(
                            "the push config names task {}, not {}",
                            c.task_id, row.id
                        ))));
                    }
                    Err(e) => return Ok(Err(e)),
                }
            }
            None => None,
        };
        let claim = claim.map(|c| self.claim(c));
        Ok(self.create(row, claim, push).await)
    }

    async fn hold_task(
        &mut self,
        row: TaskRow,
        claim: MessageClaim,
    ) -> wasmtime::Result<Result<(), StoreError>> {
        let (row, claim) = (self.stored(row), self.claim(claim));
        // Settled already, or on a store other nodes share (where a resend to another node must
        // find the claim while the turn runs): written now.
        if !row.state.is_running() || self.shared {
            return Ok(self.create(row, Some(claim), None).await);
        }
        if self.unwritten.is_some() {
            return Ok(Err(StoreError::Invalid(
                "a request holds one unwritten task at a time".into(),
            )));
        }
        self.unwritten = Some((row, claim));
        Ok(Ok(()))
    }

    async fn update_task(
        &mut self,
        row: TaskRow,
        expected_version: u64,
        claim: Option<MessageClaim>,
        frames: Vec<NewFrame>,
    ) -> wasmtime::Result<Result<Written, StoreError>> {
        let row = self.stored(row);
        if let Some((held, _)) = self.unwritten.as_mut().filter(|(h, _)| h.id == row.id) {
            let held_write = Written {
                version: 1,
                first_seq: 1,
            };
            if expected_version != 1 {
                return Ok(Err(StoreError::Invalid(format!(
                    "task {} is not written yet: its version is 1",
                    row.id
                ))));
            }
            if row.state.is_running() {
                *held = row;
                return Ok(Ok(held_write));
            }
            let (_, claim) = self.unwritten.take().expect("matched above");
            return Ok(self
                .create(row, Some(claim), None)
                .await
                .map(|()| held_write));
        }
        if frames.len() > MAX_FRAMES_PER_WRITE {
            return Ok(Err(StoreError::Invalid(format!(
                "a write appends at most {MAX_FRAMES_PER_WRITE} frames, not {}",
                frames.len()
            ))));
        }
        let frames: Vec<store::NewFrame> = frames.into_iter().map(Into::into).collect();
        let claim = claim.map(|c| self.claim(c));
        let write = Write::of(&row, claim.as_ref());
        self.writing(&write);
        let key = crate::records::task_key(&self.instance_id, &row.id);
        let result = self
            .store
            .update_task(row, expected_version, claim, frames.clone())
            .instrument(self.op("update-task"))
            .await;
        match &result {
            Ok(w) => {
                self.wrote(write, w.version);
                self.events
                    .committed(&key, store::numbered(w.first_seq, frames));
            }
            Err(store::StoreError::Unavailable(_)) => self.written.store_failed(),
            Err(_) => {}
        }
        Ok(result.map(Into::into).map_err(Into::into))
    }

    async fn get_task(
        &mut self,
        id: String,
    ) -> wasmtime::Result<Result<Option<TaskRow>, StoreError>> {
        Ok(self
            .read(id)
            .await
            .map(|row| row.and_then(|r| to_guest(r).ok())))
    }

    async fn read_task(
        &mut self,
        id: String,
    ) -> wasmtime::Result<Result<Option<StoredTask>, StoreError>> {
        Ok(self.read(id).await.map(|row| {
            let row = row?;
            let verbatim = self.writer.wrote(&row);
            to_guest(row).ok().map(|row| StoredTask { row, verbatim })
        }))
    }

    async fn list_tasks(&mut self, q: TaskQuery) -> wasmtime::Result<Result<TaskPage, StoreError>> {
        let filter = TaskFilter {
            instance_id: Some(self.instance_id.clone()),
            context_id: q.context_id,
            principal: self.principal.clone(),
            state: q.state.map(Into::into),
            updated_after: q.updated_after,
            limit: q.page_size.clamp(1, 100),
            start: q.page_token.map_or(PageStart::First, PageStart::Token),
            max_bytes: Some(a2a_protocol::list::MAX_PAGE_BYTES),
            shape: Some((q.include_artifacts, q.history_length.map(i64::from))),
        };
        let page = match self
            .store
            .list_tasks(filter)
            .instrument(self.op("list-tasks"))
            .await
        {
            Ok(p) => p,
            Err(e) => return Ok(Err(e.into())),
        };
        let tasks = page
            .tasks
            .into_iter()
            .map(to_guest)
            .collect::<Result<Vec<_>, _>>();
        Ok(tasks.map(|tasks| TaskPage {
            tasks,
            next_page_token: page.next_token,
            total_size: page.total,
        }))
    }

    async fn find_message(
        &mut self,
        message_id: String,
    ) -> wasmtime::Result<Result<Option<MessageRecord>, StoreError>> {
        let message_id = claim_key(self.owner(), message_id);
        if !self.held.iter().any(|h| h.message_id() == message_id) {
            let hold = self.holds.hold(&self.instance_id, &message_id).await;
            self.held.push(hold);
        }
        Ok(self
            .store
            .find_message(self.instance_id.clone(), message_id)
            .instrument(self.op("find-message"))
            .await
            .map(|r| r.map(Into::into))
            .map_err(Into::into))
    }
}

#[cfg(test)]
mod tests {
    use super::super::bindings::types::TaskState as WitState;
    use super::*;
    use crate::store::Store;
    use crate::store::memory::MemoryStore;

    pub fn ctx(store: Arc<dyn Store>, instance: &str) -> StorageCtx {
        StorageCtx {
            shared: store.is_shared(),
            store,
            activity: Arc::default(),
            instance_id: instance.into(),
            peer_id: "10.0.0.1@i".into(),
            principal: None,
            written: Default::default(),
            events: Arc::default(),
            contexts: Contexts::default(),
            note: CallNote::default(),
            holds: Holds::default(),
            held: Vec::new(),
            unwritten: None,
            webhooks: Arc::new(crate::push::Webhooks::new(
                false,
                std::time::Duration::from_secs(1),
            )),
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
            writer: store::Writer::of("built-in"),
        }
    }

    fn row(id: &str, state: WitState, version: u64) -> TaskRow {
        let body =
            format!(r#"{{"id":"{id}","contextId":"c","status":{{"state":"TASK_STATE_WORKING"}}}}"#);
        TaskRow {
            id: id.into(),
            context_id: "c".into(),
            state,
            skill: "chat".into(),
            created_at: 1,
            updated_at: 1,
            version,
            body,
        }
    }

    #[tokio::test]
    async fn writes_compare_and_swap_and_are_scoped_to_the_instance() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let (mut mine, mut theirs) = (ctx(store.clone(), "i"), ctx(store.clone(), "j"));
        mine.create_task(row("t", WitState::Working, 1), None, None)
            .await
            .unwrap()
            .unwrap();
        let stored = store.get_task("t".into(), None).await.unwrap().unwrap();
        assert_eq!(
            stored.trace_id.as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736"),
            "a task records the trace that created it"
        );
        assert!(matches!(
            mine.update_task(row("t", WitState::Completed, 2), 1, None, vec![])
                .await
                .unwrap(),
            Ok(Written { version: 2, .. })
        ));
        match mine
            .update_task(row("t", WitState::Failed, 2), 1, None, vec![])
            .await
            .unwrap()
        {
            Err(StoreError::Conflict(current)) => {
                assert_eq!((current.version, current.state), (2, WitState::Completed))
            }
            other => panic!("{other:?}"),
        }
        assert!(
            theirs
                .get_task("t".into())
                .await
                .unwrap()
                .unwrap()
                .is_none(),
            "another instance never sees the task"
        );
        assert!(matches!(
            theirs
                .update_task(row("t", WitState::Failed, 3), 2, None, vec![])
                .await
                .unwrap(),
            Err(StoreError::NotFound)
        ));
        assert_eq!(
            mine.get_task("t".into())
                .await
                .unwrap()
                .unwrap()
                .unwrap()
                .state,
            WitState::Completed
        );
        assert_eq!(
            mine.contexts.lock().unwrap().as_slice(),
            ["c"],
            "the request worked in context c"
        );
        assert_eq!(
            mine.written.take(),
            [("t".to_owned(), 2, TaskState::Completed)],
            "the last write of each task is remembered"
        );
        assert_eq!(mine.note.take().task_id.as_deref(), Some("t"));
    }

    #[tokio::test]
    async fn a_body_reads_verbatim_only_in_the_build_that_wrote_it() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let mut built = ctx(store.clone(), "i");
        let mut rebuilt = StorageCtx {
            writer: store::Writer::of("rebuilt"),
            ..ctx(store.clone(), "i")
        };
        built
            .create_task(row("t", WitState::Working, 1), None, None)
            .await
            .unwrap()
            .unwrap();
        async fn verbatim(c: &mut StorageCtx) -> (bool, String) {
            let read = c.read_task("t".into()).await.unwrap().unwrap().unwrap();
            (read.verbatim, read.row.body)
        }
        assert!(verbatim(&mut built).await.0, "the build that wrote it");
        assert!(!verbatim(&mut rebuilt).await.0, "another build parses it");
        // The runtime rewrites the body when it settles the task FAILED.
        store.fail_unsettled(5, "gone".into()).await.unwrap();
        let (again, body) = verbatim(&mut built).await;
        assert!(body.contains("gone") && !again, "a body the runtime wrote");
    }

    #[tokio::test]
    async fn a_principal_sees_only_its_own_tasks_and_message_ids() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let of = |p: Option<&str>| StorageCtx {
            principal: p.map(str::to_owned),
            ..ctx(store.clone(), "i")
        };
        let (mut alice, mut bob, mut runtime) =
            (of(Some("key:alice")), of(Some("key:bob")), of(None));
        let claim = Some(MessageClaim {
            message_id: "m".into(),
            fingerprint: "f".into(),
            replaces: None,
        });
        alice
            .create_task(row("a", WitState::Working, 1), claim.clone(), None)
            .await
            .unwrap()
            .unwrap();
        /// Whether `c` gets task `a`, how many it lists, whether it finds the claim of `m`.
        async fn seen(c: &mut StorageCtx) -> (bool, u32, bool) {
            let got = c.get_task("a".into()).await.unwrap().unwrap().is_some();
            let query = TaskQuery {
                context_id: None,
                state: None,
                updated_after: None,
                page_size: 10,
                page_token: None,
                include_artifacts: false,
                history_length: None,
            };
            let listed = c.list_tasks(query).await.unwrap().unwrap().total_size;
            let claimed = c.find_message("m".into()).await.unwrap().unwrap().is_some();
            (got, listed, claimed)
        }
        assert_eq!(seen(&mut alice).await, (true, 1, true));
        assert_eq!(
            seen(&mut bob).await,
            (false, 0, false),
            "bob sees nothing of alice's"
        );
        assert_eq!(
            seen(&mut runtime).await,
            (true, 1, false),
            "the runtime sees every task; message ids stay each principal's"
        );
        // Bob may use the same message id: it is his own.
        bob.create_task(row("b", WitState::Working, 1), claim, None)
            .await
            .unwrap()
            .unwrap();
        let stored = store.get_task("b".into(), None).await.unwrap().unwrap();
        assert_eq!(stored.principal, "key:bob");
    }

    #[tokio::test]
    async fn message_claims_are_the_idempotency_index() {
        let mut c = ctx(Arc::new(MemoryStore::default()), "i");
        let claim = |replaces: Option<MessageRecord>| {
            Some(MessageClaim {
                message_id: "m".into(),
                fingerprint: "f".into(),
                replaces,
            })
        };
        c.create_task(row("a", WitState::Working, 1), claim(None), None)
            .await
            .unwrap()
            .unwrap();
        let recorded = c
            .find_message("m".into())
            .await
            .unwrap()
            .unwrap()
            .expect("the claim is recorded");
        assert_eq!(recorded.task_id, "a");
        match c
            .create_task(row("b", WitState::Working, 1), claim(None), None)
            .await
            .unwrap()
        {
            Err(StoreError::DuplicateMessage(now)) => assert_eq!(now.task_id, "a"),
            other => panic!("a second claim on the same id must lose: {other:?}"),
        }
        assert!(
            c.get_task("b".into()).await.unwrap().unwrap().is_none(),
            "the losing write wrote nothing"
        );
        c.create_task(row("b", WitState::Working, 1), claim(Some(recorded)), None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            c.find_message("m".into())
                .await
                .unwrap()
                .unwrap()
                .unwrap()
                .task_id,
            "b"
        );
    }

    #[tokio::test]
    async fn listing_pages_this_instance_only() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let mut c = ctx(store.clone(), "i");
        for i in 0..3 {
            c.create_task(row(&format!("t{i}"), WitState::Working, 1), None, None)
                .await
                .unwrap()
                .unwrap();
        }
        ctx(store, "j")
            .create_task(row("other", WitState::Working, 1), None, None)
            .await
            .unwrap()
            .unwrap();
        let q = |token: Option<String>| TaskQuery {
            context_id: None,
            state: Some(WitState::Working),
            updated_after: None,
            page_size: 2,
            page_token: token,
            include_artifacts: false,
            history_length: None,
        };
        let first = c.list_tasks(q(None)).await.unwrap().unwrap();
        assert_eq!((first.tasks.len(), first.total_size), (2, 3));
        let second = c
            .list_tasks(q(first.next_page_token))
            .await
            .unwrap()
            .unwrap();
        assert_eq!((second.tasks.len(), second.next_page_token), (1, None));
        assert!(matches!(
            c.list_tasks(q(Some("bogus".into()))).await.unwrap(),
            Err(StoreError::Invalid(_))
        ));
    }
}
