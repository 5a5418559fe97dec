//! The reads: tasks, the message index, conversations, counts and records, each run on a reader
//! connection of the pool.

use a2a_protocol::TaskState;
use rusqlite::{Connection, OptionalExtension, params};

use a2a_protocol::sse::Member;

use crate::store::{
    ContextSummary, Frame, FramePage, MessageRecord, PageStart, StoreError, TaskFilter, TaskPage,
    TaskRow, parse_token,
};

/// What the idempotency index holds for a message id of an instance.
pub fn find_message(
    c: &Connection,
    instance_id: &str,
    message_id: &str,
) -> rusqlite::Result<Option<MessageRecord>> {
    c.prepare_cached(
        "SELECT task_id, fingerprint FROM message_ids WHERE instance_id = ?1 AND message_id = ?2",
    )?
    .query_row(params![instance_id, message_id], |r| {
        Ok(MessageRecord {
            task_id: r.get(0)?,
            fingerprint: r.get(1)?,
        })
    })
    .optional()
}

const TASK_COLUMNS: &str = "id, instance_id, context_id, state, skill, created_at, updated_at, version, body, peer_id, principal, trace_id";

/// The task state in column `i`; a number that is no state a task can be in is an error, never
/// a state made up.
fn state(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<TaskState> {
    let n: i64 = r.get(i)?;
    TaskState::from_number(n)
        .filter(|s| *s != TaskState::Unspecified)
        .ok_or_else(|| rusqlite::Error::IntegralValueOutOfRange(i, n))
}

fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        id: r.get(0)?,
        instance_id: r.get(1)?,
        context_id: r.get(2)?,
        state: state(r, 3)?,
        skill: r.get(4)?,
        created_at: r.get::<_, i64>(5)? as u64,
        updated_at: r.get::<_, i64>(6)? as u64,
        version: r.get::<_, i64>(7)? as u64,
        body: r.get(8)?,
        peer_id: r.get(9)?,
        principal: r.get(10)?,
        trace_id: r.get(11)?,
    })
}

/// The operator's note on a task of an instance.
pub fn task_note(
    c: &Connection,
    instance_id: &str,
    task_id: &str,
) -> Result<Option<String>, StoreError> {
    Ok(
        c.prepare_cached("SELECT note FROM task_notes WHERE task_id = ?1 AND instance_id = ?2")?
            .query_row(params![task_id, instance_id], |r| r.get(0))
            .optional()?,
    )
}

pub fn get_task(
    c: &Connection,
    id: &str,
    instance_id: Option<&str>,
) -> Result<Option<TaskRow>, StoreError> {
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1 AND (?2 IS NULL OR instance_id = ?2)"
    );
    Ok(c.prepare_cached(&sql)?
        .query_row(params![id, instance_id], task_row)
        .optional()?)
}

/// The `WHERE` clause of a filter (without its page start) and its arguments.
fn filter_clause(f: &TaskFilter) -> (String, Vec<rusqlite::types::Value>) {
    let mut clauses = Vec::new();
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    let mut arg = |clause: &str, v: rusqlite::types::Value| {
        args.push(v);
        clauses.push(clause.replace('?', &format!("?{}", args.len())));
    };
    if let Some(i) = &f.instance_id {
        arg("instance_id = ?", i.clone().into());
    }
    if let Some(ctx) = &f.context_id {
        arg("context_id = ?", ctx.clone().into());
    }
    if let Some(p) = &f.principal {
        arg("principal = ?", p.clone().into());
    }
    if let Some(s) = f.state {
        arg("state = ?", s.number().into());
    }
    if let Some(after) = f.updated_after {
        arg("updated_at >= ?", (after as i64).into());
    }
    let clause = if clauses.is_empty() {
        "1".to_owned()
    } else {
        clauses.join(" AND ")
    };
    (clause, args)
}

/// The statement counting a listing's matches: filters on instance, owner and state alone are
/// answered by the kept counts (the clause names columns both tables have); others count the
/// matching index range.
fn count_sql(f: &TaskFilter, filter: &str) -> String {
    if f.context_id.is_none() && f.updated_after.is_none() {
        format!("SELECT COALESCE(SUM(n), 0) FROM task_counts WHERE {filter}")
    } else {
        format!("SELECT COUNT(*) FROM tasks WHERE {filter}")
    }
}

pub fn list_tasks(c: &Connection, f: &TaskFilter) -> Result<TaskPage, StoreError> {
    let (filter, mut args) = filter_clause(f);
    let count = count_sql(f, &filter);
    let total: i64 = c.query_row(&count, rusqlite::params_from_iter(args.iter()), |r| {
        r.get(0)
    })?;
    let (mut page_filter, mut offset) = (filter.clone(), 0);
    match &f.start {
        PageStart::First => {}
        PageStart::Offset(o) => offset = *o,
        PageStart::Token(t) => {
            let (at, id) = parse_token(t)?;
            args.push((at as i64).into());
            args.push(id.into());
            let (a, b) = (args.len() - 1, args.len());
            page_filter =
                format!("{filter} AND (updated_at < ?{a} OR (updated_at = ?{a} AND id < ?{b}))");
        }
    }
    let limit = f.limit.max(1) + 1;
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE {page_filter} ORDER BY updated_at DESC, id DESC LIMIT {limit} OFFSET {offset}"
    );
    let mut stmt = c.prepare(&sql)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(args.iter()), task_row)?
        .map(|r| r.map_err(StoreError::from));
    f.page(rows, total as u32)
}

/// `state IN (…)` over the active states.
fn active_states() -> String {
    let n: Vec<String> = TaskState::ACTIVE
        .iter()
        .map(|s| s.number().to_string())
        .collect();
    format!("state IN ({})", n.join(","))
}

pub fn contexts(
    c: &Connection,
    instance_id: Option<&str>,
    context_id: Option<&str>,
    limit: u32,
) -> Result<Vec<ContextSummary>, StoreError> {
    let sql = format!(
        "SELECT instance_id, context_id, COUNT(*), SUM({}), MIN(created_at), MAX(updated_at), MIN(peer_id) FROM tasks
         WHERE (?1 IS NULL OR instance_id = ?1) AND (?2 IS NULL OR context_id = ?2)
         GROUP BY instance_id, context_id ORDER BY MAX(updated_at) DESC LIMIT ?3",
        active_states()
    );
    let mut stmt = c.prepare_cached(&sql)?;
    let rows = stmt.query_map(params![instance_id, context_id, limit], |r| {
        Ok(ContextSummary {
            instance_id: r.get(0)?,
            context_id: r.get(1)?,
            task_count: r.get::<_, i64>(2)? as u64,
            active_count: r.get::<_, i64>(3)? as u64,
            first_seen: r.get::<_, i64>(4)? as u64,
            last_seen: r.get::<_, i64>(5)? as u64,
            peer_id: r.get(6)?,
        })
    })?;
    let rows = rows.collect::<Result<_, _>>()?;
    Ok(rows)
}

/// Task counts by instance and state.
pub fn state_counts(c: &Connection) -> Result<Vec<(String, TaskState, u64)>, StoreError> {
    let mut stmt = c.prepare_cached(
        "SELECT instance_id, state, SUM(n) FROM task_counts GROUP BY instance_id, state
         HAVING SUM(n) > 0 ORDER BY instance_id, state",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            state(r, 1)?,
            r.get::<_, i64>(2)? as u64,
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every JSON record of `table`, by id.
pub fn records<T: serde::de::DeserializeOwned>(
    c: &Connection,
    table: &str,
) -> Result<Vec<T>, StoreError> {
    let bodies: Vec<String> = c
        .prepare_cached(&format!("SELECT body FROM {table} ORDER BY id"))?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    bodies
        .iter()
        .map(|b| {
            serde_json::from_str(b).map_err(|e| {
                StoreError::Invalid(format!("a stored {table} record is unreadable: {e}"))
            })
        })
        .collect()
}

/// Up to `limit` frames of an instance's task after `after`, with its state and latest sequence
/// id, read in one snapshot.
pub fn frames(
    c: &Connection,
    instance_id: &str,
    task_id: &str,
    after: u64,
    limit: u32,
) -> Result<FramePage, StoreError> {
    let tx = c.unchecked_transaction()?;
    let head = tx
        .prepare_cached("SELECT state, last_seq FROM tasks WHERE id = ?1 AND instance_id = ?2")?
        .query_row(params![task_id, instance_id], |r| {
            Ok((state(r, 0)?, r.get::<_, i64>(1)? as u64))
        })
        .optional()?;
    let Some((state, last_seq)) = head else {
        return Err(StoreError::NotFound);
    };
    let frames = tx
        .prepare_cached(
            "SELECT seq, kind, json FROM task_frames WHERE task_id = ?1 AND seq > ?2
             ORDER BY seq LIMIT ?3",
        )?
        .query_map(params![task_id, after as i64, limit], frame)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    tx.finish()?;
    Ok(FramePage {
        frames,
        last_seq,
        state,
    })
}

fn frame(r: &rusqlite::Row<'_>) -> rusqlite::Result<Frame> {
    let n: i16 = r.get(1)?;
    Ok(Frame {
        seq: r.get::<_, i64>(0)? as u64,
        kind: Member::from_number(n)
            .ok_or(rusqlite::Error::IntegralValueOutOfRange(1, n.into()))?,
        json: r.get::<_, String>(2)?.into(),
    })
}

/// Running tasks whose lease ran out before `now`.
pub fn expired_leases(c: &Connection, now: u64, limit: u32) -> Result<Vec<TaskRow>, StoreError> {
    let sql = format!(
        "SELECT {TASK_COLUMNS} FROM tasks WHERE state IN (1, 2) AND lease_until < ?1 LIMIT ?2"
    );
    Ok(c.prepare_cached(&sql)?
        .query_map(params![now as i64, limit], task_row)?
        .collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_listing_is_counted_from_the_kept_counts() {
        let callers = TaskFilter {
            instance_id: Some("i".into()),
            principal: Some("key:a".into()),
            state: Some(TaskState::Completed),
            ..Default::default()
        };
        let (filter, _) = filter_clause(&callers);
        assert!(count_sql(&callers, &filter).contains("FROM task_counts"));
        let in_context = TaskFilter {
            context_id: Some("c".into()),
            ..callers
        };
        let (filter, _) = filter_clause(&in_context);
        assert!(count_sql(&in_context, &filter).contains("COUNT(*) FROM tasks"));
    }
}
