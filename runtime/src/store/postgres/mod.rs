//! The PostgreSQL store (`[storage] backend = "postgres"`): the same contract as SQLite, for
//! several nodes on one database. There is no single writer here, so every rule the SQLite writer
//! thread keeps by running alone is a constraint or a conditional write: a task's version is a
//! compare-and-swap (`UPDATE … WHERE version = $n`), a message claim inserts only where nothing is
//! (`ON CONFLICT DO NOTHING`) or replaces only what it expects, and a losing write rolls its whole
//! transaction back. Each call runs on a pooled connection in a task of its own.

mod conn;
mod push;
mod reads;
mod schema;
mod writes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use a2a_protocol::TaskState;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use super::*;
use crate::sealing::SecretKey;

/// Connections kept in the pool.
const POOL: usize = 16;

/// A store on a PostgreSQL database.
pub struct PostgresStore {
    pool: Pool,
    config: tokio_postgres::Config,
    lease: Arc<Lease>,
    signal: Arc<tokio::sync::Notify>,
    closed: Arc<AtomicBool>,
    /// Whether the LISTEN connection is up.
    listening: Arc<AtomicBool>,
    statements: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
    /// The longest a call may take, the wait for a connection included.
    timeout: std::time::Duration,
    /// Seals what push configs carry (webhook tokens and credentials) at rest.
    key: Option<Arc<SecretKey>>,
}

/// The name a push config's body is sealed under: a body moved to another config does not open.
fn sealed_name(p: &PushConfig) -> String {
    format!("push:{}/{}/{}", p.instance_id, p.task_id, p.id)
}

/// A push config read from the database, its body opened. One that does not open (damaged, or
/// sealed under another key) fails alone: its body is left empty, which its readers take as an
/// unreadable config (a delivery gives it up), and the others go on.
fn opened(key: &Option<Arc<SecretKey>>, p: &mut PushConfig) {
    let Some(key) = key else { return };
    match key.open_text(&sealed_name(p), &p.body) {
        Ok(body) => p.body = body,
        Err(e) => {
            tracing::error!(instance = %p.instance_id, task = %p.task_id, config = %p.id, error = %e, "a push config does not open");
            p.body = String::new();
        }
    }
}

/// What went wrong, with the server's message when it sent one (the plain `Display` of an error
/// the server answered is only "db error").
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        StoreError::Unavailable(format!("database error: {}", describe(&e)))
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        StoreError::Unavailable(format!("no database connection: {e}"))
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`), checks it answers and brings
    /// its schema up to date; this node's running tasks take `lease`.
    pub async fn connect(
        url: &str,
        lease: Lease,
        timeout: std::time::Duration,
    ) -> anyhow::Result<PostgresStore> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| anyhow::anyhow!("the PostgreSQL URL is not valid: {e}"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(timeout);
        }
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the PostgreSQL pool: {e}"))?;
        let mut client = tokio::time::timeout(timeout, pool.get())
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "cannot connect to PostgreSQL: no answer within {} ms",
                    timeout.as_millis()
                )
            })?
            .map_err(|e| anyhow::anyhow!("cannot connect to PostgreSQL: {e}"))?;
        schema::migrate(&mut client)
            .await
            .map_err(|e| anyhow::anyhow!("cannot migrate the PostgreSQL schema: {e}"))?;
        drop(client);
        Ok(PostgresStore {
            pool,
            config,
            lease: Arc::new(lease),
            signal: Arc::new(tokio::sync::Notify::new()),
            closed: Arc::default(),
            listening: Arc::default(),
            statements: Arc::default(),
            dropped: Arc::default(),
            timeout,
            key: None,
        })
    }

    /// This store, sealing push configs at rest with `key` (the cluster key).
    pub fn sealing(self, key: SecretKey) -> PostgresStore {
        PostgresStore {
            key: Some(Arc::new(key)),
            ..self
        }
    }

    /// A push config as the database keeps it: its body sealed, when there is a key.
    fn sealed(&self, mut p: PushConfig) -> PushConfig {
        if let Some(key) = &self.key {
            p.body = key.seal_text(&sealed_name(&p), &p.body);
        }
        p
    }

    /// Runs `op` on a pooled connection in a task of its own; its answer through a [`Pending`].
    fn run<T: Send + 'static>(
        &self,
        op: impl for<'c> FnOnce(&'c mut conn::Conn) -> Op<'c, T> + Send + 'static,
    ) -> Pending<T> {
        if self.closed.load(Ordering::Acquire) {
            return Pending::ready(Err(gone()));
        }
        let (reply, pending) = Pending::new();
        let (pool, statements, dropped, signal, lease) = (
            self.pool.clone(),
            self.statements.clone(),
            self.dropped.clone(),
            self.signal.clone(),
            self.lease.clone(),
        );
        let timeout = self.timeout;
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            let late = || {
                StoreError::Unavailable(format!(
                    "the database did not answer within {} ms",
                    timeout.as_millis()
                ))
            };
            let result = match tokio::time::timeout_at(deadline, pool.get()).await {
                Ok(Ok(client)) => {
                    let mut conn = conn::Conn::new(client, lease);
                    match tokio::time::timeout_at(deadline, op(&mut conn)).await {
                        Ok(r) => {
                            statements.fetch_add(conn.statements, Ordering::Relaxed);
                            dropped.fetch_add(conn.dropped, Ordering::Relaxed);
                            if conn.queued && r.is_ok() {
                                signal.notify_one();
                            }
                            r
                        }
                        Err(_) => {
                            // The call may be stuck inside a transaction: the connection leaves
                            // the pool and closes, and the server rolls back.
                            conn.discard();
                            Err(late())
                        }
                    }
                }
                Ok(Err(e)) => Err(e.into()),
                Err(_) => Err(late()),
            };
            let _ = reply.send(result);
        });
        pending
    }
}

/// Listens on [`conn::CHANNEL`] and tells `hook` what other nodes changed, until the connection
/// fails.
async fn listen(
    config: &tokio_postgres::Config,
    node: &str,
    hook: &ChangeHook,
    listening: &AtomicBool,
) -> Result<(), tokio_postgres::Error> {
    use futures_util::StreamExt;
    let (client, mut connection) = config.connect(NoTls).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(m) = messages.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = m? {
                let _ = tx.send(n.payload().to_owned());
            }
        }
        Ok::<(), tokio_postgres::Error>(())
    });
    client
        .batch_execute(&format!("LISTEN {}", conn::CHANNEL))
        .await?;
    listening.store(true, Ordering::Release);
    while let Some(payload) = rx.recv().await {
        let mut parts = payload.splitn(3, ' ');
        let (Some(from), Some(kind), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        if from == node {
            continue;
        }
        match kind {
            "f" => hook(Change::Frames(key.to_owned())),
            "c" => hook(Change::Canceled(key.to_owned())),
            _ => {}
        }
    }
    drop(client);
    driver.await.unwrap_or(Ok(()))
}

/// One store call's work on a connection.
type Op<'c, T> = futures_util::future::BoxFuture<'c, Result<T, StoreError>>;

/// `op!(c => expression using c)`: an [`Op`] that owns what it captures.
macro_rules! op {
    ($c:ident => $e:expr) => {
        move |$c: &mut conn::Conn| -> Op<'_, _> { Box::pin(async move { $e }) }
    };
}

impl Tasks for PostgresStore {
    fn system(&self) -> &'static str {
        "postgresql"
    }

    fn create_task(
        &self,
        row: TaskRow,
        claim: Option<MessageClaim>,
        push: Option<PushConfig>,
    ) -> Pending<()> {
        let push = push.map(|p| self.sealed(p));
        self.run(op!(c => c.create_task(&row, claim.as_ref(), push.as_ref()).await))
    }

    fn update_task(
        &self,
        row: TaskRow,
        expected: u64,
        claim: Option<MessageClaim>,
        frames: Vec<NewFrame>,
    ) -> Pending<Written> {
        self.run(op!(c => c.update_task(&row, expected, claim.as_ref(), &frames).await))
    }

    fn fail_unsettled(&self, now: u64, status_text: String) -> Pending<u64> {
        self.run(op!(c => c.fail_unsettled(now, &status_text).await))
    }

    fn note_task(&self, instance_id: String, task_id: String, note: String) -> Pending<()> {
        self.run(op!(c => c.note_task(&instance_id, &task_id, &note).await))
    }

    fn task_note(&self, instance_id: String, task_id: String) -> Pending<Option<String>> {
        self.run(op!(c => c.task_note(&instance_id, &task_id).await))
    }

    fn get_task(&self, id: String, instance_id: Option<String>) -> Pending<Option<TaskRow>> {
        self.run(op!(c => c.get_task(&id, instance_id.as_deref()).await))
    }

    fn list_tasks(&self, filter: TaskFilter) -> Pending<TaskPage> {
        self.run(op!(c => c.list_tasks(&filter).await))
    }

    fn find_message(
        &self,
        instance_id: String,
        message_id: String,
    ) -> Pending<Option<MessageRecord>> {
        self.run(op!(c => c.find_message(&instance_id, &message_id).await))
    }

    fn contexts(
        &self,
        instance_id: Option<String>,
        context_id: Option<String>,
        limit: u32,
    ) -> Pending<Vec<ContextSummary>> {
        self.run(op!(c => {
            c.contexts(instance_id.as_deref(), context_id.as_deref(), limit)
                .await
        }))
    }

    fn state_counts(&self) -> Pending<Vec<(String, TaskState, u64)>> {
        self.run(op!(c => c.state_counts().await))
    }
}

impl FrameLog for PostgresStore {
    fn append_frames(
        &self,
        instance_id: String,
        task_id: String,
        frames: Vec<NewFrame>,
    ) -> Pending<u64> {
        self.run(op!(c => c.append_frames(&instance_id, &task_id, &frames).await))
    }

    fn frames(
        &self,
        instance_id: String,
        task_id: String,
        after: u64,
        limit: u32,
    ) -> Pending<FramePage> {
        self.run(op!(c => c.frames(&instance_id, &task_id, after, limit).await))
    }

    fn prune_frames(&self, before: u64) -> Pending<u64> {
        self.run(op!(c => c.prune_frames(before).await))
    }
}

impl PushOutbox for PostgresStore {
    fn put_push_config(&self, config: PushConfig) -> Pending<()> {
        let config = self.sealed(config);
        self.run(op!(c => c.put_push_config(&config).await))
    }

    fn delete_push_config(&self, instance_id: String, task_id: String, id: String) -> Pending<()> {
        self.run(op!(c => c.delete_push_config(&instance_id, &task_id, &id).await))
    }

    fn push_configs(&self, instance_id: String, task_id: String) -> Pending<Vec<PushConfig>> {
        let key = self.key.clone();
        self.run(op!(c => {
            let mut configs = c.push_configs(&instance_id, &task_id).await?;
            configs.iter_mut().for_each(|p| opened(&key, p));
            Ok(configs)
        }))
    }

    fn due_deliveries(&self, look: DueLook) -> Pending<DueDeliveries> {
        let key = self.key.clone();
        self.run(op!(c => {
            let mut due = c.due(&look).await?;
            due.due.iter_mut().for_each(|d| opened(&key, &mut d.config));
            Ok(due)
        }))
    }

    fn attempted(&self, seq: u64, now: u64, attempt: Attempt) -> Pending<()> {
        self.run(op!(c => c.attempted(seq, now, &attempt).await))
    }

    fn push_status(
        &self,
        instance_id: String,
        task_id: Option<String>,
    ) -> Pending<Vec<PushStatus>> {
        let key = self.key.clone();
        self.run(op!(c => {
            let mut status = c.push_status(&instance_id, task_id.as_deref()).await?;
            status.iter_mut().for_each(|s| opened(&key, &mut s.config));
            Ok(status)
        }))
    }

    fn outbox_signal(&self) -> Arc<tokio::sync::Notify> {
        self.signal.clone()
    }

    fn push_dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl KeyValues for PostgresStore {
    fn kv_get(&self, at: KvKey) -> Pending<Option<Vec<u8>>> {
        self.run(op!(c => c.kv_get(&at).await))
    }

    fn kv_set(&self, at: KvKey, value: Vec<u8>, quota: u64) -> Pending<()> {
        self.run(op!(c => c.kv_set(&at, &value, quota).await))
    }

    fn kv_delete(&self, at: KvKey) -> Pending<()> {
        self.run(op!(c => c.kv_delete(&at).await))
    }

    fn kv_keys(
        &self,
        scope: String,
        bucket: String,
        offset: u64,
        limit: u32,
    ) -> Pending<Vec<String>> {
        self.run(op!(c => c.kv_keys(&scope, &bucket, offset, limit).await))
    }
}

impl Records for PostgresStore {
    fn put_secret(&self, name: String, sealed: Option<SealedSecret>) -> Pending<()> {
        self.run(op!(c => c.put_secret(&name, sealed.as_ref()).await))
    }

    fn secrets(&self) -> Pending<Vec<SealedSecret>> {
        self.run(op!(c => c.secrets().await))
    }

    fn put_instance(&self, record: InstanceRecord) -> Pending<()> {
        self.run(op!(c => c.put_record("instances", &record.id, &record).await))
    }

    fn delete_instance(&self, id: String) -> Pending<()> {
        self.run(op!(c => c.delete_record("instances", &id).await))
    }

    fn put_connection(&self, record: ConnectionRecord) -> Pending<()> {
        self.run(op!(c => c.put_record("connections", &record.id, &record).await))
    }

    fn delete_connection(&self, id: String) -> Pending<()> {
        self.run(op!(c => c.delete_record("connections", &id).await))
    }

    fn instances(&self) -> Pending<Vec<InstanceRecord>> {
        self.run(op!(c => c.records("instances").await))
    }

    fn connections(&self) -> Pending<Vec<ConnectionRecord>> {
        self.run(op!(c => c.records("connections").await))
    }
}

impl Cluster for PostgresStore {
    fn renew_leases(&self, now: u64, task_ids: Vec<String>) -> Pending<Vec<String>> {
        self.run(op!(c => c.renew_leases(now, &task_ids).await))
    }

    fn expired_leases(&self, now: u64, limit: u32) -> Pending<Vec<TaskRow>> {
        self.run(op!(c => c.expired_leases(now, limit).await))
    }

    fn watch(&self, hook: ChangeHook) {
        let (config, node, closed, listening) = (
            self.config.clone(),
            self.lease.node.clone(),
            self.closed.clone(),
            self.listening.clone(),
        );
        tokio::spawn(async move {
            while !closed.load(Ordering::Acquire) {
                let listened = listen(&config, &node, &hook, &listening).await;
                listening.store(false, Ordering::Release);
                if let Err(e) = listened {
                    tracing::warn!(
                        "lost the PostgreSQL notifications ({}); listening again in 1 s (streams of other nodes' tasks poll meanwhile)",
                        describe(&e)
                    );
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        });
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn listening(&self) -> Option<bool> {
        Some(self.listening.load(Ordering::Acquire))
    }
}

impl Store for PostgresStore {
    fn flush(&self) -> Pending<()> {
        // Every write is committed before it is answered: nothing is queued.
        if self.closed.load(Ordering::Acquire) {
            return Pending::ready(Err(gone()));
        }
        Pending::ready(Ok(()))
    }

    fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pool.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store on a fresh database of the test cluster (`A2A_EDGE_TEST_POSTGRES`).
    pub async fn fresh() -> PostgresStore {
        let url = a2a_edge_tests::postgres::fresh_postgres().await;
        PostgresStore::connect(&url, Lease::default(), std::time::Duration::from_secs(5))
            .await
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PostgreSQL: set A2A_EDGE_TEST_POSTGRES and pass --include-ignored"]
    async fn keeps_the_store_contract() {
        let s = fresh().await;
        crate::store::contract::check(&s).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PostgreSQL: set A2A_EDGE_TEST_POSTGRES and pass --include-ignored"]
    async fn concurrent_claims_on_one_message_id_let_exactly_one_win() {
        let s = fresh().await;
        let s = Arc::new(s);
        let racers: Vec<_> = (0..8)
            .map(|i| {
                let s = s.clone();
                tokio::spawn(async move {
                    let claim = MessageClaim {
                        message_id: "same".into(),
                        fingerprint: "f".into(),
                        replaces: None,
                    };
                    s.create_task(
                        crate::store::contract::row(&format!("race-{i}"), 1),
                        Some(claim),
                        None,
                    )
                    .await
                })
            })
            .collect();
        let mut won = 0;
        for r in racers {
            match r.await.unwrap() {
                Ok(()) => won += 1,
                Err(StoreError::DuplicateMessage(_)) => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(won, 1, "one claim wins, the others see its record");
        let page = s
            .list_tasks(TaskFilter {
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(page.total, 1, "the losers wrote nothing");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PostgreSQL: set A2A_EDGE_TEST_POSTGRES and pass --include-ignored"]
    async fn reads_after_close_fail_as_unavailable() {
        let s = fresh().await;
        s.close();
        assert!(matches!(
            s.get_task("t".into(), None).await,
            Err(StoreError::Unavailable(_))
        ));
    }
}
