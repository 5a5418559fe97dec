//! The SQLite store: WAL, one writer thread that commits queued writes in groups (see
//! [`writes`]) and appends task writes to a log it folds into the tables later (see [`log`]),
//! and a pool of reader threads, each with its own read-only connection, that run the reads off
//! the async runtime.

mod log;
mod push;
mod reads;
mod rows;
mod schema;
mod writes;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use a2a_protocol::TaskState;
use rusqlite::{Connection, OptionalExtension};

use super::*;
use writes::{Table, Write};

/// Reader threads (and connections).
const READERS: usize = 4;
/// Connections kept for point reads on the calling thread.
const INLINE_READERS: usize = 8;

/// A read waiting for a reader connection.
type Job = Box<dyn FnOnce(Result<&Connection, StoreError>) + Send>;

/// SQLite at `<data-dir>/a2a-edge.db`.
pub struct SqliteStore {
    path: std::path::PathBuf,
    writes: Mutex<Option<mpsc::Sender<Write>>>,
    reads: Mutex<Option<mpsc::Sender<Job>>>,
    /// Idle connections of [`SqliteStore::read_here`].
    inline: Mutex<Vec<Connection>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Notified when notifications are queued or an attempt is recorded.
    signal: Arc<tokio::sync::Notify>,
    /// Notifications the outbox gave up at its bound.
    dropped: Arc<AtomicU64>,
    /// The task log's writes not folded yet.
    unfolded: Arc<log::Unfolded>,
}

/// Statements run by the SQLite stores of this process (one per process in a server).
static STATEMENTS: AtomicU64 = AtomicU64::new(0);

/// Counts every statement a connection starts: a C callback that adds one, where rusqlite's
/// `trace_v2` would make each statement's event (its SQL text checked as UTF-8) for a closure.
fn count_statements(conn: &Connection) {
    unsafe extern "C" fn counted(
        _event: std::ffi::c_uint,
        _context: *mut std::ffi::c_void,
        _statement: *mut std::ffi::c_void,
        _sql: *mut std::ffi::c_void,
    ) -> std::ffi::c_int {
        STATEMENTS.fetch_add(1, Ordering::Relaxed);
        0
    }
    // SAFETY: the handle is the open connection's, for this call only; the callback touches
    // none of its arguments, and no context pointer is kept.
    unsafe {
        rusqlite::ffi::sqlite3_trace_v2(
            conn.handle(),
            rusqlite::ffi::SQLITE_TRACE_STMT as std::ffi::c_uint,
            Some(counted),
            std::ptr::null_mut(),
        );
    }
}

fn open(path: &Path, fsync: bool) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    count_statements(&conn);
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if fsync { "FULL" } else { "NORMAL" })?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // The journal of each write's savepoint in a group commit (the pages the write changed)
    // stays in memory instead of spilling past 64 KiB into a file created, written and unlinked
    // in the temporary directory (`runtime/bin/tests/store_temp_files.rs`).
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(conn)
}

fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let c = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    c.busy_timeout(std::time::Duration::from_secs(5))?;
    count_statements(&c);
    Ok(c)
}

/// Runs reads from the shared queue until it closes; the connection is opened on first use (and
/// again after a failure to open).
fn read_loop(path: &Path, jobs: &Mutex<mpsc::Receiver<Job>>) {
    let mut conn: Option<Connection> = None;
    loop {
        let job = jobs.lock().unwrap().recv();
        let Ok(job) = job else { return };
        if conn.is_none() {
            match open_reader(path) {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    job(Err(e));
                    continue;
                }
            }
        }
        job(Ok(conn.as_ref().expect("opened above")));
    }
}

impl SqliteStore {
    /// Opens (creating and migrating) the database and starts the writer and reader threads.
    pub fn open(path: &Path, fsync: bool) -> anyhow::Result<SqliteStore> {
        let mut conn = open(path, fsync)
            .map_err(|e| anyhow::anyhow!("cannot open database {}: {e}", path.display()))?;
        schema::migrate(&mut conn)
            .map_err(|e| anyhow::anyhow!("cannot migrate database {}: {e}", path.display()))?;
        let unfolded = Arc::new(log::Unfolded::default());
        let task_log = log::Log::open(&mut conn, unfolded.clone())
            .map_err(|e| anyhow::anyhow!("cannot fold the task log of {}: {e}", path.display()))?;
        let signal = Arc::new(tokio::sync::Notify::new());
        let outbox = push::Outbox::load(&conn, signal.clone())
            .map_err(|e| anyhow::anyhow!("cannot read push configs of {}: {e}", path.display()))?;
        let dropped = outbox.dropped.clone();
        let (tx, rx) = mpsc::channel();
        let mut threads = vec![
            std::thread::Builder::new()
                .name("a2a-edge-sqlite-writer".into())
                .spawn(move || writes::write_loop(conn, outbox, task_log, Lease::default(), rx))?,
        ];
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for n in 0..READERS {
            let (path, queue) = (path.to_owned(), queue.clone());
            threads.push(
                std::thread::Builder::new()
                    .name(format!("a2a-edge-sqlite-reader-{n}"))
                    .spawn(move || read_loop(&path, &queue))?,
            );
        }
        Ok(SqliteStore {
            path: path.to_owned(),
            writes: Mutex::new(Some(tx)),
            reads: Mutex::new(Some(jobs)),
            inline: Mutex::default(),
            threads: Mutex::new(threads),
            signal,
            dropped,
            unfolded,
        })
    }

    fn stop(&self) {
        drop(self.writes.lock().unwrap().take());
        drop(self.reads.lock().unwrap().take());
        self.inline.lock().unwrap().clear();
        for t in std::mem::take(&mut *self.threads.lock().unwrap()) {
            let _ = t.join();
        }
    }

    fn send<T>(&self, make: impl FnOnce(Reply<T>) -> Write) -> Pending<T> {
        let (reply, pending) = Pending::new();
        if let Some(w) = self.writes.lock().unwrap().as_ref() {
            let _ = w.send(make(reply));
        }
        pending
    }

    /// Runs `f` on a reader connection, once the task log is folded (so it reads the tables
    /// whole; a listing then finds the task a write just acknowledged).
    fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Pending<T> {
        let (reply, pending) = Pending::new();
        let job: Job = Box::new(move |conn| {
            let _ = reply.send(conn.and_then(f));
        });
        let Some(readers) = self.reads.lock().unwrap().clone() else {
            return pending;
        };
        if self.unfolded.is_empty() {
            let _ = readers.send(job);
        } else {
            // A fold that fails (a full disk) leaves its records for later; the read runs on the
            // tables as they are, as reads did before the log, and the store's health says why.
            let after_fold = move |folded: Result<(), StoreError>| {
                health::record(&folded);
                let _ = readers.send(job);
            };
            if let Some(w) = self.writes.lock().unwrap().as_ref() {
                let _ = w.send(Write::Fold(Box::new(after_fold)));
            }
        }
        pending
    }

    /// Runs a point read (one row by its key) on the calling thread: a few microseconds, where
    /// the hand-off to a reader thread and back costs two thread wake-ups. In WAL mode a reader
    /// never waits for the writer.
    fn read_here<T>(&self, f: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Pending<T> {
        if self.reads.lock().unwrap().is_none() {
            return Pending::ready(Err(gone()));
        }
        let idle = self.inline.lock().unwrap().pop();
        let conn = match idle {
            Some(c) => c,
            None => match open_reader(&self.path) {
                Ok(c) => c,
                Err(e) => return Pending::ready(Err(e)),
            },
        };
        let result = f(&conn);
        let mut idle = self.inline.lock().unwrap();
        if idle.len() < INLINE_READERS {
            idle.push(conn);
        }
        Pending::ready(result)
    }

    /// Queues an insert-or-replace of a JSON record.
    fn put_record(&self, table: Table, id: String, record: &impl serde::Serialize) -> Pending<()> {
        match serde_json::to_string(record) {
            Ok(body) => self.send(|r| Write::PutRecord(table, id, body, r)),
            Err(e) => Pending::ready(Err(StoreError::Invalid(e.to_string()))),
        }
    }
}

/// Copies the database at `db` to the new file `dest` with SQLite's online backup: a consistent
/// copy while a server writes it (a copy of the `.db` file alone may lack what the WAL holds).
/// The copy is made in `<dest>.partial` and renamed when complete, so `dest` never holds half a
/// database; a failed run removes its partial file, and one left by a killed run is removed by
/// the next. Gives up after `timeout`. Returns the tasks the copy holds.
pub fn backup(db: &Path, dest: &Path, timeout: std::time::Duration) -> anyhow::Result<u64> {
    if !db.exists() {
        anyhow::bail!(
            "there is no database at {}: name the server's --data-dir",
            db.display()
        );
    }
    if dest.exists() {
        anyhow::bail!(
            "{} exists already: name a new file (a backup never overwrites)",
            dest.display()
        );
    }
    let mut partial = dest.as_os_str().to_owned();
    partial.push(".partial");
    let partial = std::path::PathBuf::from(partial);
    remove_copy(&partial);
    let copied = copy_database(db, &partial, timeout).and_then(|tasks| {
        // A link, not a rename: it fails where `dest` appeared meanwhile, never replacing it.
        std::fs::hard_link(&partial, dest)
            .map_err(|e| anyhow::anyhow!("cannot name the copy {}: {e}", dest.display()))?;
        remove_copy(&partial);
        Ok(tasks)
    });
    if copied.is_err() {
        remove_copy(&partial);
    }
    copied
}

/// Removes a database file and the journal files beside it, if there.
fn remove_copy(path: &Path) {
    let _ = std::fs::remove_file(path);
    for suffix in ["-journal", "-wal", "-shm"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
}

/// Copies `db` into the new file `to` within `timeout`, checks it, and counts its tasks.
fn copy_database(db: &Path, to: &Path, timeout: std::time::Duration) -> anyhow::Result<u64> {
    let deadline = std::time::Instant::now() + timeout;
    let src = open_reader(db).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", db.display()))?;
    // The whole copy reads one snapshot under one read transaction. Without it each step reads
    // afresh, and a write by the server between two steps restarts the copy from its first page:
    // under a steady write load it never finished. In WAL mode the server's writes go on.
    src.execute_batch("BEGIN")?;
    src.query_row("SELECT COUNT(*) FROM sqlite_schema", [], |_| Ok(()))?;
    let mut copy =
        Connection::open(to).map_err(|e| anyhow::anyhow!("cannot create {}: {e}", to.display()))?;
    {
        let backup = rusqlite::backup::Backup::new(&src, &mut copy)?;
        loop {
            match backup.step(4096)? {
                rusqlite::backup::StepResult::Done => break,
                rusqlite::backup::StepResult::More => {}
                _ => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
            if std::time::Instant::now() > deadline {
                anyhow::bail!(
                    "the copy was not done within {} s: give it longer with --timeout",
                    timeout.as_secs_f64()
                );
            }
        }
    }
    copy.pragma_update(None, "journal_mode", "DELETE")?;
    let ok: String = copy.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    if ok != "ok" {
        anyhow::bail!("the copy failed its integrity check: {ok}");
    }
    // The tasks of the copy's task log are folded when a store opens it.
    Ok(copy.query_row(
        "SELECT (SELECT COUNT(*) FROM tasks) + (SELECT COUNT(*) FROM task_log WHERE created)",
        [],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Tasks for SqliteStore {
    fn system(&self) -> &'static str {
        "sqlite"
    }

    fn create_task(
        &self,
        row: TaskRow,
        claim: Option<MessageClaim>,
        push: Option<PushConfig>,
    ) -> Pending<()> {
        self.send(|r| Write::CreateTask(row, claim, push, r))
    }

    fn update_task(
        &self,
        row: TaskRow,
        expected: u64,
        claim: Option<MessageClaim>,
        frames: Vec<NewFrame>,
    ) -> Pending<Written> {
        self.send(|r| Write::UpdateTask(row, expected, claim, frames, r))
    }

    fn fail_unsettled(&self, now: u64, status_text: String) -> Pending<u64> {
        self.send(|r| Write::FailUnsettled(now, status_text, r))
    }

    fn note_task(&self, instance_id: String, task_id: String, note: String) -> Pending<()> {
        self.send(|r| Write::NoteTask(instance_id, task_id, note, r))
    }

    fn task_note(&self, instance_id: String, task_id: String) -> Pending<Option<String>> {
        self.read_here(|c| reads::task_note(c, &instance_id, &task_id))
    }

    fn get_task(&self, id: String, instance_id: Option<String>) -> Pending<Option<TaskRow>> {
        if let Some(row) = self.unfolded.task(&id, instance_id.as_deref()) {
            return Pending::ready(Ok(Some(row)));
        }
        self.read_here(|c| reads::get_task(c, &id, instance_id.as_deref()))
    }

    fn list_tasks(&self, filter: TaskFilter) -> Pending<TaskPage> {
        self.read(move |c| reads::list_tasks(c, &filter))
    }

    fn find_message(
        &self,
        instance_id: String,
        message_id: String,
    ) -> Pending<Option<MessageRecord>> {
        if let Some(found) = self.unfolded.message(&instance_id, &message_id) {
            return Pending::ready(Ok(Some(found)));
        }
        self.read_here(|c| Ok(reads::find_message(c, &instance_id, &message_id)?))
    }

    fn contexts(
        &self,
        instance_id: Option<String>,
        context_id: Option<String>,
        limit: u32,
    ) -> Pending<Vec<ContextSummary>> {
        self.read(move |c| reads::contexts(c, instance_id.as_deref(), context_id.as_deref(), limit))
    }

    fn state_counts(&self) -> Pending<Vec<(String, TaskState, u64)>> {
        self.read(reads::state_counts)
    }
}

impl FrameLog for SqliteStore {
    fn append_frames(
        &self,
        instance_id: String,
        task_id: String,
        frames: Vec<NewFrame>,
    ) -> Pending<u64> {
        self.send(|r| Write::AppendFrames(instance_id, task_id, frames, r))
    }

    fn frames(
        &self,
        instance_id: String,
        task_id: String,
        after: u64,
        limit: u32,
    ) -> Pending<FramePage> {
        self.read(move |c| reads::frames(c, &instance_id, &task_id, after, limit))
    }

    fn prune_frames(&self, before: u64) -> Pending<u64> {
        self.send(|r| Write::PruneFrames(before, r))
    }
}

impl PushOutbox for SqliteStore {
    fn put_push_config(&self, config: PushConfig) -> Pending<()> {
        self.send(|r| Write::PutPushConfig(config, r))
    }

    fn delete_push_config(&self, instance_id: String, task_id: String, id: String) -> Pending<()> {
        self.send(|r| Write::DeletePushConfig(instance_id, task_id, id, r))
    }

    fn push_configs(&self, instance_id: String, task_id: String) -> Pending<Vec<PushConfig>> {
        self.read_here(|c| push::configs(c, &instance_id, &task_id))
    }

    fn due_deliveries(&self, look: DueLook) -> Pending<DueDeliveries> {
        self.read(move |c| push::due(c, &look))
    }

    fn attempted(&self, seq: u64, now: u64, attempt: Attempt) -> Pending<()> {
        self.send(|r| Write::Attempted(seq, now, attempt, r))
    }

    fn push_status(
        &self,
        instance_id: String,
        task_id: Option<String>,
    ) -> Pending<Vec<PushStatus>> {
        self.read(move |c| push::status(c, &instance_id, task_id.as_deref()))
    }

    fn outbox_signal(&self) -> Arc<tokio::sync::Notify> {
        self.signal.clone()
    }

    fn push_dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Records for SqliteStore {
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

    fn instances(&self) -> Pending<Vec<InstanceRecord>> {
        self.read(|c| reads::records(c, Table::Instances.name()))
    }

    fn connections(&self) -> Pending<Vec<ConnectionRecord>> {
        self.read(|c| reads::records(c, Table::Connections.name()))
    }
}

impl KeyValues for SqliteStore {
    fn kv_get(&self, at: KvKey) -> Pending<Option<Vec<u8>>> {
        self.read_here(|c| {
            Ok(c.prepare_cached(
                "SELECT value FROM agent_kv WHERE scope = ?1 AND bucket = ?2 AND key = ?3",
            )?
            .query_row(rusqlite::params![at.scope, at.bucket, at.key], |r| r.get(0))
            .optional()?)
        })
    }

    fn kv_set(&self, at: KvKey, value: Vec<u8>, quota: u64) -> Pending<()> {
        self.send(|r| Write::KvSet(at, value, quota, r))
    }

    fn kv_delete(&self, at: KvKey) -> Pending<()> {
        self.send(|r| Write::KvDelete(at, r))
    }

    fn kv_keys(
        &self,
        scope: String,
        bucket: String,
        offset: u64,
        limit: u32,
    ) -> Pending<Vec<String>> {
        self.read(move |c| {
            let mut q = c.prepare_cached(
                "SELECT key FROM agent_kv WHERE scope = ?1 AND bucket = ?2 ORDER BY key LIMIT ?3 OFFSET ?4",
            )?;
            let keys = q
                .query_map(
                    rusqlite::params![scope, bucket, limit, offset as i64],
                    |r| r.get(0),
                )?
                .collect::<Result<_, _>>()?;
            Ok(keys)
        })
    }
}

impl Cluster for SqliteStore {
    fn renew_leases(&self, now: u64, task_ids: Vec<String>) -> Pending<Vec<String>> {
        self.send(|r| Write::RenewLeases(now, task_ids, r))
    }

    fn expired_leases(&self, now: u64, limit: u32) -> Pending<Vec<TaskRow>> {
        self.read(move |c| reads::expired_leases(c, now, limit))
    }
}

impl Store for SqliteStore {
    fn flush(&self) -> Pending<()> {
        self.send(Write::Flush)
    }

    fn statements(&self) -> u64 {
        STATEMENTS.load(Ordering::Relaxed)
    }

    fn close(&self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("t.db"), false).unwrap();
        (dir, s)
    }

    #[tokio::test]
    async fn keeps_the_store_contract() {
        let (_d, s) = store();
        crate::store::contract::check(&s).await;
    }

    /// What a kill -9 right after a write's commit leaves: records in the task log, none folded.
    /// The next start folds them, and every read finds them in the tables.
    #[tokio::test]
    async fn a_crash_between_the_append_and_the_fold_loses_nothing() {
        use crate::store::contract::row;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let claim = |m: &str| MessageClaim {
            message_id: m.into(),
            fingerprint: format!("f-{m}"),
            replaces: None,
        };
        {
            let mut conn = open(&path, false).unwrap();
            schema::migrate(&mut conn).unwrap();
            let mut log = log::Log::open(&mut conn, Arc::default()).unwrap();
            let lease = Lease::default();
            let tx = conn.transaction().unwrap();
            log.create(&tx, &lease, &row("a", 10), Some(&claim("m1")))
                .unwrap();
            log.create(&tx, &lease, &row("b", 11), None).unwrap();
            let done = TaskRow {
                state: TaskState::Completed,
                body: r#"{"id":"a","status":{"state":"TASK_STATE_COMPLETED"}}"#.into(),
                ..row("a", 12)
            };
            let frame = NewFrame::status(r#"{"statusUpdate":{"taskId":"a"}}"#.into());
            log.update(&tx, &lease, &done, 1, Some(&claim("m2")), &[frame])
                .unwrap();
            tx.commit().unwrap();
            log.committed();
            let logged: i64 = conn
                .query_row("SELECT COUNT(*) FROM task_log", [], |r| r.get(0))
                .unwrap();
            assert_eq!(logged, 3, "the writes are in the log, not folded");
            // The process dies here: no fold, no shutdown.
        }
        let s = SqliteStore::open(&path, false).unwrap();
        let logged: i64 = Connection::open(&path)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM task_log", [], |r| r.get(0))
            .unwrap();
        assert_eq!(logged, 0, "the start folded the log");
        let a = s.get_task("a".into(), None).await.unwrap().unwrap();
        assert_eq!(
            (a.state, a.version, a.created_at),
            (TaskState::Completed, 2, 10)
        );
        let page = s
            .list_tasks(TaskFilter {
                instance_id: Some("i".into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        let ids: Vec<&str> = page.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!((page.total, ids), (2, vec!["a", "b"]));
        let counts = s.state_counts().await.unwrap();
        assert!(
            counts.contains(&("i".into(), TaskState::Completed, 1)),
            "{counts:?}"
        );
        assert!(
            counts.contains(&("i".into(), TaskState::Submitted, 1)),
            "{counts:?}"
        );
        let contexts = s.contexts(Some("i".into()), None, 10).await.unwrap();
        assert_eq!(
            (contexts[0].task_count, contexts[0].active_count),
            (2, 1),
            "{contexts:?}"
        );
        for m in ["m1", "m2"] {
            let found = s.find_message("i".into(), m.into()).await.unwrap();
            assert_eq!(found.map(|f| f.task_id).as_deref(), Some("a"), "{m}");
        }
        let frames = s.frames("i".into(), "a".into(), 0, 10).await.unwrap();
        assert_eq!((frames.last_seq, frames.frames.len()), (1, 1));
    }

    /// A write's task and message id are read from memory until the log is folded; any other
    /// read folds it first.
    #[tokio::test]
    async fn unfolded_writes_are_read_at_once() {
        use crate::store::contract::row;
        let (_d, s) = store();
        let claim = MessageClaim {
            message_id: "m".into(),
            fingerprint: "f".into(),
            replaces: None,
        };
        s.create_task(row("t", 1), Some(claim), None).await.unwrap();
        assert!(!s.unfolded.is_empty(), "the write is logged, not folded");
        assert_eq!(
            s.get_task("t".into(), Some("i".into()))
                .await
                .unwrap()
                .unwrap()
                .id,
            "t"
        );
        assert!(
            s.get_task("t".into(), Some("other".into()))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            s.find_message("i".into(), "m".into())
                .await
                .unwrap()
                .unwrap()
                .task_id,
            "t"
        );
        let page = s
            .list_tasks(TaskFilter {
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(page.total, 1);
        assert!(s.unfolded.is_empty(), "the listing folded the log first");
        assert_eq!(s.get_task("t".into(), None).await.unwrap().unwrap().id, "t");
    }

    /// A folded task's row stays in memory for `get_task`, and a write outside the log (a task
    /// with a push config is written directly) is never answered with the row before it.
    #[tokio::test]
    async fn a_task_read_from_memory_is_never_stale() {
        use crate::store::contract::row;
        let (dir, s) = store();
        s.create_task(row("t", 1), None, None).await.unwrap();
        s.list_tasks(TaskFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
        assert!(s.unfolded.is_empty(), "the listing folded the log");
        // Read from memory: the table's row is gone behind the store's back.
        let other = Connection::open(dir.path().join("t.db")).unwrap();
        other
            .execute("UPDATE tasks SET skill = 'changed' WHERE id = 't'", [])
            .unwrap();
        let got = s.get_task("t".into(), None).await.unwrap().unwrap();
        assert_eq!(got.skill, "chat", "the folded row is read from memory");
        other
            .execute("UPDATE tasks SET skill = 'chat' WHERE id = 't'", [])
            .unwrap();
        // A direct write of the task: the read after it finds the new row.
        let config = PushConfig {
            instance_id: "i".into(),
            task_id: "t".into(),
            id: "p".into(),
            body: r#"{"url":"https://example.com/hook"}"#.into(),
        };
        s.put_push_config(config).await.unwrap();
        let working = TaskRow {
            state: TaskState::Working,
            ..row("t", 2)
        };
        s.update_task(working, 1, None, Vec::new()).await.unwrap();
        let got = s.get_task("t".into(), None).await.unwrap().unwrap();
        assert_eq!((got.version, got.state), (2, TaskState::Working));
    }

    #[tokio::test]
    async fn reads_after_close_fail_as_unavailable() {
        let (_d, s) = store();
        s.close();
        assert!(matches!(
            s.get_task("t".into(), None).await,
            Err(StoreError::Unavailable(_))
        ));
        assert!(matches!(s.flush().await, Err(StoreError::Unavailable(_))));
    }
}
