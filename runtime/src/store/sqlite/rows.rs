//! The statements that write a task's rows beside `tasks`: its frames, its message id and its
//! conversation's summary, as the direct write and the task log's fold both run them.

use rusqlite::{Connection, params};

use crate::store::{MessageClaim, NewFrame, RETAIN_FRAMES, StoreError, TaskRow};

/// Writes `frames` as the task's sequence ids up to `last` (its new `last_seq`) and drops what
/// falls out of [`RETAIN_FRAMES`]; returns the first one's id.
pub fn log_frames(
    c: &Connection,
    task_id: &str,
    last: u64,
    frames: &[NewFrame],
) -> Result<u64, StoreError> {
    let first = last + 1 - frames.len() as u64;
    if frames.is_empty() {
        return Ok(first);
    }
    let mut insert = c.prepare_cached(
        "INSERT INTO task_frames (task_id, seq, kind, json) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (seq, f) in (first..).zip(frames) {
        insert.execute(params![task_id, seq as i64, f.kind.number(), f.json])?;
    }
    if last > RETAIN_FRAMES {
        c.prepare_cached("DELETE FROM task_frames WHERE task_id = ?1 AND seq <= ?2")?
            .execute(params![task_id, (last - RETAIN_FRAMES) as i64])?;
    }
    Ok(first)
}

/// Records a claimed message id for a task (replacing what it held).
pub fn record_claim(
    c: &Connection,
    instance_id: &str,
    claim: &MessageClaim,
    task_id: &str,
) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "INSERT INTO message_ids (instance_id, message_id, task_id, fingerprint) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (instance_id, message_id) DO UPDATE SET task_id = excluded.task_id, fingerprint = excluded.fingerprint",
    )?
    .execute(params![instance_id, claim.message_id, task_id, claim.fingerprint])
}

/// Counts a new task in its conversation's kept summary (schema migration 13), which its first
/// task adds; the summary follows the task's updates by triggers. One statement, as the binding
/// it replaced: a trigger on insert would run two (`runtime/bin/tests/hot_path.rs`).
pub fn add_to_context(c: &Connection, row: &TaskRow) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "INSERT INTO contexts VALUES (?1, ?2, 1, ?3, ?4, ?5, ?6)
         ON CONFLICT (context_id, instance_id) DO UPDATE SET
             tasks = tasks + 1,
             active = active + excluded.active,
             first_seen = MIN(first_seen, excluded.first_seen),
             last_seen = MAX(last_seen, excluded.last_seen),
             peer_id = MIN(COALESCE(peer_id, excluded.peer_id), COALESCE(excluded.peer_id, peer_id))",
    )?
    .execute(params![
        row.context_id,
        row.instance_id,
        row.state.is_active(),
        row.created_at as i64,
        row.updated_at as i64,
        row.peer_id
    ])
}
