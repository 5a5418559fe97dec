//! Push-notification configs and the outbox: the writer's side (configs, the notifications a
//! task write queues in its own transaction, attempts) and the reads of the delivery worker and
//! the control API.

use std::collections::HashSet;
use std::sync::Arc;

use a2a_protocol::TaskState;
use rusqlite::{Connection, OptionalExtension, params};

use crate::store::{
    Attempt, Delivery, DueDeliveries, DueLook, MAX_WAITING, OVERFLOW, PushConfig, PushStatus,
    StoreError, TaskRow,
};

/// The writer's view of push: which tasks have configs (so a write of any other task costs no
/// statement), and the signal of the delivery worker.
pub struct Outbox {
    watched: HashSet<(String, String)>,
    /// Notifications were queued (or an attempt recorded) in the group being committed.
    pub queued: bool,
    /// Notified after a commit that queued something.
    pub signal: Arc<tokio::sync::Notify>,
    /// Notifications given up at the outbox's bound since start.
    pub dropped: Arc<std::sync::atomic::AtomicU64>,
}

impl Outbox {
    /// Loads the tasks that have configs and are not settled.
    pub fn load(c: &Connection, signal: Arc<tokio::sync::Notify>) -> rusqlite::Result<Outbox> {
        let mut stmt = c.prepare(
            "SELECT DISTINCT p.instance_id, p.task_id FROM push_configs p
             JOIN tasks t ON t.id = p.task_id AND t.instance_id = p.instance_id
             WHERE t.state NOT IN (?1, ?2, ?3, ?4)",
        )?;
        let watched = stmt
            .query_map(terminal_numbers(), |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        Ok(Outbox {
            watched,
            queued: false,
            signal,
            dropped: Arc::default(),
        })
    }

    /// Queues a notification of `body` (the task as written) for each config of the task; a
    /// settled task is not watched any more (it is never written again).
    pub fn task_written(
        &mut self,
        c: &Connection,
        instance_id: &str,
        task_id: &str,
        state: TaskState,
        body: &str,
        now: u64,
    ) -> rusqlite::Result<()> {
        let key = (instance_id.to_owned(), task_id.to_owned());
        if !self.watched.contains(&key) {
            return Ok(());
        }
        let queued = c
            .prepare_cached(
                "INSERT INTO push_outbox (instance_id, task_id, config_id, payload, created_at, next_at)
                 SELECT instance_id, task_id, id, ?3, ?4, ?4 FROM push_configs
                 WHERE instance_id = ?1 AND task_id = ?2 ORDER BY rowid",
            )?
            .execute(params![
                instance_id,
                task_id,
                a2a_protocol::push::payload(body),
                now as i64
            ])?;
        self.queued |= queued > 0;
        // Past the cap, the oldest waiting behind each config's head is given up.
        let dropped = c
            .prepare_cached(
                "UPDATE push_configs SET failed = failed + 1, last_status = ?3
             WHERE instance_id = ?1 AND task_id = ?2 AND
                 (SELECT COUNT(*) FROM push_outbox o WHERE o.instance_id = ?1 AND o.task_id = ?2
                     AND o.config_id = push_configs.id) > ?4",
            )?
            .execute(params![instance_id, task_id, OVERFLOW, MAX_WAITING as i64])?;
        self.dropped
            .fetch_add(dropped as u64, std::sync::atomic::Ordering::Relaxed);
        c.prepare_cached(
            "DELETE FROM push_outbox WHERE seq IN (
                 SELECT (SELECT o.seq FROM push_outbox o WHERE o.instance_id = p.instance_id
                         AND o.task_id = p.task_id AND o.config_id = p.id ORDER BY o.seq LIMIT 1 OFFSET 1)
                 FROM push_configs p WHERE p.instance_id = ?1 AND p.task_id = ?2 AND
                     (SELECT COUNT(*) FROM push_outbox o WHERE o.instance_id = ?1 AND o.task_id = ?2
                         AND o.config_id = p.id) > ?3)",
        )?
        .execute(params![instance_id, task_id, MAX_WAITING as i64])?;
        if state.is_terminal() {
            self.watched.remove(&key);
        }
        Ok(())
    }

    /// [`Outbox::task_written`] for a written row.
    pub fn row_written(&mut self, c: &Connection, row: &TaskRow) -> rusqlite::Result<()> {
        self.task_written(
            c,
            &row.instance_id,
            &row.id,
            row.state,
            &row.body,
            row.updated_at,
        )
    }

    /// Whether the task has configs (a write of it queues notifications).
    pub fn watches(&self, instance_id: &str, task_id: &str) -> bool {
        !self.watched.is_empty()
            && self
                .watched
                .contains(&(instance_id.to_owned(), task_id.to_owned()))
    }

    /// Inserts or replaces a config of an existing task of its instance.
    pub fn put(&mut self, c: &Connection, p: &PushConfig) -> Result<(), StoreError> {
        let state: Option<i64> = c
            .prepare_cached("SELECT state FROM tasks WHERE id = ?1 AND instance_id = ?2")?
            .query_row(params![p.task_id, p.instance_id], |r| r.get(0))
            .optional()?;
        let Some(state) = state else {
            return Err(StoreError::NotFound);
        };
        let (count, exists): (i64, bool) = c
            .prepare_cached(
                "SELECT COUNT(*), COALESCE(SUM(id = ?3), 0) > 0 FROM push_configs
                 WHERE instance_id = ?1 AND task_id = ?2",
            )?
            .query_row(params![p.instance_id, p.task_id, p.id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
        let max = a2a_protocol::push::MAX_PER_TASK;
        if !exists && count as usize >= max {
            return Err(StoreError::Invalid(format!(
                "task {} has {max} push-notification configs already: delete one first",
                p.task_id
            )));
        }
        c.prepare_cached(
            "INSERT INTO push_configs (instance_id, task_id, id, body) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (instance_id, task_id, id) DO UPDATE SET body = excluded.body",
        )?
        .execute(params![p.instance_id, p.task_id, p.id, p.body])?;
        let settled = TaskState::from_number(state).is_none_or(|s| s.is_terminal());
        if !settled {
            self.watched
                .insert((p.instance_id.clone(), p.task_id.clone()));
        }
        Ok(())
    }

    /// Records an attempt's outcome on the config and the outbox.
    pub fn attempted(
        &mut self,
        c: &Connection,
        seq: u64,
        now: u64,
        attempt: &Attempt,
    ) -> Result<(), StoreError> {
        let (status, delivered, failed) = match attempt {
            Attempt::Delivered(code) => (code.to_string(), 1, 0),
            Attempt::Retry { error, .. } => (error.clone(), 0, 0),
            Attempt::GaveUp(error) => (error.clone(), 0, 1),
        };
        c.prepare_cached(
            "UPDATE push_configs SET delivered = delivered + ?2, failed = failed + ?3,
                 last_status = ?4, last_attempt_at = ?5
             WHERE (instance_id, task_id, id) =
                 (SELECT instance_id, task_id, config_id FROM push_outbox WHERE seq = ?1)",
        )?
        .execute(params![seq as i64, delivered, failed, status, now as i64])?;
        match attempt {
            Attempt::Retry { next_at, .. } => c
                .prepare_cached(
                    "UPDATE push_outbox SET attempts = attempts + 1, next_at = ?2 WHERE seq = ?1",
                )?
                .execute(params![seq as i64, *next_at as i64])?,
            _ => c
                .prepare_cached("DELETE FROM push_outbox WHERE seq = ?1")?
                .execute(params![seq as i64])?,
        };
        self.queued = true;
        Ok(())
    }
}

fn terminal_numbers() -> [i64; 4] {
    [
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Canceled,
        TaskState::Rejected,
    ]
    .map(TaskState::number)
}

/// Deletes a config and what waits for it.
pub fn delete(c: &Connection, instance_id: &str, task_id: &str, id: &str) -> rusqlite::Result<()> {
    c.prepare_cached(
        "DELETE FROM push_configs WHERE instance_id = ?1 AND task_id = ?2 AND id = ?3",
    )?
    .execute(params![instance_id, task_id, id])?;
    c.prepare_cached(
        "DELETE FROM push_outbox WHERE instance_id = ?1 AND task_id = ?2 AND config_id = ?3",
    )?
    .execute(params![instance_id, task_id, id])?;
    Ok(())
}

/// A task's configs, oldest first.
pub fn configs(
    c: &Connection,
    instance_id: &str,
    task_id: &str,
) -> Result<Vec<PushConfig>, StoreError> {
    let mut stmt = c.prepare_cached(
        "SELECT instance_id, task_id, id, body FROM push_configs
         WHERE instance_id = ?1 AND task_id = ?2 ORDER BY rowid",
    )?;
    let rows = stmt.query_map(params![instance_id, task_id], config)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn config(r: &rusqlite::Row<'_>) -> rusqlite::Result<PushConfig> {
    Ok(PushConfig {
        instance_id: r.get(0)?,
        task_id: r.get(1)?,
        id: r.get(2)?,
        body: r.get(3)?,
    })
}

/// The oldest notification of each config (the one its order lets go next).
const HEADS: &str = "o.seq = (SELECT MIN(h.seq) FROM push_outbox h
    WHERE h.instance_id = o.instance_id AND h.task_id = o.task_id AND h.config_id = o.config_id)";

/// The heads due in `look` (in turns across instances), the next head's time and the outbox
/// size.
pub fn due(c: &Connection, look: &DueLook) -> Result<DueDeliveries, StoreError> {
    let sql = format!(
        "SELECT seq, instance_id, task_id, id, body, payload, created_at, attempts FROM (
             SELECT o.seq, p.instance_id, p.task_id, p.id, p.body, o.payload, o.created_at,
                 o.attempts, ROW_NUMBER() OVER (PARTITION BY o.instance_id ORDER BY o.seq) AS turn
             FROM push_outbox o JOIN push_configs p
                 ON p.instance_id = o.instance_id AND p.task_id = o.task_id AND p.id = o.config_id
             WHERE o.next_at <= ?1 AND {HEADS}
                 AND o.instance_id NOT IN (SELECT value FROM json_each(?3)))
         ORDER BY turn, seq LIMIT ?2"
    );
    let now = look.now;
    let skip = serde_json::to_string(&look.skip).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let mut stmt = c.prepare_cached(&sql)?;
    let due = stmt
        .query_map(params![now as i64, look.limit, skip], |r| {
            Ok(Delivery {
                seq: r.get::<_, i64>(0)? as u64,
                config: PushConfig {
                    instance_id: r.get(1)?,
                    task_id: r.get(2)?,
                    id: r.get(3)?,
                    body: r.get(4)?,
                },
                payload: r.get(5)?,
                created_at: r.get::<_, i64>(6)? as u64,
                attempts: r.get(7)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    let next = format!("SELECT MIN(o.next_at) FROM push_outbox o WHERE o.next_at > ?1 AND {HEADS}");
    let next_at: Option<i64> = c
        .prepare_cached(&next)?
        .query_row(params![now as i64], |r| r.get(0))?;
    let pending: i64 = c
        .prepare_cached("SELECT COUNT(*) FROM push_outbox")?
        .query_row([], |r| r.get(0))?;
    Ok(DueDeliveries {
        due,
        next_at: next_at.map(|n| n as u64),
        pending: pending as u64,
    })
}

/// The delivery state of an instance's configs, oldest first (at most 500).
pub fn status(
    c: &Connection,
    instance_id: &str,
    task_id: Option<&str>,
) -> Result<Vec<PushStatus>, StoreError> {
    let mut stmt = c.prepare_cached(concat!(
        push_status_select!(),
        " WHERE p.instance_id = ?1 AND (?2 IS NULL OR p.task_id = ?2)
         ORDER BY p.rowid LIMIT 500"
    ))?;
    let rows = stmt.query_map(params![instance_id, task_id], |r| {
        Ok(PushStatus {
            config: config(r)?,
            delivered: r.get::<_, i64>(4)? as u64,
            failed: r.get::<_, i64>(5)? as u64,
            last_status: r.get(6)?,
            last_attempt_at: r.get::<_, Option<i64>>(7)?.map(|n| n as u64),
            pending: r.get::<_, i64>(8)? as u64,
            attempts: r.get::<_, Option<u32>>(9)?.unwrap_or(0),
            next_at: r.get::<_, Option<i64>>(10)?.map(|n| n as u64),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
