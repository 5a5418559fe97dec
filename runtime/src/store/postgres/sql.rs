//! The statements of the PostgreSQL store, one method per store call, each write in one
//! transaction whose every rule is a constraint or a conditional statement (several nodes write
//! at once; nothing here relies on running alone).

use a2a_protocol::TaskState;
use deadpool_postgres::{Object, Transaction};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use std::sync::Arc;

use a2a_protocol::sse::Member;

use crate::records::task_key;
use crate::store::{
    Attempt, ContextSummary, Delivery, DueDeliveries, Frame, FramePage, Lease, MAX_WAITING,
    MessageClaim, MessageRecord, NewFrame, OVERFLOW, PageStart, PushConfig, PushStatus,
    RETAIN_FRAMES, SealedSecret, StoreError, TaskFilter, TaskPage, TaskRow, Written, parse_token,
};

/// The channel every node listens on; a payload is `<node> <kind> <task key>`, kind `f` (the
/// task's log grew) or `c` (the task was canceled).
pub const CHANNEL: &str = "a2a_edge";

/// A pooled connection and what its calls did.
pub struct Conn {
    client: Object,
    lease: Arc<Lease>,
    /// Statements run.
    pub statements: u64,
    /// Notifications were queued or an attempt recorded.
    pub queued: bool,
    /// Notifications given up at the outbox's bound.
    pub dropped: u64,
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// A transaction that counts its statements and the notifications it gave up.
struct Tx<'a> {
    tx: Transaction<'a>,
    n: u64,
    dropped: u64,
}

impl Tx<'_> {
    async fn exec(&mut self, sql: &str, p: Params<'_>) -> Result<u64, tokio_postgres::Error> {
        self.n += 1;
        let stmt = self.tx.prepare_cached(sql).await?;
        self.tx.execute(&stmt, p).await
    }

    async fn rows(&mut self, sql: &str, p: Params<'_>) -> Result<Vec<Row>, tokio_postgres::Error> {
        self.n += 1;
        let stmt = self.tx.prepare_cached(sql).await?;
        self.tx.query(&stmt, p).await
    }

    async fn opt(
        &mut self,
        sql: &str,
        p: Params<'_>,
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        self.n += 1;
        let stmt = self.tx.prepare_cached(sql).await?;
        self.tx.query_opt(&stmt, p).await
    }
}

const TASK_COLUMNS: &str =
    "id, instance_id, context_id, state, skill, created_at, updated_at, version, body, peer_id";

/// The state a stored number stands for; one that is no state a task can be in is an error.
fn state_of(n: i32) -> Result<TaskState, StoreError> {
    TaskState::from_number(n.into())
        .filter(|s| *s != TaskState::Unspecified)
        .ok_or_else(|| StoreError::Invalid(format!("a stored task has the state number {n}")))
}

fn task_row(r: &Row) -> Result<TaskRow, StoreError> {
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
    })
}

fn state_number(s: TaskState) -> i32 {
    s.number() as i32
}

fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

impl Conn {
    /// Wraps a pooled connection.
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
    async fn write<T>(
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
    async fn read<T>(
        &mut self,
        sql: &str,
        p: Params<'_>,
        each: impl Fn(&Row) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        self.rows(sql, p).await?.iter().map(each).collect()
    }

    /// One read's rows, outside a transaction.
    async fn rows(&mut self, sql: &str, p: Params<'_>) -> Result<Vec<Row>, StoreError> {
        self.statements += 1;
        let stmt = self.client.prepare_cached(sql).await?;
        Ok(self.client.query(&stmt, p).await?)
    }

    pub async fn create_task(
        &mut self,
        row: &TaskRow,
        claim: Option<&MessageClaim>,
        push: Option<&PushConfig>,
    ) -> Result<(), StoreError> {
        let mut queued = false;
        let lease = self.lease.clone();
        let r = self
            .write(async |tx| {
                touch_context(tx, row).await?;
                let inserted = tx
                    .exec(
                        &format!(
                            "INSERT INTO tasks ({TASK_COLUMNS}, lease_node, lease_until)
                             VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10, $11)"
                        ),
                        &[
                            &row.id,
                            &row.instance_id,
                            &row.context_id,
                            &state_number(row.state),
                            &row.skill,
                            &(row.created_at as i64),
                            &(row.updated_at as i64),
                            &row.body,
                            &row.peer_id,
                            &lease.node,
                            &lease.until(row.state, row.updated_at),
                        ],
                    )
                    .await;
                match inserted {
                    Err(e) if is_unique_violation(&e) => {
                        return Err(StoreError::Invalid(format!(
                            "task {} already exists",
                            row.id
                        )));
                    }
                    other => other?,
                };
                if let Some(claim) = claim {
                    record_claim(tx, &row.instance_id, claim, &row.id).await?;
                }
                if let Some(config) = push {
                    put_config(tx, config).await?;
                }
                queued = enqueue(tx, row).await?;
                Ok(())
            })
            .await;
        self.queued |= queued && r.is_ok();
        r
    }

    pub async fn update_task(
        &mut self,
        row: &TaskRow,
        expected: u64,
        claim: Option<&MessageClaim>,
        frames: &[NewFrame],
    ) -> Result<Written, StoreError> {
        let mut queued = false;
        let lease = self.lease.clone();
        let r = self
            .write(async |tx| {
                let last = tx
                    .opt(
                        "UPDATE tasks SET context_id = $3, state = $4, skill = $5, updated_at = $6,
                             version = version + 1, body = $7, last_seq = last_seq + $9,
                             lease_node = $10, lease_until = $11
                         WHERE id = $1 AND instance_id = $2 AND version = $8
                         RETURNING last_seq",
                        &[
                            &row.id,
                            &row.instance_id,
                            &row.context_id,
                            &state_number(row.state),
                            &row.skill,
                            &(row.updated_at as i64),
                            &row.body,
                            &(expected as i64),
                            &(frames.len() as i64),
                            &lease.node,
                            &lease.until(row.state, row.updated_at),
                        ],
                    )
                    .await?;
                let Some(last) = last else {
                    let sql = format!(
                        "SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1 AND instance_id = $2"
                    );
                    return match tx.opt(&sql, &[&row.id, &row.instance_id]).await? {
                        Some(current) => Err(StoreError::Conflict(Box::new(task_row(&current)?))),
                        None => Err(StoreError::NotFound),
                    };
                };
                if let Some(claim) = claim {
                    record_claim(tx, &row.instance_id, claim, &row.id).await?;
                }
                touch_context(tx, row).await?;
                queued = enqueue(tx, row).await?;
                let key = task_key(&row.instance_id, &row.id);
                let first_seq = log_frames(tx, &lease, &key, &row.id, last.get(0), frames).await?;
                if row.state == TaskState::Canceled {
                    notify(tx, &lease, 'c', &key).await?;
                }
                Ok(Written {
                    version: expected + 1,
                    first_seq,
                })
            })
            .await;
        self.queued |= queued && r.is_ok();
        r
    }

    pub async fn append_frames(
        &mut self,
        instance_id: &str,
        task_id: &str,
        frames: &[NewFrame],
    ) -> Result<u64, StoreError> {
        let lease = self.lease.clone();
        self.write(async |tx| {
            let last = tx
                .opt(
                    "UPDATE tasks SET last_seq = last_seq + $3
                     WHERE id = $1 AND instance_id = $2 AND state NOT IN (3, 4, 5, 7)
                     RETURNING last_seq",
                    &[&task_id, &instance_id, &(frames.len() as i64)],
                )
                .await?;
            let Some(last) = last else {
                let exists = tx
                    .opt(
                        "SELECT 1 FROM tasks WHERE id = $1 AND instance_id = $2",
                        &[&task_id, &instance_id],
                    )
                    .await?
                    .is_some();
                return Err(if exists {
                    StoreError::settled(task_id)
                } else {
                    StoreError::NotFound
                });
            };
            let key = task_key(instance_id, task_id);
            log_frames(tx, &lease, &key, task_id, last.get(0), frames).await
        })
        .await
    }

    pub async fn frames(
        &mut self,
        instance_id: &str,
        task_id: &str,
        after: u64,
        limit: u32,
    ) -> Result<FramePage, StoreError> {
        // One statement: the task's state and its frames in one snapshot.
        let rows = self
            .rows(
                "SELECT t.state, t.last_seq, f.seq, f.kind, f.json FROM tasks t
                 LEFT JOIN LATERAL (SELECT seq, kind, json FROM task_frames
                     WHERE task_id = t.id AND seq > $3 ORDER BY seq LIMIT $4) f ON true
                 WHERE t.id = $1 AND t.instance_id = $2 ORDER BY f.seq",
                &[&task_id, &instance_id, &(after as i64), &(limit as i64)],
            )
            .await?;
        let first = rows.first().ok_or(StoreError::NotFound)?;
        let state = state_of(first.get(0))?;
        let last_seq = first.get::<_, i64>(1) as u64;
        let mut frames = Vec::new();
        for r in &rows {
            let Some(seq) = r.get::<_, Option<i64>>(2) else {
                continue;
            };
            let n: i16 = r.get(3);
            frames.push(Frame {
                seq: seq as u64,
                kind: Member::from_number(n).ok_or_else(|| {
                    StoreError::Invalid(format!("a stored frame has the kind number {n}"))
                })?,
                json: r.get::<_, String>(4).into(),
            });
        }
        Ok(FramePage {
            frames,
            last_seq,
            state,
        })
    }

    pub async fn prune_frames(&mut self, before: u64) -> Result<u64, StoreError> {
        self.write(async |tx| {
            Ok(tx
                .exec(
                    "DELETE FROM task_frames f USING tasks t
                     WHERE f.task_id = t.id AND t.updated_at < $1 AND t.state NOT IN (1, 2)",
                    &[&(before as i64)],
                )
                .await?)
        })
        .await
    }

    pub async fn renew_leases(
        &mut self,
        now: u64,
        task_ids: &[String],
    ) -> Result<Vec<String>, StoreError> {
        let lease = self.lease.clone();
        self.write(async |tx| {
            Ok(tx
                .rows(
                    "UPDATE tasks SET lease_until = $2
                     WHERE id = ANY($3) AND state IN (1, 2) AND lease_node = $1 RETURNING id",
                    &[&lease.node, &((now + lease.ttl_ms) as i64), &task_ids],
                )
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect())
        })
        .await
    }

    pub async fn expired_leases(
        &mut self,
        now: u64,
        limit: u32,
    ) -> Result<Vec<TaskRow>, StoreError> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE state IN (1, 2) AND lease_until < $1 LIMIT $2"
        );
        self.read(&sql, &[&(now as i64), &(limit as i64)], task_row)
            .await
    }

    pub async fn put_secret(
        &mut self,
        name: &str,
        sealed: Option<&SealedSecret>,
    ) -> Result<(), StoreError> {
        self.write(async |tx| {
            match sealed {
                // The cluster key's check value is written once and never replaced.
                Some(s) => tx.exec(
                    "INSERT INTO secrets (name, nonce, sealed) VALUES ($1, $2, $3)
                     ON CONFLICT (name) DO UPDATE SET nonce = excluded.nonce, sealed = excluded.sealed
                     WHERE secrets.name <> $4",
                    &[&name, &s.nonce, &s.sealed, &crate::sealing::KEY_CHECK],
                )
                .await?,
                None => tx.exec("DELETE FROM secrets WHERE name = $1", &[&name]).await?,
            };
            Ok(())
        })
        .await
    }

    pub async fn secrets(&mut self) -> Result<Vec<SealedSecret>, StoreError> {
        self.read(
            "SELECT name, nonce, sealed FROM secrets ORDER BY name",
            &[],
            |r| {
                Ok(SealedSecret {
                    name: r.get(0),
                    nonce: r.get(1),
                    sealed: r.get(2),
                })
            },
        )
        .await
    }

    pub async fn fail_unsettled(&mut self, now: u64, text: &str) -> Result<u64, StoreError> {
        let mut queued = false;
        let lease = self.lease.clone();
        let r = self
            .write(async |tx| {
                let sql =
                    format!("SELECT {TASK_COLUMNS} FROM tasks WHERE state IN ($1, $2) FOR UPDATE");
                let running = tx
                    .rows(
                        &sql,
                        &[
                            &state_number(TaskState::Submitted),
                            &state_number(TaskState::Working),
                        ],
                    )
                    .await?;
                for r in &running {
                    let mut row = task_row(r)?;
                    let frames;
                    (row.body, frames) = crate::store::failed(&row.body, now, text);
                    (row.state, row.updated_at) = (TaskState::Failed, now);
                    let last = tx
                        .opt(
                            "UPDATE tasks SET state = $2, updated_at = $3, version = version + 1,
                                 body = $4, last_seq = last_seq + $5, lease_until = NULL
                             WHERE id = $1 RETURNING last_seq",
                            &[
                                &row.id,
                                &state_number(row.state),
                                &(now as i64),
                                &row.body,
                                &(frames.len() as i64),
                            ],
                        )
                        .await?
                        .ok_or(StoreError::NotFound)?;
                    queued |= enqueue(tx, &row).await?;
                    let key = task_key(&row.instance_id, &row.id);
                    log_frames(tx, &lease, &key, &row.id, last.get(0), &frames).await?;
                }
                Ok(running.len() as u64)
            })
            .await;
        self.queued |= queued && r.is_ok();
        r
    }

    pub async fn get_task(
        &mut self,
        id: &str,
        instance_id: Option<&str>,
    ) -> Result<Option<TaskRow>, StoreError> {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1 AND ($2::TEXT IS NULL OR instance_id = $2)"
        );
        Ok(self
            .read(&sql, &[&id, &instance_id], task_row)
            .await?
            .into_iter()
            .next())
    }

    pub async fn find_message(
        &mut self,
        instance_id: &str,
        message_id: &str,
    ) -> Result<Option<MessageRecord>, StoreError> {
        let sql = "SELECT task_id, fingerprint FROM message_ids WHERE instance_id = $1 AND message_id = $2";
        Ok(self
            .read(sql, &[&instance_id, &message_id], |r| {
                Ok(MessageRecord {
                    task_id: r.get(0),
                    fingerprint: r.get(1),
                })
            })
            .await?
            .into_iter()
            .next())
    }

    pub async fn list_tasks(&mut self, f: &TaskFilter) -> Result<TaskPage, StoreError> {
        let mut clauses = vec!["TRUE".to_owned()];
        let mut args: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
        let mut arg = |clause: &str, v: Box<dyn ToSql + Sync + Send>, args: &mut Vec<_>| {
            args.push(v);
            clauses.push(clause.replace('?', &format!("${}", args.len())));
        };
        if let Some(i) = &f.instance_id {
            arg("instance_id = ?", Box::new(i.clone()), &mut args);
        }
        if let Some(c) = &f.context_id {
            arg("context_id = ?", Box::new(c.clone()), &mut args);
        }
        if let Some(s) = f.state {
            arg("state = ?", Box::new(state_number(s)), &mut args);
        }
        if let Some(after) = f.updated_after {
            arg("updated_at >= ?", Box::new(after as i64), &mut args);
        }
        let filter = clauses.join(" AND ");
        let count_args: Vec<&(dyn ToSql + Sync)> = args
            .iter()
            .map(|a| a.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let total = self
            .read(
                &format!("SELECT COUNT(*) FROM tasks WHERE {filter}"),
                &count_args,
                |r| Ok(r.get::<_, i64>(0)),
            )
            .await?[0];
        let (mut page_filter, mut offset) = (filter.clone(), 0i64);
        match &f.start {
            PageStart::First => {}
            PageStart::Offset(o) => offset = *o as i64,
            PageStart::Token(t) => {
                let (at, id) = parse_token(t)?;
                args.push(Box::new(at as i64));
                args.push(Box::new(id));
                let (a, b) = (args.len() - 1, args.len());
                page_filter = format!(
                    "{filter} AND (updated_at < ${a} OR (updated_at = ${a} AND id < ${b}))"
                );
            }
        }
        let limit = i64::from(f.limit.max(1)) + 1;
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE {page_filter}
             ORDER BY updated_at DESC, id DESC LIMIT {limit} OFFSET {offset}"
        );
        let page_args: Vec<&(dyn ToSql + Sync)> = args
            .iter()
            .map(|a| a.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let rows = self.read(&sql, &page_args, task_row).await?;
        f.page(rows.into_iter().map(Ok), total as u32)
    }

    pub async fn contexts(
        &mut self,
        instance_id: Option<&str>,
        context_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ContextSummary>, StoreError> {
        let active: Vec<i32> = TaskState::ACTIVE.iter().map(|s| state_number(*s)).collect();
        self.read(
            "SELECT instance_id, context_id, COUNT(*), COUNT(*) FILTER (WHERE state = ANY($3)),
                 MIN(created_at), MAX(updated_at)
             FROM tasks WHERE ($1::TEXT IS NULL OR instance_id = $1) AND ($2::TEXT IS NULL OR context_id = $2)
             GROUP BY instance_id, context_id ORDER BY MAX(updated_at) DESC LIMIT $4",
            &[&instance_id, &context_id, &active, &i64::from(limit)],
            |r| {
                Ok(ContextSummary {
                    instance_id: r.get(0),
                    context_id: r.get(1),
                    task_count: r.get::<_, i64>(2) as u64,
                    active_count: r.get::<_, i64>(3) as u64,
                    first_seen: r.get::<_, i64>(4) as u64,
                    last_seen: r.get::<_, i64>(5) as u64,
                })
            },
        )
        .await
    }

    pub async fn state_counts(&mut self) -> Result<Vec<(String, TaskState, u64)>, StoreError> {
        self.read(
            "SELECT instance_id, state, COUNT(*) FROM tasks GROUP BY instance_id, state
             ORDER BY instance_id, state",
            &[],
            |r| {
                let n: i32 = r.get(1);
                let state = TaskState::from_number(n.into())
                    .ok_or_else(|| StoreError::Invalid(format!("state number {n}")))?;
                Ok((r.get(0), state, r.get::<_, i64>(2) as u64))
            },
        )
        .await
    }

    pub async fn put_record(
        &mut self,
        table: &str,
        id: &str,
        record: &impl serde::Serialize,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_string(record).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.write(async |tx| {
            tx.exec(
                &format!(
                    "INSERT INTO {table} (id, body) VALUES ($1, $2)
                     ON CONFLICT (id) DO UPDATE SET body = excluded.body"
                ),
                &[&id, &body],
            )
            .await?;
            Ok(())
        })
        .await
    }

    pub async fn note_task(
        &mut self,
        instance_id: &str,
        task_id: &str,
        note: &str,
    ) -> Result<(), StoreError> {
        self.write(async |tx| {
            tx.exec(
                "INSERT INTO task_notes VALUES ($1, $2, $3)
                 ON CONFLICT (instance_id, task_id) DO UPDATE SET note = EXCLUDED.note",
                &[&instance_id, &task_id, &note],
            )
            .await?;
            Ok(())
        })
        .await
    }

    pub async fn task_note(
        &mut self,
        instance_id: &str,
        task_id: &str,
    ) -> Result<Option<String>, StoreError> {
        Ok(self
            .read(
                "SELECT note FROM task_notes WHERE task_id = $1 AND instance_id = $2",
                &[&task_id, &instance_id],
                |r| Ok(r.get::<_, String>(0)),
            )
            .await?
            .into_iter()
            .next())
    }

    pub async fn delete_record(&mut self, table: &str, id: &str) -> Result<(), StoreError> {
        self.write(async |tx| {
            tx.exec(&format!("DELETE FROM {table} WHERE id = $1"), &[&id])
                .await?;
            Ok(())
        })
        .await
    }

    pub async fn records<T: serde::de::DeserializeOwned>(
        &mut self,
        table: &str,
    ) -> Result<Vec<T>, StoreError> {
        self.read(&format!("SELECT body FROM {table} ORDER BY id"), &[], |r| {
            serde_json::from_str(r.get::<_, &str>(0)).map_err(|e| {
                StoreError::Invalid(format!("a stored {table} record is unreadable: {e}"))
            })
        })
        .await
    }

    pub async fn put_push_config(&mut self, config: &PushConfig) -> Result<(), StoreError> {
        self.write(async |tx| put_config(tx, config).await).await
    }

    pub async fn delete_push_config(
        &mut self,
        instance_id: &str,
        task_id: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        self.write(async |tx| {
            let key: Params<'_> = &[&instance_id, &task_id, &id];
            tx.exec(
                "DELETE FROM push_configs WHERE instance_id = $1 AND task_id = $2 AND id = $3",
                key,
            )
            .await?;
            tx.exec(
                "DELETE FROM push_outbox WHERE instance_id = $1 AND task_id = $2 AND config_id = $3",
                key,
            )
            .await?;
            Ok(())
        })
        .await
    }

    pub async fn push_configs(
        &mut self,
        instance_id: &str,
        task_id: &str,
    ) -> Result<Vec<PushConfig>, StoreError> {
        self.read(
            "SELECT instance_id, task_id, id, body FROM push_configs
             WHERE instance_id = $1 AND task_id = $2 ORDER BY created",
            &[&instance_id, &task_id],
            config,
        )
        .await
    }

    pub async fn due(&mut self, now: u64, limit: u32) -> Result<DueDeliveries, StoreError> {
        let now = now as i64;
        let due = self
            .read(
                &format!(
                    "SELECT o.seq, p.instance_id, p.task_id, p.id, p.body, o.payload, o.created_at, o.attempts
                     FROM push_outbox o JOIN push_configs p
                         ON p.instance_id = o.instance_id AND p.task_id = o.task_id AND p.id = o.config_id
                     WHERE o.next_at <= $1 AND {HEADS} ORDER BY o.seq LIMIT $2"
                ),
                &[&now, &i64::from(limit)],
                |r| {
                    Ok(Delivery {
                        seq: r.get::<_, i64>(0) as u64,
                        config: PushConfig {
                            instance_id: r.get(1),
                            task_id: r.get(2),
                            id: r.get(3),
                            body: r.get(4),
                        },
                        payload: r.get(5),
                        created_at: r.get::<_, i64>(6) as u64,
                        attempts: r.get::<_, i32>(7) as u32,
                    })
                },
            )
            .await?;
        let next = self
            .read(
                &format!(
                    "SELECT MIN(o.next_at), (SELECT COUNT(*) FROM push_outbox)
                     FROM push_outbox o WHERE o.next_at > $1 AND {HEADS}"
                ),
                &[&now],
                |r| Ok((r.get::<_, Option<i64>>(0), r.get::<_, i64>(1))),
            )
            .await?;
        let (next_at, pending) = next[0];
        Ok(DueDeliveries {
            due,
            next_at: next_at.map(|n| n as u64),
            pending: pending as u64,
        })
    }

    pub async fn attempted(
        &mut self,
        seq: u64,
        now: u64,
        attempt: &Attempt,
    ) -> Result<(), StoreError> {
        let (status, delivered, failed) = match attempt {
            Attempt::Delivered(code) => (code.to_string(), 1i64, 0i64),
            Attempt::Retry { error, .. } => (error.clone(), 0, 0),
            Attempt::GaveUp(error) => (error.clone(), 0, 1),
        };
        let (seq, now) = (seq as i64, now as i64);
        let r = self
            .write(async |tx| {
                tx.exec(
                    "UPDATE push_configs SET delivered = delivered + $2, failed = failed + $3,
                         last_status = $4, last_attempt_at = $5
                     WHERE (instance_id, task_id, id) =
                         (SELECT instance_id, task_id, config_id FROM push_outbox WHERE seq = $1)",
                    &[&seq, &delivered, &failed, &status, &now],
                )
                .await?;
                match attempt {
                    Attempt::Retry { next_at, .. } => {
                        tx.exec(
                            "UPDATE push_outbox SET attempts = attempts + 1, next_at = $2 WHERE seq = $1",
                            &[&seq, &(*next_at as i64)],
                        )
                        .await?
                    }
                    _ => {
                        tx.exec("DELETE FROM push_outbox WHERE seq = $1", &[&seq])
                            .await?
                    }
                };
                Ok(())
            })
            .await;
        self.queued |= r.is_ok();
        r
    }

    pub async fn push_status(
        &mut self,
        instance_id: &str,
        task_id: Option<&str>,
    ) -> Result<Vec<PushStatus>, StoreError> {
        self.read(
            "SELECT p.instance_id, p.task_id, p.id, p.body, p.delivered, p.failed, p.last_status,
                 p.last_attempt_at,
                 (SELECT COUNT(*) FROM push_outbox o WHERE o.instance_id = p.instance_id
                     AND o.task_id = p.task_id AND o.config_id = p.id),
                 h.attempts, h.next_at
             FROM push_configs p LEFT JOIN push_outbox h ON h.seq = (SELECT MIN(o.seq) FROM push_outbox o
                 WHERE o.instance_id = p.instance_id AND o.task_id = p.task_id AND o.config_id = p.id)
             WHERE p.instance_id = $1 AND ($2::TEXT IS NULL OR p.task_id = $2)
             ORDER BY p.created LIMIT 500",
            &[&instance_id, &task_id],
            |r| {
                Ok(PushStatus {
                    config: config(r)?,
                    delivered: r.get::<_, i64>(4) as u64,
                    failed: r.get::<_, i64>(5) as u64,
                    last_status: r.get(6),
                    last_attempt_at: r.get::<_, Option<i64>>(7).map(|n| n as u64),
                    pending: r.get::<_, i64>(8) as u64,
                    attempts: r.get::<_, Option<i32>>(9).unwrap_or(0) as u32,
                    next_at: r.get::<_, Option<i64>>(10).map(|n| n as u64),
                })
            },
        )
        .await
    }
}

/// The oldest notification of each config (the one its order lets go next).
const HEADS: &str = "o.seq = (SELECT MIN(h.seq) FROM push_outbox h
    WHERE h.instance_id = o.instance_id AND h.task_id = o.task_id AND h.config_id = o.config_id)";

fn config(r: &Row) -> Result<PushConfig, StoreError> {
    Ok(PushConfig {
        instance_id: r.get(0),
        task_id: r.get(1),
        id: r.get(2),
        body: r.get(3),
    })
}

/// Binds a task's context to its instance (first seen, last seen).
async fn touch_context(tx: &mut Tx<'_>, row: &TaskRow) -> Result<(), StoreError> {
    tx.exec(
        "INSERT INTO contexts (instance_id, context_id, first_seen, last_seen) VALUES ($1, $2, $3, $3)
         ON CONFLICT (instance_id, context_id) DO UPDATE SET last_seen = excluded.last_seen",
        &[&row.instance_id, &row.context_id, &(row.updated_at as i64)],
    )
    .await?;
    Ok(())
}

/// Applies a claim on a message id: recorded only where the index still holds what the claim
/// replaces (nothing: the insert must be the first; a record: it must be unchanged). A claim that
/// lost fails with what the index holds now, and the whole write rolls back.
async fn record_claim(
    tx: &mut Tx<'_>,
    instance_id: &str,
    claim: &MessageClaim,
    task_id: &str,
) -> Result<(), StoreError> {
    let applied = match &claim.replaces {
        None => take_free(tx, instance_id, claim, task_id).await?,
        Some(old) => {
            tx.exec(
                "UPDATE message_ids SET task_id = $3, fingerprint = $4
                 WHERE instance_id = $1 AND message_id = $2 AND task_id = $5 AND fingerprint = $6",
                &[
                    &instance_id,
                    &claim.message_id,
                    &task_id,
                    &claim.fingerprint,
                    &old.task_id,
                    &old.fingerprint,
                ],
            )
            .await?
        }
    };
    if applied == 1 {
        return Ok(());
    }
    // What the claim replaces is not there: an empty slot is taken (as by a first claim).
    if claim.replaces.is_some() {
        let taken = take_free(tx, instance_id, claim, task_id).await?;
        if taken == 1 {
            return Ok(());
        }
    }
    let now = tx
        .opt(
            "SELECT task_id, fingerprint FROM message_ids WHERE instance_id = $1 AND message_id = $2",
            &[&instance_id, &claim.message_id],
        )
        .await?
        .ok_or_else(|| StoreError::Unavailable("a message id record vanished mid-claim".into()))?;
    Err(StoreError::DuplicateMessage(MessageRecord {
        task_id: now.get(0),
        fingerprint: now.get(1),
    }))
}

/// Inserts or replaces a config of an existing task of its instance, within the per-task cap.
async fn put_config(tx: &mut Tx<'_>, p: &PushConfig) -> Result<(), StoreError> {
    // The task's row lock orders concurrent registrations, so the cap holds across nodes.
    let task = tx
        .opt(
            "SELECT 1 FROM tasks WHERE id = $1 AND instance_id = $2 FOR UPDATE",
            &[&p.task_id, &p.instance_id],
        )
        .await?;
    if task.is_none() {
        return Err(StoreError::NotFound);
    }
    let counted = tx
        .opt(
            "SELECT COUNT(*), COUNT(*) FILTER (WHERE id = $3) FROM push_configs
             WHERE instance_id = $1 AND task_id = $2",
            &[&p.instance_id, &p.task_id, &p.id],
        )
        .await?
        .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1)))
        .unwrap_or_default();
    let max = a2a_protocol::push::MAX_PER_TASK;
    if counted.1 == 0 && counted.0 as usize >= max {
        return Err(StoreError::Invalid(format!(
            "task {} has {max} push-notification configs already: delete one first",
            p.task_id
        )));
    }
    tx.exec(
        "INSERT INTO push_configs (instance_id, task_id, id, body) VALUES ($1, $2, $3, $4)
         ON CONFLICT (instance_id, task_id, id) DO UPDATE SET body = excluded.body",
        &[&p.instance_id, &p.task_id, &p.id, &p.body],
    )
    .await?;
    Ok(())
}

/// Queues a notification of the written row for each of its task's configs, then gives up the
/// oldest waiting one behind a head past [`MAX_WAITING`]; whether anything was queued.
async fn enqueue(tx: &mut Tx<'_>, row: &TaskRow) -> Result<bool, StoreError> {
    let queued = tx
        .exec(
            "INSERT INTO push_outbox (instance_id, task_id, config_id, payload, created_at, next_at)
             SELECT instance_id, task_id, id, $3, $4, $4 FROM push_configs
             WHERE instance_id = $1 AND task_id = $2 ORDER BY created",
            &[
                &row.instance_id,
                &row.id,
                &a2a_protocol::push::payload(&row.body),
                &(row.updated_at as i64),
            ],
        )
        .await?;
    if queued == 0 {
        return Ok(false);
    }
    let max = MAX_WAITING as i64;
    let over = tx
        .rows(
            "SELECT id FROM push_configs p WHERE instance_id = $1 AND task_id = $2 AND
                 (SELECT COUNT(*) FROM push_outbox o WHERE o.instance_id = $1 AND o.task_id = $2
                     AND o.config_id = p.id) > $3",
            &[&row.instance_id, &row.id, &max],
        )
        .await?;
    for r in over {
        let id: String = r.get(0);
        let key: Params<'_> = &[&row.instance_id, &row.id, &id];
        tx.exec(
            "DELETE FROM push_outbox WHERE seq = (SELECT seq FROM push_outbox
                 WHERE instance_id = $1 AND task_id = $2 AND config_id = $3
                 ORDER BY seq LIMIT 1 OFFSET 1)",
            key,
        )
        .await?;
        tx.exec(
            "UPDATE push_configs SET failed = failed + 1, last_status = $4
             WHERE instance_id = $1 AND task_id = $2 AND id = $3",
            &[&row.instance_id, &row.id, &id, &OVERFLOW],
        )
        .await?;
        tx.dropped += 1;
    }
    Ok(true)
}

/// Records the claim for the task where the index holds nothing for its id; how many rows (0:
/// something is there).
async fn take_free(
    tx: &mut Tx<'_>,
    instance_id: &str,
    claim: &MessageClaim,
    task_id: &str,
) -> Result<u64, tokio_postgres::Error> {
    tx.exec(
        "INSERT INTO message_ids (instance_id, message_id, task_id, fingerprint)
         VALUES ($1, $2, $3, $4) ON CONFLICT (instance_id, message_id) DO NOTHING",
        &[
            &instance_id,
            &claim.message_id,
            &task_id,
            &claim.fingerprint,
        ],
    )
    .await
}

/// Writes `frames` as the task's sequence ids up to `last` (its new `last_seq`, taken under its
/// row lock), drops what falls out of [`RETAIN_FRAMES`] and tells the other nodes; returns the
/// first one's id.
async fn log_frames(
    tx: &mut Tx<'_>,
    lease: &Lease,
    key: &str,
    task_id: &str,
    last: i64,
    frames: &[NewFrame],
) -> Result<u64, StoreError> {
    let last = last as u64;
    let first = last + 1 - frames.len() as u64;
    if frames.is_empty() {
        return Ok(first);
    }
    let seqs: Vec<i64> = (first as i64..=last as i64).collect();
    let kinds: Vec<i16> = frames.iter().map(|f| f.kind.number()).collect();
    let jsons: Vec<&str> = frames.iter().map(|f| f.json.as_str()).collect();
    tx.exec(
        "INSERT INTO task_frames (task_id, seq, kind, json)
         SELECT $1, s, k, j FROM UNNEST($2::BIGINT[], $3::SMALLINT[], $4::TEXT[]) AS f(s, k, j)",
        &[&task_id, &seqs, &kinds, &jsons],
    )
    .await?;
    if last > RETAIN_FRAMES {
        tx.exec(
            "DELETE FROM task_frames WHERE task_id = $1 AND seq <= $2",
            &[&task_id, &((last - RETAIN_FRAMES) as i64)],
        )
        .await?;
    }
    notify(tx, lease, 'f', key).await?;
    Ok(first)
}

/// Tells every listening node (on commit) what happened to a task.
async fn notify(tx: &mut Tx<'_>, lease: &Lease, kind: char, key: &str) -> Result<(), StoreError> {
    let payload = format!("{} {kind} {key}", lease.node);
    tx.exec(&format!("SELECT pg_notify('{CHANNEL}', $1)"), &[&payload])
        .await?;
    Ok(())
}
