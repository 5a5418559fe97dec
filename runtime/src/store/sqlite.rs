//! The SQLite store: WAL, one writer thread that commits queued writes in groups (one
//! transaction and one fsync for every write that arrived meanwhile), and a small pool of
//! reader connections.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc;

use a2a_protocol::TaskState;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::oneshot;

use super::*;

/// Most writes committed in one transaction.
const MAX_GROUP: usize = 512;

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Write {
    CreateTask(TaskRow, Option<MessageClaim>, Reply<()>),
    UpdateTask(TaskRow, u64, Option<MessageClaim>, Reply<u64>),
    PutRecord(Table, String, String, Reply<()>),
    DeleteRecord(Table, String, Reply<()>),
    FailUnsettled(u64, String, Reply<u64>),
    Flush(Reply<()>),
}

/// Answers a queued write once its group commits (or fails with the group's error).
type Answer = Box<dyn FnOnce(Option<&StoreError>)>;

/// The tables of JSON records (`id`, `body`).
#[derive(Clone, Copy, Debug)]
enum Table {
    Instances,
    Connections,
}

impl Table {
    fn name(self) -> &'static str {
        match self {
            Table::Instances => "instances",
            Table::Connections => "connections",
        }
    }
}

/// SQLite at `<data-dir>/a2a-edge.db`.
pub struct SqliteStore {
    path: PathBuf,
    writes: Mutex<Option<mpsc::Sender<Write>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    readers: Mutex<Vec<Connection>>,
}

fn open(path: &Path, fsync: bool) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if fsync { "FULL" } else { "NORMAL" })?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    Ok(conn)
}

impl SqliteStore {
    /// Opens (creating and migrating) the database and starts the writer thread.
    pub fn open(path: &Path, fsync: bool) -> anyhow::Result<SqliteStore> {
        let mut conn = open(path, fsync).map_err(|e| anyhow::anyhow!("cannot open database {}: {e}", path.display()))?;
        super::migrations::migrate(&mut conn).map_err(|e| anyhow::anyhow!("cannot migrate database {}: {e}", path.display()))?;
        let (tx, rx) = mpsc::channel();
        let writer = std::thread::Builder::new().name("a2a-edge-sqlite-writer".into()).spawn(move || write_loop(conn, rx))?;
        Ok(SqliteStore { path: path.to_owned(), writes: Mutex::new(Some(tx)), writer: Mutex::new(Some(writer)), readers: Mutex::new(Vec::new()) })
    }

    /// Commits what is queued and stops the writer; later writes fail as unavailable.
    pub fn close(&self) {
        drop(self.writes.lock().unwrap().take());
        if let Some(w) = self.writer.lock().unwrap().take() {
            let _ = w.join();
        }
    }

    fn send<T>(&self, make: impl FnOnce(Reply<T>) -> Write) -> Pending<T> {
        let (tx, rx) = oneshot::channel();
        match self.writes.lock().unwrap().as_ref() {
            Some(w) => {
                let _ = w.send(make(tx));
            }
            None => {
                let _ = tx.send(Err(StoreError::Unavailable("the store is closed".into())));
            }
        }
        rx
    }

    /// Queues an insert-or-replace of a JSON record.
    fn put_record(&self, table: Table, id: String, record: &impl serde::Serialize) -> Pending<()> {
        match serde_json::to_string(record) {
            Ok(body) => self.send(|r| Write::PutRecord(table, id, body, r)),
            Err(e) => {
                let (tx, rx) = oneshot::channel();
                let _ = tx.send(Err(StoreError::Invalid(e.to_string())));
                rx
            }
        }
    }

    /// Every record of a table, by id.
    fn records<T: serde::de::DeserializeOwned>(&self, table: Table) -> Result<Vec<T>, StoreError> {
        self.read(|c| {
            let bodies: Vec<String> = c.prepare_cached(&format!("SELECT body FROM {} ORDER BY id", table.name()))?.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
            bodies.iter().map(|b| serde_json::from_str(b).map_err(|e| StoreError::Invalid(format!("a stored {} record is unreadable: {e}", table.name())))).collect()
        })
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let conn = match self.readers.lock().unwrap().pop() {
            Some(c) => c,
            None => {
                let c = Connection::open_with_flags(&self.path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
                c.busy_timeout(std::time::Duration::from_secs(5))?;
                c
            }
        };
        let result = f(&conn);
        let mut pool = self.readers.lock().unwrap();
        if pool.len() < 8 {
            pool.push(conn);
        }
        result
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.close();
    }
}

fn write_loop(mut conn: Connection, rx: mpsc::Receiver<Write>) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(w) => group.push(w),
                Err(_) => break,
            }
        }
        commit_group(&mut conn, group);
    }
}

/// Runs a group in one transaction; each write in its own savepoint, so one failing write
/// fails alone. Replies go out only after the commit.
fn commit_group(conn: &mut Connection, group: Vec<Write>) {
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
        match w {
            Write::CreateTask(row, mid, reply) => replies.push(run(&tx, reply, |c| create_task(c, &row, mid.as_ref()))),
            Write::UpdateTask(row, expected, mid, reply) => replies.push(run(&tx, reply, |c| update_task(c, &row, expected, mid.as_ref()))),
            Write::PutRecord(table, id, body, reply) => replies.push(run(&tx, reply, |c| {
                c.execute(&format!("INSERT OR REPLACE INTO {} (id, body) VALUES (?1, ?2)", table.name()), params![id, body])?;
                Ok(())
            })),
            Write::DeleteRecord(table, id, reply) => replies.push(run(&tx, reply, |c| {
                c.execute(&format!("DELETE FROM {} WHERE id = ?1", table.name()), params![id])?;
                Ok(())
            })),
            Write::FailUnsettled(now, text, reply) => replies.push(run(&tx, reply, |c| fail_unsettled(c, now, &text))),
            Write::Flush(reply) => replies.push(Box::new(move |err| {
                let _ = reply.send(err.map_or(Ok(()), |e| Err(e.clone())));
            })),
        }
    }
    let commit_err = tx.commit().err().map(StoreError::from);
    for r in replies {
        r(commit_err.as_ref());
    }
}

/// Runs one write in a savepoint; returns the reply to send once the group committed.
fn run<T: Send + 'static>(tx: &rusqlite::Transaction<'_>, reply: Reply<T>, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Answer {
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
        Write::CreateTask(.., r) | Write::PutRecord(.., r) | Write::DeleteRecord(.., r) | Write::Flush(r) => {
            let _ = r.send(Err(e));
        }
        Write::UpdateTask(.., r) | Write::FailUnsettled(.., r) => {
            let _ = r.send(Err(e));
        }
    }
}

fn create_task(c: &Connection, row: &TaskRow, claim: Option<&MessageClaim>) -> Result<(), StoreError> {
    if let Some(claim) = claim {
        check_claim(c, &row.instance_id, claim)?;
    }
    touch_context(c, row)?;
    c.prepare_cached(
        "INSERT INTO tasks (id, instance_id, context_id, state, skill, created_at, updated_at, version, peer_id, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?9)",
    )?
    .execute(params![row.id, row.instance_id, row.context_id, row.state.number(), row.skill, row.created_at as i64, row.updated_at as i64, row.peer_id, row.body])
    .map_err(|e| match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => StoreError::Invalid(format!("task {} already exists", row.id)),
        e => e.into(),
    })?;
    if let Some(claim) = claim {
        record_claim(c, &row.instance_id, claim, &row.id)?;
    }
    Ok(())
}

fn update_task(c: &Connection, row: &TaskRow, expected: u64, claim: Option<&MessageClaim>) -> Result<u64, StoreError> {
    if let Some(claim) = claim {
        check_claim(c, &row.instance_id, claim)?;
    }
    let changed = c
        .prepare_cached(
            "UPDATE tasks SET context_id = ?3, state = ?4, skill = ?5, updated_at = ?6, version = version + 1, body = ?7
             WHERE id = ?1 AND instance_id = ?2 AND version = ?8",
        )?
        .execute(params![row.id, row.instance_id, row.context_id, row.state.number(), row.skill, row.updated_at as i64, row.body, expected as i64])?;
    if changed == 0 {
        return match get_task(c, &row.id, Some(&row.instance_id))? {
            Some(current) => Err(StoreError::Conflict(Box::new(current))),
            None => Err(StoreError::NotFound),
        };
    }
    if let Some(claim) = claim {
        record_claim(c, &row.instance_id, claim, &row.id)?;
    }
    touch_context(c, row)?;
    Ok(expected + 1)
}

/// What the idempotency index holds for a message id of an instance.
fn find_message(c: &Connection, instance_id: &str, message_id: &str) -> rusqlite::Result<Option<MessageRecord>> {
    c.prepare_cached("SELECT task_id, fingerprint FROM message_ids WHERE instance_id = ?1 AND message_id = ?2")?
        .query_row(params![instance_id, message_id], |r| Ok(MessageRecord { task_id: r.get(0)?, fingerprint: r.get(1)? }))
        .optional()
}

/// The compare-and-swap of a claim: the index must still hold what the claim replaces.
fn check_claim(c: &Connection, instance_id: &str, claim: &MessageClaim) -> Result<(), StoreError> {
    match find_message(c, instance_id, &claim.message_id)? {
        Some(current) if Some(&current) != claim.replaces.as_ref() => Err(StoreError::DuplicateMessage(current)),
        _ => Ok(()),
    }
}

/// Records a claimed message id for a task (replacing what it held).
fn record_claim(c: &Connection, instance_id: &str, claim: &MessageClaim, task_id: &str) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "INSERT INTO message_ids (instance_id, message_id, task_id, fingerprint) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (instance_id, message_id) DO UPDATE SET task_id = excluded.task_id, fingerprint = excluded.fingerprint",
    )?
    .execute(params![instance_id, claim.message_id, task_id, claim.fingerprint])
}

/// Binds a task's context to its instance (first seen, last seen).
fn touch_context(c: &Connection, row: &TaskRow) -> rusqlite::Result<usize> {
    c.prepare_cached(
        "INSERT INTO contexts (instance_id, context_id, first_seen, last_seen) VALUES (?1, ?2, ?3, ?3)
         ON CONFLICT (instance_id, context_id) DO UPDATE SET last_seen = excluded.last_seen",
    )?
    .execute(params![row.instance_id, row.context_id, row.updated_at as i64])
}

fn fail_unsettled(c: &Connection, now: u64, text: &str) -> Result<u64, StoreError> {
    let mut stmt = c.prepare("SELECT id, body FROM tasks WHERE state IN (?1, ?2)")?;
    let rows: Vec<(String, String)> =
        stmt.query_map(params![TaskState::Submitted.number(), TaskState::Working.number()], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
    for (id, body) in &rows {
        let body = crate::tasks::fail_body(body, now, text);
        c.execute("UPDATE tasks SET state = ?2, updated_at = ?3, version = version + 1, body = ?4 WHERE id = ?1", params![id, TaskState::Failed.number(), now as i64, body])?;
    }
    Ok(rows.len() as u64)
}

const TASK_COLUMNS: &str = "id, instance_id, context_id, state, skill, created_at, updated_at, version, body, peer_id";

fn task_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TaskRow> {
    Ok(TaskRow {
        id: r.get(0)?,
        instance_id: r.get(1)?,
        context_id: r.get(2)?,
        state: TaskState::from_number(r.get(3)?).unwrap_or(TaskState::Unspecified),
        skill: r.get(4)?,
        created_at: r.get::<_, i64>(5)? as u64,
        updated_at: r.get::<_, i64>(6)? as u64,
        version: r.get::<_, i64>(7)? as u64,
        body: r.get(8)?,
        peer_id: r.get(9)?,
    })
}

fn get_task(c: &Connection, id: &str, instance_id: Option<&str>) -> Result<Option<TaskRow>, StoreError> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = ?1 AND (?2 IS NULL OR instance_id = ?2)");
    Ok(c.prepare_cached(&sql)?.query_row(params![id, instance_id], task_row).optional()?)
}

/// Cursor token: `<updated_at>:<id>` of the last row of the previous page.
fn parse_token(token: &str) -> Result<(i64, String), StoreError> {
    token
        .split_once(':')
        .and_then(|(at, id)| Some((at.parse().ok()?, id.to_owned())))
        .ok_or_else(|| StoreError::Invalid(format!("pageToken {token:?} is not a token this server issued")))
}

fn list_tasks(c: &Connection, f: &TaskFilter) -> Result<TaskPage, StoreError> {
    let mut clauses = Vec::new();
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    let mut arg = |clause: &str, v: rusqlite::types::Value, clauses: &mut Vec<String>| {
        args.push(v);
        clauses.push(clause.replace('?', &format!("?{}", args.len())));
    };
    if let Some(i) = &f.instance_id {
        arg("instance_id = ?", i.clone().into(), &mut clauses);
    }
    if let Some(ctx) = &f.context_id {
        arg("context_id = ?", ctx.clone().into(), &mut clauses);
    }
    if let Some(s) = f.state {
        arg("state = ?", s.number().into(), &mut clauses);
    }
    if let Some(after) = f.updated_after {
        arg("updated_at >= ?", (after as i64).into(), &mut clauses);
    }
    let filter = if clauses.is_empty() { "1".to_owned() } else { clauses.join(" AND ") };
    let total: i64 = c.query_row(&format!("SELECT COUNT(*) FROM tasks WHERE {filter}"), rusqlite::params_from_iter(args.iter()), |r| r.get(0))?;
    let mut page_filter = filter.clone();
    let mut offset = 0;
    match &f.start {
        PageStart::First => {}
        PageStart::Offset(o) => offset = *o,
        PageStart::Token(t) => {
            let (at, id) = parse_token(t)?;
            args.push(at.into());
            args.push(id.into());
            let (a, b) = (args.len() - 1, args.len());
            page_filter = format!("{filter} AND (updated_at < ?{a} OR (updated_at = ?{a} AND id < ?{b}))");
        }
    }
    let limit = f.limit.max(1) as usize;
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE {page_filter} ORDER BY updated_at DESC, id DESC LIMIT {} OFFSET {offset}", limit + 1);
    let mut stmt = c.prepare(&sql)?;
    let mut found = stmt.query_map(rusqlite::params_from_iter(args.iter()), task_row)?;
    let (mut rows, mut bytes, mut more) = (Vec::new(), 0u64, false);
    for row in found.by_ref() {
        let mut row = row?;
        if let Some((artifacts, history)) = f.shape
            && let Ok(task) = serde_json::from_str::<a2a_protocol::Task>(&row.body)
        {
            row.body = serde_json::to_string(&a2a_protocol::list::shape(task, artifacts, history)).unwrap_or(row.body);
        }
        bytes += row.body.len() as u64;
        let over_bytes = f.max_bytes.is_some_and(|max| bytes > max) && !rows.is_empty();
        if rows.len() == limit || over_bytes {
            more = true;
            break;
        }
        rows.push(row);
    }
    let next_token = more.then(|| rows.last().map(|r| format!("{}:{}", r.updated_at, r.id))).flatten();
    Ok(TaskPage { tasks: rows, next_token, total: total as u32 })
}

/// `state IN (…)` over the states that are not terminal.
fn active_states() -> String {
    let n: Vec<String> = [TaskState::Submitted, TaskState::Working, TaskState::InputRequired, TaskState::AuthRequired].iter().map(|s| s.number().to_string()).collect();
    format!("state IN ({})", n.join(","))
}

fn contexts(c: &Connection, instance_id: Option<&str>, context_id: Option<&str>, limit: u32) -> Result<Vec<ContextSummary>, StoreError> {
    let sql = format!(
        "SELECT instance_id, context_id, COUNT(*), SUM({}), MIN(created_at), MAX(updated_at) FROM tasks
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
        })
    })?;
    let rows = rows.collect::<Result<_, _>>()?;
    Ok(rows)
}

impl Store for SqliteStore {
    fn create_task(&self, row: TaskRow, claim: Option<MessageClaim>) -> Pending<()> {
        self.send(|r| Write::CreateTask(row, claim, r))
    }

    fn update_task(&self, row: TaskRow, expected: u64, claim: Option<MessageClaim>) -> Pending<u64> {
        self.send(|r| Write::UpdateTask(row, expected, claim, r))
    }

    fn put_instance(&self, record: InstanceRecord) -> Pending<()> {
        self.put_record(Table::Instances, record.id.clone(), &record)
    }

    fn delete_instance(&self, id: String) -> Pending<()> {
        self.send(|r| Write::DeleteRecord(Table::Instances, id, r))
    }

    fn put_connection(&self, record: ConnectionRecord) -> Pending<()> {
        self.put_record(Table::Connections, record.id.clone(), &record)
    }

    fn delete_connection(&self, id: String) -> Pending<()> {
        self.send(|r| Write::DeleteRecord(Table::Connections, id, r))
    }

    fn connections(&self) -> Result<Vec<ConnectionRecord>, StoreError> {
        self.records(Table::Connections)
    }

    fn fail_unsettled(&self, now: u64, status_text: String) -> Pending<u64> {
        self.send(|r| Write::FailUnsettled(now, status_text, r))
    }

    fn get_task(&self, id: &str, instance_id: Option<&str>) -> Result<Option<TaskRow>, StoreError> {
        self.read(|c| get_task(c, id, instance_id))
    }

    fn list_tasks(&self, filter: &TaskFilter) -> Result<TaskPage, StoreError> {
        self.read(|c| list_tasks(c, filter))
    }

    fn find_message(&self, instance_id: &str, message_id: &str) -> Result<Option<MessageRecord>, StoreError> {
        self.read(|c| Ok(find_message(c, instance_id, message_id)?))
    }

    fn contexts(&self, instance_id: Option<&str>, context_id: Option<&str>, limit: u32) -> Result<Vec<ContextSummary>, StoreError> {
        self.read(|c| contexts(c, instance_id, context_id, limit))
    }

    fn state_counts(&self) -> Result<Vec<(String, TaskState, u64)>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare_cached("SELECT instance_id, state, COUNT(*) FROM tasks GROUP BY instance_id, state")?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)? as u64)))?;
            let mut out = Vec::new();
            for row in rows {
                let (instance, state, n) = row?;
                out.push((instance, TaskState::from_number(state).unwrap_or(TaskState::Unspecified), n));
            }
            Ok(out)
        })
    }

    fn instances(&self) -> Result<Vec<InstanceRecord>, StoreError> {
        self.records(Table::Instances)
    }

    fn flush(&self) -> Pending<()> {
        self.send(Write::Flush)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, at: u64) -> TaskRow {
        TaskRow {
            id: id.into(),
            instance_id: "i".into(),
            context_id: "c".into(),
            state: TaskState::Submitted,
            skill: "chat".into(),
            created_at: at,
            updated_at: at,
            version: 1,
            body: format!(r#"{{"id":"{id}","contextId":"c","status":{{"state":"TASK_STATE_SUBMITTED"}}}}"#),
            peer_id: None,
        }
    }

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("t.db"), false).unwrap();
        (dir, s)
    }

    #[tokio::test]
    async fn message_claims_compare_and_swap() {
        let (_d, s) = store();
        let claim = |fp: &str, replaces: Option<MessageRecord>| Some(MessageClaim { message_id: "m".into(), fingerprint: fp.into(), replaces });
        let t1 = MessageRecord { task_id: "t1".into(), fingerprint: "f1".into() };
        settled(s.create_task(row("t1", 1), claim("f1", None))).await.unwrap();
        assert_eq!(s.find_message("i", "m").unwrap(), Some(t1.clone()));
        // A writer that saw nothing loses to the one that claimed first, and writes nothing.
        let dup = settled(s.create_task(row("t2", 2), claim("f1", None))).await.unwrap_err();
        assert_eq!(dup, StoreError::DuplicateMessage(t1.clone()));
        assert!(s.get_task("t2", None).unwrap().is_none(), "a refused create writes nothing");
        // One that saw the current record replaces it (a new message reusing the id).
        settled(s.create_task(row("t2", 2), claim("f2", Some(t1.clone())))).await.unwrap();
        let t2 = MessageRecord { task_id: "t2".into(), fingerprint: "f2".into() };
        assert_eq!(s.find_message("i", "m").unwrap(), Some(t2.clone()));
        // An update with a stale claim changes nothing.
        let mut r = row("t2", 2);
        r.body = "changed".into();
        assert_eq!(settled(s.update_task(r.clone(), 1, claim("f3", Some(t1)))).await.unwrap_err(), StoreError::DuplicateMessage(t2.clone()));
        assert_eq!(s.get_task("t2", None).unwrap().unwrap().version, 1);
        assert_eq!(settled(s.update_task(r, 1, claim("f3", Some(t2)))).await.unwrap(), 2);
        assert_eq!(s.find_message("i", "m").unwrap().unwrap().fingerprint, "f3");
        assert_eq!(s.find_message("other", "m").unwrap(), None);
    }

    #[tokio::test]
    async fn updates_compare_and_swap() {
        let (_d, s) = store();
        settled(s.create_task(row("t", 1), None)).await.unwrap();
        let mut r = row("t", 2);
        r.state = TaskState::Working;
        assert_eq!(settled(s.update_task(r.clone(), 1, None)).await.unwrap(), 2);
        match settled(s.update_task(r.clone(), 1, None)).await.unwrap_err() {
            StoreError::Conflict(cur) => assert_eq!((cur.version, cur.state), (2, TaskState::Working)),
            e => panic!("{e:?}"),
        }
        r.id = "missing".into();
        assert_eq!(settled(s.update_task(r, 1, None)).await.unwrap_err(), StoreError::NotFound);
    }

    #[tokio::test]
    async fn cursor_pages_cover_everything_newest_first() {
        let (_d, s) = store();
        for i in 0..7 {
            settled(s.create_task(row(&format!("t{i}"), 100 + i / 2), None)).await.unwrap();
        }
        let mut seen = Vec::new();
        let mut start = PageStart::First;
        loop {
            let page = s.list_tasks(&TaskFilter { limit: 3, start, instance_id: Some("i".into()), ..Default::default() }).unwrap();
            assert_eq!(page.total, 7);
            seen.extend(page.tasks.iter().map(|t| t.id.clone()));
            match page.next_token {
                Some(t) => start = PageStart::Token(t),
                None => break,
            }
        }
        assert_eq!(seen, ["t6", "t5", "t4", "t3", "t2", "t1", "t0"]);
        assert!(matches!(s.list_tasks(&TaskFilter { limit: 3, start: PageStart::Token("x".into()), ..Default::default() }), Err(StoreError::Invalid(_))));
    }

    #[tokio::test]
    async fn unsettled_tasks_fail_on_recovery() {
        let (_d, s) = store();
        settled(s.create_task(row("t", 1), None)).await.unwrap();
        assert_eq!(settled(s.fail_unsettled(5, "interrupted by runtime restart".into())).await.unwrap(), 1);
        let t = s.get_task("t", None).unwrap().unwrap();
        assert_eq!(t.state, TaskState::Failed);
        assert!(t.body.contains("interrupted by runtime restart"));
    }
}
