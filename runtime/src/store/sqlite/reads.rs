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

pub const TASK_COLUMNS: &str = "id, instance_id, context_id, state, skill, created_at, updated_at, version, body, peer_id, principal, trace_id, stamp";

/// The task state in column `i`; a number that is no state a task can be in is an error, never
/// a state made up.
fn state(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<TaskState> {
    let n: i64 = r.get(i)?;
    TaskState::from_number(n)
        .filter(|s| *s != TaskState::Unspecified)
        .ok_or_else(|| rusqlite::Error::IntegralValueOutOfRange(i, n))
}

pub fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
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
        stamp: r.get::<_, i64>(12)? as u64,
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

/// The `WHERE` clause of a filter (without its page start) and its arguments. A state other than
/// COMPLETED also states the condition of the partial index `tasks_by_state` (SQLite reads a
/// partial index only for a query that says its condition), so its few tasks are found there.
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
    if f.state.is_some_and(|s| s != TaskState::Completed) {
        clauses.push(format!("state != {}", TaskState::Completed.number()));
    }
    let clause = if clauses.is_empty() {
        "1".to_owned()
    } else {
        clauses.join(" AND ")
    };
    (clause, args)
}

/// The statement counting a listing's matches from what the store keeps: filters on instance,
/// owner and state by the task counts, a context's (on an instance or all) by its conversations'
/// summaries; the others count the matching index range (a context's tasks, or those since a
/// time). Each clause names only columns the table it runs on has.
fn count_sql(f: &TaskFilter, filter: &str) -> String {
    let narrowed = f.state.is_some() || f.principal.is_some();
    match (f.context_id.is_some(), f.updated_after.is_some()) {
        (false, false) => format!("SELECT COALESCE(SUM(n), 0) FROM task_counts WHERE {filter}"),
        (true, false) if !narrowed => {
            format!("SELECT COALESCE(SUM(tasks), 0) FROM contexts WHERE {filter}")
        }
        _ => format!("SELECT COUNT(*) FROM tasks WHERE {filter}"),
    }
}

/// A page of the tasks `f` matches and their count, read in one snapshot.
pub fn list_tasks(c: &Connection, f: &TaskFilter) -> Result<TaskPage, StoreError> {
    let (filter, mut args) = filter_clause(f);
    let tx = c.unchecked_transaction()?;
    let total: i64 = tx.query_row(
        &count_sql(f, &filter),
        rusqlite::params_from_iter(args.iter()),
        |r| r.get(0),
    )?;
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
    // Nothing matches from where the page starts: no index range to walk for it (a filter on a
    // state no task is in walked every task).
    if total <= i64::from(offset) {
        return f.page(
            std::iter::empty::<Result<TaskRow, StoreError>>(),
            total as u32,
        );
    }
    let limit = f.limit.max(1) + 1;
    let order = "ORDER BY updated_at DESC, id DESC";
    let sql = match (&f.instance_id, &f.principal, &f.context_id) {
        // An owner's tasks on every instance: no index leads with the owner, so each instance's
        // newest are read from `tasks_by_principal` and merged (an owner's instances are few).
        (None, Some(p), None) => {
            let instances: Vec<String> = tx
                .prepare_cached(
                    "SELECT DISTINCT instance_id FROM task_counts WHERE principal = ?1 AND n > 0",
                )?
                .query_map([p], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            let keep = u64::from(offset) + u64::from(limit);
            let arms: Vec<String> = instances
                .into_iter()
                .map(|i| {
                    args.push(i.into());
                    format!(
                        "SELECT * FROM (SELECT {TASK_COLUMNS} FROM tasks WHERE instance_id = ?{} AND {page_filter} {order} LIMIT {keep})",
                        args.len()
                    )
                })
                .collect();
            format!(
                "{} {order} LIMIT {limit} OFFSET {offset}",
                arms.join(" UNION ALL ")
            )
        }
        _ => format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE {page_filter} {order} LIMIT {limit} OFFSET {offset}"
        ),
    };
    let page = {
        let mut stmt = tx.prepare(&sql)?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args.iter()), task_row)?
            .map(|r| r.map_err(StoreError::from));
        f.page(rows, total as u32)?
    };
    tx.finish()?;
    Ok(page)
}

/// Conversations from their kept summaries (schema migration 13), newest `last_seen` first, then
/// by instance and context id: the first rows of an index, however many tasks are stored.
pub fn contexts(
    c: &Connection,
    instance_id: Option<&str>,
    context_id: Option<&str>,
    limit: u32,
) -> Result<Vec<ContextSummary>, StoreError> {
    // One context's rows are read by the primary key; the others walk `contexts_by_last_seen`
    // (an instance's until `limit` of them). An absent `?1` or `?2` is bound and unused.
    let filter = match (instance_id, context_id) {
        (None, None) => "1",
        (Some(_), None) => "instance_id = ?1",
        (None, Some(_)) => "context_id = ?2",
        (Some(_), Some(_)) => "context_id = ?2 AND instance_id = ?1",
    };
    let sql = format!(
        "SELECT instance_id, context_id, tasks, active, first_seen, last_seen, peer_id FROM contexts
         WHERE {filter} ORDER BY last_seen DESC, instance_id, context_id LIMIT ?3"
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
    use std::cell::Cell;

    use rusqlite::StatementStatus;
    use rusqlite::trace::{TraceEvent, TraceEventCodes};

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
        let context = TaskFilter {
            context_id: Some("c".into()),
            ..Default::default()
        };
        let (filter, _) = filter_clause(&context);
        assert!(count_sql(&context, &filter).contains("FROM contexts"));
    }

    thread_local! {
        /// VM steps of the statements this thread's test connections finished.
        static STEPS: Cell<u64> = const { Cell::new(0) };
    }

    /// A migrated in-memory database holding `n` tasks, written in one statement (the task
    /// counts by their triggers) and summarised as migration 13 does: one in ten on a second
    /// instance, two a conversation (every fifth on both instances), the 30 oldest WORKING and
    /// the 40 oldest a key's, one in twenty FAILED. Each filter below matches the same tasks at
    /// both sizes or more than a page of them, so a page holds as many rows at both sizes; the
    /// rare ones are the oldest, where a walk would cross every task to find them.
    fn holding(n: u32) -> Connection {
        let mut c = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut c).unwrap();
        c.execute(
            "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?1)
             INSERT INTO tasks (id, instance_id, context_id, state, skill, created_at,
                 updated_at, version, peer_id, principal, body)
             SELECT printf('t%08d', i), iif(i % 10 = 0, 'other', 'demo'), printf('c%08d', i / 2),
                 CASE WHEN i <= 30 THEN 2 WHEN i % 20 = 9 THEN 4 ELSE 3 END, 'echo', i, i, 1,
                 '10.0.0.1@demo', iif(i <= 40, 'key:a', 'token'), '{}'
             FROM s",
            [n],
        )
        .unwrap();
        c.execute(
            "INSERT INTO contexts
                 SELECT context_id, instance_id, COUNT(*), SUM(state IN (1, 2, 6, 8)),
                     MIN(created_at), MAX(updated_at), MIN(peer_id)
                 FROM tasks GROUP BY context_id, instance_id",
            [],
        )
        .unwrap();
        c.trace_v2(
            TraceEventCodes::SQLITE_TRACE_PROFILE,
            Some(|e| {
                if let TraceEvent::Profile(stmt, _) = e {
                    let steps = stmt.get_status(StatementStatus::VmStep) as u64;
                    STEPS.with(|s| s.set(s.get() + steps));
                }
            }),
        );
        c
    }

    /// VM steps of what the control snapshot asks of the store (`control::reads::snapshot`): a
    /// page of tasks and its count, the 200 newest conversations, the metrics' task counts.
    fn snapshot_steps(c: &Connection, f: &TaskFilter) -> u64 {
        // A statement's counter runs on over its runs, and cached statements run again.
        c.flush_prepared_statement_cache();
        STEPS.with(|s| s.set(0));
        list_tasks(c, f).unwrap();
        contexts(c, None, None, 200).unwrap();
        state_counts(c).unwrap();
        STEPS.with(Cell::get)
    }

    /// What `list_tasks` must answer: the matches counted and paged one by one.
    fn counted(c: &Connection, f: &TaskFilter) -> (u32, Vec<String>) {
        let (filter, args) = filter_clause(f);
        let offset = match f.start {
            PageStart::Offset(o) => o,
            _ => 0,
        };
        let total: i64 = c
            .query_row(
                &format!("SELECT COUNT(*) FROM tasks WHERE {filter}"),
                rusqlite::params_from_iter(args.iter()),
                |r| r.get(0),
            )
            .unwrap();
        let ids = c
            .prepare(&format!(
                "SELECT id FROM tasks WHERE {filter} ORDER BY updated_at DESC, id DESC
                 LIMIT {} OFFSET {offset}",
                f.limit
            ))
            .unwrap()
            .query_map(rusqlite::params_from_iter(args.iter()), |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        (total as u32, ids)
    }

    /// The measure, counted instead of timed: a snapshot read 93 ms of CPU at 54,000
    /// tasks and 1 ms fresh, as its sessions grouped every task and some filters walked them all.
    #[test]
    fn a_snapshot_reads_as_much_at_50000_tasks_as_at_1000() {
        let (few, many) = (holding(1_000), holding(50_000));
        let page = |edit: &dyn Fn(&mut TaskFilter)| {
            let mut f = TaskFilter {
                limit: 20,
                start: PageStart::Offset(0),
                ..Default::default()
            };
            edit(&mut f);
            f
        };
        let cases = [
            ("no filter", page(&|_| {})),
            (
                "an instance",
                page(&|f| f.instance_id = Some("other".into())),
            ),
            (
                "working (the oldest)",
                page(&|f| f.state = Some(TaskState::Working)),
            ),
            ("completed", page(&|f| f.state = Some(TaskState::Completed))),
            (
                "an instance and failed",
                page(&|f| {
                    f.instance_id = Some("demo".into());
                    f.state = Some(TaskState::Failed);
                }),
            ),
            (
                "a conversation",
                page(&|f| f.context_id = Some("c00000250".into())),
            ),
            (
                "an instance and a conversation",
                page(&|f| {
                    f.instance_id = Some("demo".into());
                    f.context_id = Some("c00000250".into());
                }),
            ),
            (
                "a key (the oldest)",
                page(&|f| f.principal = Some("key:a".into())),
            ),
            ("a later page", page(&|f| f.start = PageStart::Offset(100))),
        ];
        for (name, f) in &cases {
            let listed = list_tasks(&many, f).unwrap();
            let ids: Vec<String> = listed.tasks.iter().map(|t| t.id.clone()).collect();
            assert_eq!((listed.total, ids), counted(&many, f), "{name}");
            let (a, b) = (snapshot_steps(&few, f), snapshot_steps(&many, f));
            assert!(
                b <= a + a / 10 + 50,
                "{name}: {a} VM steps at 1,000 tasks, {b} at 50,000"
            );
        }
    }
}
