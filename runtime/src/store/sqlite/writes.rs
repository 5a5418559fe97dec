//! The writer thread: queued writes committed in groups, one transaction and one fsync for every
//! write that arrived meanwhile, each in a savepoint of its own so one failing write fails alone.

use std::sync::mpsc;

use a2a_protocol::TaskState;
use rusqlite::{Connection, OptionalExtension, params};

use super::log::{FOLD_AT, FOLD_IDLE, Log};
use super::push::{self, Outbox};
use super::reads::get_task;
use super::rows::{add_to_context, log_frames, record_claim};
use crate::store::{
    Attempt, KV_ENTRY_BYTES, KvKey, Lease, MessageClaim, NewFrame, PushConfig, Reply, StoreError,
    TaskRow, Written, over_quota,
};

/// Most writes committed in one transaction.
const MAX_GROUP: usize = 512;

/// A queued write and the reply that answers it.
pub enum Write {
    CreateTask(TaskRow, Option<MessageClaim>, Option<PushConfig>, Reply<()>),
    UpdateTask(
        TaskRow,
        u64,
        Option<MessageClaim>,
        Vec<NewFrame>,
        Reply<Written>,
    ),
    AppendFrames(String, String, Vec<NewFrame>, Reply<u64>),
    PruneFrames(u64, Reply<u64>),
    RenewLeases(u64, Vec<String>, Reply<Vec<String>>),
    PutPushConfig(PushConfig, Reply<()>),
    DeletePushConfig(String, String, String, Reply<()>),
    Attempted(u64, u64, Attempt, Reply<()>),
    PutRecord(Table, String, String, Reply<()>),
    DeleteRecord(Table, String, Reply<()>),
    NoteTask(String, String, String, Reply<()>),
    FailUnsettled(u64, String, Reply<u64>),
    KvSet(KvKey, Vec<u8>, u64, Reply<()>),
    KvDelete(KvKey, Reply<()>),
    Flush(Reply<()>),
    /// Folds the task log, then calls back (a read that needs the tables whole).
    Fold(Box<dyn FnOnce(Result<(), StoreError>) + Send>),
}

impl Write {
    /// Whether the write reads or changes what the task log's records change, so the log is
    /// folded before it.
    fn needs_fold(&self) -> bool {
        matches!(
            self,
            Write::AppendFrames(..)
                | Write::PruneFrames(..)
                | Write::RenewLeases(..)
                | Write::PutPushConfig(..)
                | Write::FailUnsettled(..)
                | Write::Flush(..)
                | Write::Fold(..)
        )
    }
}

/// Sets an agent's value unless its scope would then hold more than `quota` bytes.
fn kv_set(c: &Connection, at: &KvKey, value: &[u8], quota: u64) -> Result<(), StoreError> {
    let used: i64 = c
        .prepare_cached(
            "SELECT COALESCE(SUM(length(CAST(bucket AS BLOB)) + length(CAST(key AS BLOB)) + length(value) + ?4), 0)
             FROM agent_kv WHERE scope = ?1 AND NOT (bucket = ?2 AND key = ?3)",
        )?
        .query_row(params![at.scope, at.bucket, at.key, KV_ENTRY_BYTES as i64], |r| r.get(0))?;
    if used as u64 + at.cost(value.len()) > quota {
        return Err(over_quota(quota));
    }
    c.prepare_cached("INSERT OR REPLACE INTO agent_kv VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![at.scope, at.bucket, at.key, value])?;
    Ok(())
}

/// Answers a queued write once its group commits (or fails with the group's error).
type Answer = Box<dyn FnOnce(Option<&StoreError>)>;

/// The tables of JSON records (`id`, `body`).
#[derive(Clone, Copy, Debug)]
pub enum Table {
    Instances,
    Connections,
}

impl Table {
    /// The table's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Instances => "instances",
            Table::Connections => "connections",
        }
    }
}

/// Commits queued writes in groups until the queue closes; tells the delivery worker when a
/// group queued notifications.
pub fn write_loop(
    mut conn: Connection,
    mut outbox: Outbox,
    mut log: Log,
    lease: Lease,
    rx: mpsc::Receiver<Write>,
) {
    loop {
        let first = if log.len() == 0 {
            rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected)
        } else {
            rx.recv_timeout(FOLD_IDLE)
        };
        let first = match first {
            Ok(w) => w,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                fold(&mut conn, &mut log);
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(w) => group.push(w),
                Err(_) => break,
            }
        }
        commit_group(&mut conn, &mut outbox, &mut log, &lease, group);
        if std::mem::take(&mut outbox.queued) {
            outbox.signal.notify_one();
        }
        if log.len() >= FOLD_AT {
            fold(&mut conn, &mut log);
        }
    }
    fold(&mut conn, &mut log);
    // Closed: move what the WAL holds into the database file, so a stopped server's data
    // directory is one consistent file (a copy of the `.db` alone is then whole).
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        tracing::warn!(error = %e, "cannot checkpoint the database at shutdown; the WAL keeps the latest writes and is applied at the next start");
    }
}

/// Folds the task log in a transaction of its own.
fn fold(conn: &mut Connection, log: &mut Log) {
    let folded = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(StoreError::from)
        .and_then(|tx| {
            log.fold(&tx)?;
            Ok(tx.commit()?)
        });
    match folded {
        Ok(()) => log.committed(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot fold the task log; its records stay and are folded later");
            log.rolled_back(conn);
        }
    }
}

/// Runs a group in one transaction; each write in its own savepoint, so one failing write
/// fails alone. Replies go out only after the commit.
fn commit_group(
    conn: &mut Connection,
    outbox: &mut Outbox,
    log: &mut Log,
    lease: &Lease,
    group: Vec<Write>,
) {
    let mut replies: Vec<Answer> = Vec::with_capacity(group.len());
    let tx = match conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => {
            let err = StoreError::from(e);
            for w in group {
                fail(w, err.clone());
            }
            return;
        }
    };
    for w in group {
        let direct = match &w {
            Write::CreateTask(row, _, config, _) => {
                config.is_some() || outbox.watches(&row.instance_id, &row.id)
            }
            Write::UpdateTask(row, ..) => outbox.watches(&row.instance_id, &row.id),
            w => w.needs_fold(),
        };
        if direct && let Err(e) = log.fold_in(&tx) {
            fail(w, e);
            continue;
        }
        match w {
            Write::CreateTask(row, mid, config, reply) => replies.push(run(&tx, reply, |c| {
                if let Some(claim) = &mid {
                    check_claim(c, log, &row.instance_id, claim)?;
                }
                if direct {
                    log.forget(&row.id);
                    create_task(c, outbox, lease, &row, mid.as_ref(), config.as_ref())
                } else {
                    log.create(c, lease, &row, mid.as_ref())
                }
            })),
            Write::UpdateTask(row, expected, mid, frames, reply) => {
                replies.push(run(&tx, reply, |c| {
                    if let Some(claim) = &mid {
                        check_claim(c, log, &row.instance_id, claim)?;
                    }
                    if direct {
                        log.forget(&row.id);
                        update_task(c, outbox, lease, &row, expected, mid.as_ref(), &frames)
                    } else {
                        log.update(c, lease, &row, expected, mid.as_ref(), &frames)
                    }
                }))
            }
            Write::AppendFrames(instance, task, frames, reply) => {
                replies.push(run(&tx, reply, |c| {
                    let last = c
                        .prepare_cached(
                            "UPDATE tasks SET last_seq = last_seq + ?3
                             WHERE id = ?1 AND instance_id = ?2 AND state NOT IN (3, 4, 5, 7)
                             RETURNING last_seq",
                        )?
                        .query_row(params![task, instance, frames.len() as i64], |r| {
                            r.get::<_, i64>(0)
                        })
                        .optional()?;
                    let Some(last) = last else {
                        let exists = c
                            .prepare_cached(
                                "SELECT 1 FROM tasks WHERE id = ?1 AND instance_id = ?2",
                            )?
                            .exists(params![task, instance])?;
                        return Err(if exists {
                            StoreError::settled(&task)
                        } else {
                            StoreError::NotFound
                        });
                    };
                    log_frames(c, &task, last as u64, &frames)
                }))
            }
            Write::PruneFrames(before, reply) => replies.push(run(&tx, reply, |c| {
                Ok(c.prepare_cached(
                    "DELETE FROM task_frames WHERE task_id IN
                         (SELECT id FROM tasks WHERE updated_at < ?1 AND state NOT IN (1, 2))",
                )?
                .execute(params![before as i64])? as u64)
            })),
            Write::RenewLeases(now, ids, reply) => replies.push(run(&tx, reply, |c| {
                let mut renew = c.prepare_cached(
                    "UPDATE tasks SET lease_until = ?2
                     WHERE id = ?3 AND state IN (1, 2) AND lease_node = ?1",
                )?;
                let until = (now + lease.ttl_ms) as i64;
                let mut renewed = Vec::new();
                for id in ids {
                    if renew.execute(params![lease.node, until, id])? > 0 {
                        renewed.push(id);
                    }
                }
                Ok(renewed)
            })),
            Write::PutPushConfig(config, reply) => {
                replies.push(run(&tx, reply, |c| outbox.put(c, &config)))
            }
            Write::DeletePushConfig(instance, task, id, reply) => {
                replies.push(run(&tx, reply, |c| {
                    Ok(push::delete(c, &instance, &task, &id)?)
                }))
            }
            Write::Attempted(seq, now, attempt, reply) => {
                replies.push(run(&tx, reply, |c| outbox.attempted(c, seq, now, &attempt)))
            }
            Write::PutRecord(table, id, body, reply) => replies.push(run(&tx, reply, |c| {
                c.execute(
                    &format!(
                        "INSERT OR REPLACE INTO {} (id, body) VALUES (?1, ?2)",
                        table.name()
                    ),
                    params![id, body],
                )?;
                Ok(())
            })),
            Write::DeleteRecord(table, id, reply) => replies.push(run(&tx, reply, |c| {
                c.execute(
                    &format!("DELETE FROM {} WHERE id = ?1", table.name()),
                    params![id],
                )?;
                Ok(())
            })),
            Write::NoteTask(instance, task, note, reply) => replies.push(run(&tx, reply, |c| {
                c.prepare_cached("INSERT OR REPLACE INTO task_notes VALUES (?1, ?2, ?3)")?
                    .execute(params![instance, task, note])?;
                Ok(())
            })),
            Write::KvSet(at, value, quota, reply) => {
                replies.push(run(&tx, reply, |c| kv_set(c, &at, &value, quota)))
            }
            Write::KvDelete(at, reply) => replies.push(run(&tx, reply, |c| {
                c.prepare_cached(
                    "DELETE FROM agent_kv WHERE scope = ?1 AND bucket = ?2 AND key = ?3",
                )?
                .execute(params![at.scope, at.bucket, at.key])?;
                Ok(())
            })),
            Write::FailUnsettled(now, text, reply) => {
                log.forget_all();
                replies.push(run(&tx, reply, |c| fail_unsettled(c, outbox, now, &text)))
            }
            Write::Flush(reply) => replies.push(Box::new(move |err| {
                let _ = reply.send(err.map_or(Ok(()), |e| Err(e.clone())));
            })),
            Write::Fold(then) => replies.push(Box::new(move |err| {
                then(err.map_or(Ok(()), |e| Err(e.clone())));
            })),
        }
    }
    let commit_err = tx.commit().err().map(StoreError::from);
    match commit_err {
        None => log.committed(),
        Some(_) => log.rolled_back(conn),
    }
    for r in replies {
        r(commit_err.as_ref());
    }
}

/// Runs one write in a savepoint; returns the reply to send once the group committed.
fn run<T: Send + 'static>(
    tx: &rusqlite::Transaction<'_>,
    reply: Reply<T>,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Answer {
    let result = (|| {
        tx.prepare_cached("SAVEPOINT w")?.execute([])?;
        let r = f(tx);
        if r.is_err() {
            tx.prepare_cached("ROLLBACK TO w")?.execute([])?;
        }
        tx.prepare_cached("RELEASE w")?.execute([])?;
        r
    })();
    Box::new(move |commit_err| {
        let _ = reply.send(match commit_err {
            Some(e) => Err(e.clone()),
            None => result,
        });
    })
}

fn fail(w: Write, e: StoreError) {
    match w {
        Write::CreateTask(.., r)
        | Write::PutRecord(.., r)
        | Write::DeleteRecord(.., r)
        | Write::NoteTask(.., r)
        | Write::PutPushConfig(.., r)
        | Write::DeletePushConfig(.., r)
        | Write::Attempted(.., r)
        | Write::KvSet(.., r)
        | Write::KvDelete(.., r)
        | Write::Flush(r) => {
            let _ = r.send(Err(e));
        }
        Write::AppendFrames(.., r) | Write::PruneFrames(.., r) | Write::FailUnsettled(.., r) => {
            let _ = r.send(Err(e));
        }
        Write::RenewLeases(.., r) => {
            let _ = r.send(Err(e));
        }
        Write::Fold(then) => then(Err(e)),
        Write::UpdateTask(.., r) => {
            let _ = r.send(Err(e));
        }
    }
}

fn create_task(
    c: &Connection,
    outbox: &mut Outbox,
    lease: &Lease,
    row: &TaskRow,
    claim: Option<&MessageClaim>,
    config: Option<&PushConfig>,
) -> Result<(), StoreError> {
    c.prepare_cached(
        "INSERT INTO tasks (id, instance_id, context_id, state, skill, created_at, updated_at, version, peer_id, principal, body, lease_node, lease_until, trace_id, stamp)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?
    .execute(params![row.id, row.instance_id, row.context_id, row.state.number(), row.skill, row.created_at as i64, row.updated_at as i64, row.peer_id, row.principal, row.body, lease.node, lease.until(row.state, row.updated_at), row.trace_id, row.stamp as i64])
    .map_err(|e| match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => StoreError::Invalid(format!("task {} already exists", row.id)),
        e => e.into(),
    })?;
    add_to_context(c, row)?;
    if let Some(claim) = claim {
        record_claim(c, &row.instance_id, claim, &row.id)?;
    }
    if let Some(config) = config {
        outbox.put(c, config)?;
    }
    outbox.row_written(c, row)?;
    Ok(())
}

fn update_task(
    c: &Connection,
    outbox: &mut Outbox,
    lease: &Lease,
    row: &TaskRow,
    expected: u64,
    claim: Option<&MessageClaim>,
    frames: &[NewFrame],
) -> Result<Written, StoreError> {
    let last = c
        .prepare_cached(
            "UPDATE tasks SET context_id = ?3, state = ?4, skill = ?5, updated_at = ?6, version = version + 1, body = ?7,
                 last_seq = last_seq + ?9, lease_node = ?10, lease_until = ?11, stamp = ?12
             WHERE id = ?1 AND instance_id = ?2 AND version = ?8
             RETURNING last_seq",
        )?
        .query_row(params![row.id, row.instance_id, row.context_id, row.state.number(), row.skill, row.updated_at as i64, row.body, expected as i64, frames.len() as i64, lease.node, lease.until(row.state, row.updated_at), row.stamp as i64], |r| r.get::<_, i64>(0))
        .optional()?;
    let Some(last) = last else {
        return match get_task(c, &row.id, Some(&row.instance_id))? {
            Some(current) => Err(StoreError::Conflict(Box::new(current))),
            None => Err(StoreError::NotFound),
        };
    };
    if let Some(claim) = claim {
        record_claim(c, &row.instance_id, claim, &row.id)?;
    }
    outbox.row_written(c, row)?;
    let first_seq = log_frames(c, &row.id, last as u64, frames)?;
    Ok(Written {
        version: expected + 1,
        first_seq,
    })
}

/// The compare-and-swap of a claim: the index (with the log's claims) must still hold what the
/// claim replaces.
fn check_claim(
    c: &Connection,
    log: &Log,
    instance_id: &str,
    claim: &MessageClaim,
) -> Result<(), StoreError> {
    match log.message(c, instance_id, &claim.message_id)? {
        Some(current) if Some(&current) != claim.replaces.as_ref() => {
            Err(StoreError::DuplicateMessage(current))
        }
        _ => Ok(()),
    }
}

fn fail_unsettled(
    c: &Connection,
    outbox: &mut Outbox,
    now: u64,
    text: &str,
) -> Result<u64, StoreError> {
    let mut stmt = c.prepare("SELECT id, instance_id, body FROM tasks WHERE state IN (?1, ?2)")?;
    let rows: Vec<(String, String, String)> = stmt
        .query_map(
            params![TaskState::Submitted.number(), TaskState::Working.number()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?
        .collect::<Result<_, _>>()?;
    for (id, instance_id, body) in &rows {
        let (body, frames) = crate::store::failed(body, now, text);
        let last: i64 = c.query_row(
            "UPDATE tasks SET state = ?2, updated_at = ?3, version = version + 1, body = ?4,
                 last_seq = last_seq + ?5, lease_node = NULL, lease_until = NULL, stamp = 0
             WHERE id = ?1 RETURNING last_seq",
            params![
                id,
                TaskState::Failed.number(),
                now as i64,
                body,
                frames.len() as i64
            ],
            |r| r.get(0),
        )?;
        log_frames(c, id, last as u64, &frames)?;
        outbox.task_written(c, instance_id, id, TaskState::Failed, &body, now)?;
    }
    Ok(rows.len() as u64)
}
