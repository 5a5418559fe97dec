//! The task log: a task write on the request's path appends one record to `task_log` (one
//! B-tree, its right edge), and the writer folds the records into `tasks`, its listing indexes,
//! the kept counts and conversation summaries, the message ids and the frame log later, many at a
//! time, in one transaction that also empties the log. A write then costs a few pages however
//! many listing orders exist, and a fold's pages are shared by the records it folds.
//!
//! Readers see an unfolded write at once: a task and a message id from [`Unfolded`] (which the
//! writer fills before it answers the write), every other read after a fold
//! (`SqliteStore::read`). A crash between the append and the fold loses nothing: the store folds
//! what the log holds when it opens.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use a2a_protocol::sse::Member;
use rusqlite::{Connection, OptionalExtension, params};

use super::reads::{TASK_COLUMNS, find_message, task_row};
use super::rows::{add_to_context, log_frames, record_claim};
use crate::store::{Lease, MessageClaim, MessageRecord, NewFrame, StoreError, TaskRow, Written};

/// Folded tasks whose latest row stays in memory for `get_task`, at most, and the bytes of their
/// bodies at most.
pub const RECENT: usize = 1024;
pub const RECENT_BYTES: usize = 16 << 20;

/// Records that start a fold at the end of a group commit.
pub const FOLD_AT: usize = 64;
/// How long the writer waits for more writes before it folds what the log holds.
pub const FOLD_IDLE: std::time::Duration = std::time::Duration::from_millis(100);

/// The message ids claimed by unfolded writes, by instance, then id (looked up without a copy
/// of either).
#[derive(Default)]
struct Claims(HashMap<String, HashMap<String, MessageRecord>>);

impl Claims {
    fn get(&self, instance_id: &str, message_id: &str) -> Option<MessageRecord> {
        self.0.get(instance_id)?.get(message_id).cloned()
    }

    /// Notes `r`'s claim, if it has one.
    fn note(&mut self, r: &Record) {
        if let Some(claim) = &r.claim {
            let record = MessageRecord {
                task_id: r.row.id.clone(),
                fingerprint: claim.fingerprint.clone(),
            };
            self.0
                .entry(r.row.instance_id.clone())
                .or_default()
                .insert(claim.message_id.clone(), record);
        }
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// What readers see of the writes not folded yet: each task's latest row and the message ids
/// claimed.
#[derive(Default)]
pub struct Unfolded {
    seen: Mutex<Seen>,
    records: AtomicUsize,
}

#[derive(Default)]
struct Seen {
    tasks: HashMap<String, TaskRow>,
    messages: Claims,
    /// Folded tasks' latest rows, the most recently folded [`RECENT`] (by the fold that put
    /// them here: an entry is evicted only by its own turn in `order`).
    recent: HashMap<String, (u64, TaskRow)>,
    order: std::collections::VecDeque<(u64, String)>,
    folds: u64,
    /// The bodies' bytes in `recent`.
    bytes: usize,
}

impl Seen {
    /// Drops a task's folded row.
    fn forget(&mut self, id: &str) {
        if let Some((_, row)) = self.recent.remove(id) {
            self.bytes -= row.body.len();
        }
    }

    /// Drops every folded row.
    fn forget_all(&mut self) {
        self.recent.clear();
        self.order.clear();
        self.bytes = 0;
    }

    /// Keeps `rows`, folded just now, for reads; drops the oldest past [`RECENT`].
    fn keep(&mut self, rows: impl IntoIterator<Item = (String, TaskRow)>) {
        self.folds += 1;
        for (id, row) in rows {
            self.order.push_back((self.folds, id.clone()));
            self.bytes += row.body.len();
            if let Some((_, old)) = self.recent.insert(id, (self.folds, row)) {
                self.bytes -= old.body.len();
            }
        }
        while self.recent.len() > RECENT || self.bytes > RECENT_BYTES {
            let Some((fold, id)) = self.order.pop_front() else {
                break;
            };
            if self.recent.get(&id).is_some_and(|(at, _)| *at == fold) {
                self.forget(&id);
            }
        }
        if self.order.len() > 2 * RECENT {
            let recent = &self.recent;
            self.order
                .retain(|(fold, id)| recent.get(id).is_some_and(|(at, _)| at == fold));
        }
    }
}

impl Unfolded {
    /// The task's latest row, if it is unfolded or among the recently folded (of `instance_id`,
    /// when named).
    pub fn task(&self, id: &str, instance_id: Option<&str>) -> Option<TaskRow> {
        let seen = self.seen.lock().unwrap();
        let row = seen
            .tasks
            .get(id)
            .or_else(|| seen.recent.get(id).map(|(_, row)| row))?;
        instance_id
            .is_none_or(|i| i == row.instance_id)
            .then(|| row.clone())
    }

    /// The unfolded claim of a message id.
    pub fn message(&self, instance_id: &str, message_id: &str) -> Option<MessageRecord> {
        self.seen
            .lock()
            .unwrap()
            .messages
            .get(instance_id, message_id)
    }

    /// Whether every committed write is folded.
    pub fn is_empty(&self) -> bool {
        self.records.load(Ordering::Acquire) == 0
    }
}

/// One appended write.
struct Record {
    row: TaskRow,
    /// The write created the task.
    created: bool,
    /// The task's latest frame sequence id after this write.
    last_seq: u64,
    lease_node: Option<String>,
    lease_until: Option<i64>,
    claim: Option<MessageClaim>,
    frames: Vec<NewFrame>,
}

impl Record {
    fn new(
        lease: &Lease,
        row: TaskRow,
        created: bool,
        last_seq: u64,
        claim: Option<&MessageClaim>,
        frames: Vec<NewFrame>,
    ) -> Record {
        Record {
            lease_node: Some(lease.node.clone()),
            lease_until: lease.until(row.state, row.updated_at),
            row,
            created,
            last_seq,
            claim: claim.cloned(),
            frames,
        }
    }
}

/// The writer's side of the log: the records not folded yet, in order.
pub struct Log {
    records: Vec<Record>,
    /// Each unfolded task's latest record.
    latest: HashMap<String, usize>,
    messages: Claims,
    /// Records readers see already (those before were published by an earlier commit).
    published: usize,
    /// The group being committed folded the records readers see.
    folded: bool,
    /// What readers see is replaced at the next commit (the log was read back).
    reloaded: bool,
    /// Tasks written outside the log in the group being committed (all of them: `forgot_all`).
    forgotten: Vec<String>,
    forgot_all: bool,
    shared: std::sync::Arc<Unfolded>,
}

impl Log {
    /// Reads what the log holds (written before a crash) and folds it.
    pub fn open(c: &mut Connection, shared: std::sync::Arc<Unfolded>) -> Result<Log, StoreError> {
        let mut log = Log {
            records: Vec::new(),
            latest: HashMap::new(),
            messages: Claims::default(),
            published: 0,
            folded: false,
            reloaded: false,
            forgotten: Vec::new(),
            forgot_all: false,
            shared,
        };
        log.reload(c)?;
        let tx = c.transaction()?;
        log.fold(&tx)?;
        tx.commit()?;
        log.committed();
        Ok(log)
    }

    /// Records not folded yet.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// The message id's claim as the writer sees it.
    pub fn message(
        &self,
        c: &Connection,
        instance_id: &str,
        message_id: &str,
    ) -> rusqlite::Result<Option<MessageRecord>> {
        match self.messages.get(instance_id, message_id) {
            Some(m) => Ok(Some(m)),
            None => find_message(c, instance_id, message_id),
        }
    }

    /// Appends a new task; refuses an id a task has already.
    pub fn create(
        &mut self,
        c: &Connection,
        lease: &Lease,
        row: &TaskRow,
        claim: Option<&MessageClaim>,
    ) -> Result<(), StoreError> {
        let taken = self.latest.contains_key(&row.id)
            || c.prepare_cached("SELECT 1 FROM tasks WHERE id = ?1")?
                .exists(params![row.id])?;
        if taken {
            return Err(StoreError::Invalid(format!(
                "task {} already exists",
                row.id
            )));
        }
        let row = TaskRow {
            version: 1,
            ..row.clone()
        };
        self.append(c, Record::new(lease, row, true, 0, claim, Vec::new()))
    }

    /// Appends a task's update, if it is still at version `expected`.
    pub fn update(
        &mut self,
        c: &Connection,
        lease: &Lease,
        row: &TaskRow,
        expected: u64,
        claim: Option<&MessageClaim>,
        frames: &[NewFrame],
    ) -> Result<Written, StoreError> {
        let current = match self.latest.get(&row.id).map(|&i| &self.records[i]) {
            Some(r) if r.row.instance_id == row.instance_id => Some((r.row.clone(), r.last_seq)),
            Some(_) => None,
            None => c
                .prepare_cached(&format!(
                    "SELECT {TASK_COLUMNS}, last_seq FROM tasks WHERE id = ?1 AND instance_id = ?2"
                ))?
                .query_row(params![row.id, row.instance_id], |r| {
                    Ok((task_row(r)?, r.get::<_, i64>(13)? as u64))
                })
                .optional()?,
        };
        let Some((current, last_seq)) = current else {
            return Err(StoreError::NotFound);
        };
        if current.version != expected {
            return Err(StoreError::Conflict(Box::new(current)));
        }
        // What an update never changes is the task's as it was created.
        let row = TaskRow {
            version: expected + 1,
            created_at: current.created_at,
            peer_id: current.peer_id,
            principal: current.principal,
            trace_id: current.trace_id,
            ..row.clone()
        };
        let last = last_seq + frames.len() as u64;
        let record = Record::new(lease, row, false, last, claim, frames.to_vec());
        self.append(c, record)?;
        Ok(Written {
            version: expected + 1,
            first_seq: last_seq + 1,
        })
    }

    fn append(&mut self, c: &Connection, r: Record) -> Result<(), StoreError> {
        let frames_json = (!r.frames.is_empty())
            .then(|| {
                let all: Vec<(i16, &str)> = r
                    .frames
                    .iter()
                    .map(|f| (f.kind.number(), f.json.as_str()))
                    .collect();
                serde_json::to_string(&all)
            })
            .transpose()
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        c.prepare_cached(
            "INSERT INTO task_log (id, instance_id, context_id, state, skill, created_at, updated_at, version, body, peer_id, principal, trace_id,
                 stamp, created, last_seq, lease_node, lease_until, claim_message_id, claim_fingerprint, frames)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
        )?
        .execute(params![
            r.row.id, r.row.instance_id, r.row.context_id, r.row.state.number(), r.row.skill,
            r.row.created_at as i64, r.row.updated_at as i64, r.row.version as i64, r.row.body,
            r.row.peer_id, r.row.principal, r.row.trace_id, r.row.stamp as i64, r.created, r.last_seq as i64,
            r.lease_node, r.lease_until, r.claim.as_ref().map(|m| &m.message_id),
            r.claim.as_ref().map(|m| &m.fingerprint), frames_json
        ])?;
        self.push(r);
        Ok(())
    }

    fn push(&mut self, r: Record) {
        self.messages.note(&r);
        self.latest.insert(r.row.id.clone(), self.records.len());
        self.records.push(r);
    }

    /// Applies every record to the tables and empties the log, in the caller's transaction:
    /// each task's latest row once, then each record's claim and frames in order.
    pub fn fold(&mut self, c: &Connection) -> Result<(), StoreError> {
        if self.records.is_empty() {
            return Ok(());
        }
        let created: std::collections::HashSet<&str> = self
            .records
            .iter()
            .filter(|r| r.created)
            .map(|r| r.row.id.as_str())
            .collect();
        let mut written = std::collections::HashSet::new();
        for r in &self.records {
            if written.insert(r.row.id.as_str()) {
                let last = &self.records[self.latest[&r.row.id]];
                write_row(c, last, created.contains(r.row.id.as_str()))?;
            }
        }
        for r in &self.records {
            if let Some(claim) = &r.claim {
                record_claim(c, &r.row.instance_id, claim, &r.row.id)?;
            }
            log_frames(c, &r.row.id, r.last_seq, &r.frames)?;
        }
        c.prepare_cached("DELETE FROM task_log")?.execute([])?;
        self.records.clear();
        self.latest.clear();
        self.messages.clear();
        self.published = 0;
        self.folded = true;
        Ok(())
    }

    /// A write outside the log changes the task: readers no longer take its row from memory
    /// (from now, and once the group commits, whatever the group folded).
    pub fn forget(&mut self, id: &str) {
        self.shared.seen.lock().unwrap().forget(id);
        self.forgotten.push(id.to_owned());
    }

    /// Writes outside the log change any number of tasks.
    pub fn forget_all(&mut self) {
        self.shared.seen.lock().unwrap().forget_all();
        self.forgot_all = true;
    }

    /// The group committed: readers now see its records (and no longer the folded ones).
    pub fn committed(&mut self) {
        let new = &self.records[self.published.min(self.records.len())..];
        if !self.folded
            && !self.reloaded
            && !self.forgot_all
            && new.is_empty()
            && self.forgotten.is_empty()
        {
            return;
        }
        let mut seen = self.shared.seen.lock().unwrap();
        if std::mem::take(&mut self.reloaded) {
            *seen = Seen::default();
            self.folded = false;
        } else if std::mem::take(&mut self.folded) {
            let folded = std::mem::take(&mut seen.tasks);
            seen.keep(folded);
            seen.messages.clear();
        }
        for id in self.forgotten.drain(..) {
            seen.forget(&id);
        }
        if std::mem::take(&mut self.forgot_all) {
            seen.forget_all();
        }
        for r in new {
            seen.messages.note(r);
            seen.tasks.insert(r.row.id.clone(), r.row.clone());
        }
        self.published = self.records.len();
        self.shared
            .records
            .store(self.records.len(), Ordering::Release);
    }

    /// A transaction failed: the writer reads the log back as `c` sees it now (readers see the
    /// same after the next commit).
    pub fn rolled_back(&mut self, c: &Connection) {
        if let Err(e) = self.reload(c) {
            tracing::error!(error = %e, "cannot read the task log back after a failed write; the next start folds it");
        }
    }

    /// Folds in a savepoint of the caller's transaction; a failed fold leaves the log as it was.
    pub fn fold_in(&mut self, c: &Connection) -> Result<(), StoreError> {
        if self.records.is_empty() {
            return Ok(());
        }
        c.prepare_cached("SAVEPOINT fold")?.execute([])?;
        let folded = self.fold(c);
        if folded.is_err() {
            c.prepare_cached("ROLLBACK TO fold")?.execute([])?;
        }
        c.prepare_cached("RELEASE fold")?.execute([])?;
        if folded.is_err() {
            self.rolled_back(c);
        }
        folded
    }

    /// Reads the log's records from the table; readers see them after the next commit.
    fn reload(&mut self, c: &Connection) -> Result<(), StoreError> {
        self.records.clear();
        self.latest.clear();
        self.messages.clear();
        let mut stmt = c.prepare(&format!(
            "SELECT {TASK_COLUMNS}, created, last_seq, lease_node, lease_until, claim_message_id, claim_fingerprint, frames
             FROM task_log ORDER BY seq"
        ))?;
        let rows = stmt.query_map([], |r| {
            let claim = match (r.get::<_, Option<String>>(17)?, r.get(18)?) {
                (Some(message_id), Some(fingerprint)) => Some(MessageClaim {
                    message_id,
                    fingerprint,
                    replaces: None,
                }),
                _ => None,
            };
            Ok((
                Record {
                    row: task_row(r)?,
                    created: r.get(13)?,
                    last_seq: r.get::<_, i64>(14)? as u64,
                    lease_node: r.get(15)?,
                    lease_until: r.get(16)?,
                    claim,
                    frames: Vec::new(),
                },
                r.get::<_, Option<String>>(19)?,
            ))
        })?;
        for row in rows {
            let (mut record, frames) = row?;
            if let Some(frames) = frames {
                record.frames = parse_frames(&frames)?;
            }
            self.push(record);
        }
        self.published = 0;
        self.reloaded = true;
        Ok(())
    }
}

fn parse_frames(json: &str) -> Result<Vec<NewFrame>, StoreError> {
    let all: Vec<(i16, String)> = serde_json::from_str(json)
        .map_err(|e| StoreError::Invalid(format!("a task log record's frames: {e}")))?;
    all.into_iter()
        .map(|(kind, json)| {
            let kind = Member::from_number(kind).ok_or_else(|| {
                StoreError::Invalid(format!("a task log record's frame kind {kind}"))
            })?;
            Ok(NewFrame { kind, json })
        })
        .collect()
}

/// Writes a task's latest record into `tasks` (inserted when a record created it).
fn write_row(c: &Connection, r: &Record, created: bool) -> Result<(), StoreError> {
    let row = &r.row;
    if created {
        c.prepare_cached(
            "INSERT INTO tasks (id, instance_id, context_id, state, skill, created_at, updated_at, version, peer_id, principal, body, lease_node, lease_until, trace_id, last_seq, stamp)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        )?
        .execute(params![row.id, row.instance_id, row.context_id, row.state.number(), row.skill, row.created_at as i64, row.updated_at as i64, row.version as i64, row.peer_id, row.principal, row.body, r.lease_node, r.lease_until, row.trace_id, r.last_seq as i64, row.stamp as i64])?;
        add_to_context(c, row)?;
    } else {
        c.prepare_cached(
            "UPDATE tasks SET context_id = ?3, state = ?4, skill = ?5, updated_at = ?6, version = ?7, body = ?8,
                 last_seq = ?9, lease_node = ?10, lease_until = ?11, stamp = ?12
             WHERE id = ?1 AND instance_id = ?2",
        )?
        .execute(params![row.id, row.instance_id, row.context_id, row.state.number(), row.skill, row.updated_at as i64, row.version as i64, row.body, r.last_seq as i64, r.lease_node, r.lease_until, row.stamp as i64])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, body_bytes: usize) -> (String, TaskRow) {
        let row = TaskRow {
            body: "x".repeat(body_bytes),
            ..crate::store::contract::row(id, 1)
        };
        (id.to_owned(), row)
    }

    #[test]
    fn folded_rows_kept_are_bounded_in_count_and_bytes() {
        let mut seen = Seen::default();
        seen.keep((0..RECENT + 10).map(|i| row(&format!("t{i}"), 10)));
        assert_eq!(seen.recent.len(), RECENT);
        assert!(!seen.recent.contains_key("t0") && seen.recent.contains_key("t1033"));
        // Large bodies: the bytes bound drops the oldest first.
        let big = RECENT_BYTES / 4 + 1;
        seen.keep((0..4).map(|i| row(&format!("big{i}"), big)));
        assert!(seen.bytes <= RECENT_BYTES, "{}", seen.bytes);
        assert!(seen.recent.contains_key("big3") && !seen.recent.contains_key("t1033"));
        // A task folded again counts once.
        seen.keep([row("big3", 10)]);
        let sum: usize = seen.recent.values().map(|(_, r)| r.body.len()).sum();
        assert_eq!(seen.bytes, sum);
        seen.forget("big3");
        seen.forget_all();
        assert_eq!((seen.recent.len(), seen.bytes), (0, 0));
    }
}
