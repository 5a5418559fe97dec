//! A connection of the PostgreSQL store and what its statements share: the transaction that
//! counts them, the task row's columns. The statements themselves are one method per store call,
//! by concern in `writes.rs`, `reads.rs` and `push.rs`; each write is one transaction whose every
//! rule is a constraint or a conditional statement (several nodes write at once; nothing here
//! relies on running alone).

use a2a_protocol::TaskState;
use deadpool_postgres::{Object, Transaction};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use std::sync::Arc;

use crate::store::{Lease, StoreError, TaskRow};

/// The channel every node listens on; a payload is `<node> <kind> <task key>`, kind `f` (the
/// task's log grew) or `c` (the task was canceled).
pub const CHANNEL: &str = "a2a_edge";

/// A pooled connection and what its calls did.
pub struct Conn {
    client: Object,
    pub(super) lease: Arc<Lease>,
    /// Statements run.
    pub statements: u64,
    /// Notifications were queued or an attempt recorded.
    pub queued: bool,
    /// Notifications given up at the outbox's bound.
    pub dropped: u64,
}

pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// A transaction that counts its statements and the notifications it gave up.
pub(super) struct Tx<'a> {
    tx: Transaction<'a>,
    n: u64,
    pub(super) dropped: u64,
}

impl Tx<'_> {
    pub(super) async fn exec(
        &mut self,
        sql: &str,
        p: Params<'_>,
    ) -> Result<u64, tokio_postgres::Error> {
        self.n += 1;
        let stmt = self.tx.prepare_cached(sql).await?;
        self.tx.execute(&stmt, p).await
    }

    pub(super) async fn rows(
        &mut self,
        sql: &str,
        p: Params<'_>,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        self.n += 1;
        let stmt = self.tx.prepare_cached(sql).await?;
        self.tx.query(&stmt, p).await
    }

    pub(super) async fn opt(
        &mut self,
        sql: &str,
        p: Params<'_>,
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        self.n += 1;
        let stmt = self.tx.prepare_cached(sql).await?;
        self.tx.query_opt(&stmt, p).await
    }
}

pub(super) const TASK_COLUMNS: &str = "id, instance_id, context_id, state, skill, created_at, updated_at, version, body, peer_id, principal, trace_id, stamp";

/// The state a stored number stands for; one that is no state a task can be in is an error.
pub(super) fn state_of(n: i32) -> Result<TaskState, StoreError> {
    TaskState::from_number(n.into())
        .filter(|s| *s != TaskState::Unspecified)
        .ok_or_else(|| StoreError::Invalid(format!("a stored task has the state number {n}")))
}

pub(super) fn task_row(r: &Row) -> Result<TaskRow, StoreError> {
    let state = state_of(r.get(3))?;
    Ok(TaskRow {
        id: r.get(0),
        instance_id: r.get(1),
        context_id: r.get(2),
        state,
        skill: r.get(4),
        created_at: r.get::<_, i64>(5) as u64,
        updated_at: r.get::<_, i64>(6) as u64,
        version: r.get::<_, i64>(7) as u64,
        body: r.get(8),
        peer_id: r.get(9),
        principal: r.get(10),
        trace_id: r.get(11),
        stamp: r.get::<_, i64>(12) as u64,
    })
}

pub(super) fn state_number(s: TaskState) -> i32 {
    s.number() as i32
}

pub(super) fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

impl Conn {
    pub fn new(client: Object, lease: Arc<Lease>) -> Conn {
        Conn {
            client,
            lease,
            statements: 0,
            queued: false,
            dropped: 0,
        }
    }

    /// Takes the connection out of the pool and closes it (a call on it did not finish).
    pub fn discard(self) {
        drop(Object::take(self.client));
    }

    /// Runs `body` in a transaction, committed when it succeeds and rolled back when it fails.
    pub(super) async fn write<T>(
        &mut self,
        body: impl AsyncFnOnce(&mut Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut tx = Tx {
            tx: self.client.transaction().await?,
            n: 1,
            dropped: 0,
        };
        let result = body(&mut tx).await;
        let n = tx.n + 1;
        match result {
            Ok(v) => {
                let dropped = tx.dropped;
                tx.tx.commit().await?;
                self.statements += n;
                self.dropped += dropped;
                Ok(v)
            }
            Err(e) => {
                let _ = tx.tx.rollback().await;
                self.statements += n;
                Err(e)
            }
        }
    }

    /// One read, outside a transaction.
    pub(super) async fn read<T>(
        &mut self,
        sql: &str,
        p: Params<'_>,
        each: impl Fn(&Row) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        self.rows(sql, p).await?.iter().map(each).collect()
    }

    /// One read's rows, outside a transaction.
    pub(super) async fn rows(&mut self, sql: &str, p: Params<'_>) -> Result<Vec<Row>, StoreError> {
        self.statements += 1;
        let stmt = self.client.prepare_cached(sql).await?;
        Ok(self.client.query(&stmt, p).await?)
    }
}
