//! The PostgreSQL store's writes: tasks, their frames and leases, records, secrets, notes.

use a2a_protocol::TaskState;
use a2a_protocol::sse::Member;

use crate::records::task_key;
use crate::store::{
    Frame, FramePage, KV_ENTRY_BYTES, KvKey, Lease, MessageClaim, MessageRecord, NewFrame,
    PushConfig, RETAIN_FRAMES, SealedSecret, StoreError, TaskRow, Written, over_quota,
};

use super::conn::*;
use super::push::*;

impl Conn {
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
                let inserted = tx
                    .exec(
                        &format!(
                            "INSERT INTO tasks ({TASK_COLUMNS}, lease_node, lease_until)
                             VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10, $11, $12, $13, $14)"
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
                            &row.principal,
                            &row.trace_id,
                            &(row.stamp as i64),
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
                             lease_node = $10, lease_until = $11, stamp = $12
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
                            &(row.stamp as i64),
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
                    (row.state, row.updated_at, row.stamp) = (TaskState::Failed, now, 0);
                    let last = tx
                        .opt(
                            "UPDATE tasks SET state = $2, updated_at = $3, version = version + 1,
                                 body = $4, last_seq = last_seq + $5, lease_until = NULL, stamp = 0
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

    /// Sets an agent's value unless its scope would then hold more than `quota` bytes; the
    /// scope's lock makes the check and the write one step across nodes.
    pub async fn kv_set(&mut self, at: &KvKey, value: &[u8], quota: u64) -> Result<(), StoreError> {
        self.write(async |tx| {
            tx.exec("SELECT pg_advisory_xact_lock(hashtext($1))", &[&at.scope])
                .await?;
            let used: i64 = tx
                .opt(
                    "SELECT COALESCE(SUM(octet_length(bucket) + octet_length(key) + octet_length(value) + $4::BIGINT), 0)::BIGINT
                     FROM agent_kv WHERE scope = $1 AND NOT (bucket = $2 AND key = $3)",
                    &[&at.scope, &at.bucket, &at.key, &(KV_ENTRY_BYTES as i64)],
                )
                .await?
                .map_or(0, |r| r.get(0));
            if used as u64 + at.cost(value.len()) > quota {
                return Err(over_quota(quota));
            }
            tx.exec(
                "INSERT INTO agent_kv VALUES ($1, $2, $3, $4)
                 ON CONFLICT (scope, bucket, key) DO UPDATE SET value = EXCLUDED.value",
                &[&at.scope, &at.bucket, &at.key, &value],
            )
            .await?;
            Ok(())
        })
        .await
    }

    pub async fn kv_delete(&mut self, at: &KvKey) -> Result<(), StoreError> {
        self.write(async |tx| {
            tx.exec(
                "DELETE FROM agent_kv WHERE scope = $1 AND bucket = $2 AND key = $3",
                &[&at.scope, &at.bucket, &at.key],
            )
            .await?;
            Ok(())
        })
        .await
    }

    pub async fn delete_record(&mut self, table: &str, id: &str) -> Result<(), StoreError> {
        self.write(async |tx| {
            tx.exec(&format!("DELETE FROM {table} WHERE id = $1"), &[&id])
                .await?;
            Ok(())
        })
        .await
    }
}

/// Applies a claim on a message id: recorded only where the index still holds what the claim
/// replaces (nothing: the insert must be the first; a record: it must be unchanged). A claim that
/// lost fails with what the index holds now, and the whole write rolls back.
pub(super) async fn record_claim(
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

/// Records the claim for the task where the index holds nothing for its id; how many rows (0:
/// something is there).
pub(super) async fn take_free(
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
pub(super) async fn log_frames(
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
pub(super) async fn notify(
    tx: &mut Tx<'_>,
    lease: &Lease,
    kind: char,
    key: &str,
) -> Result<(), StoreError> {
    let payload = format!("{} {kind} {key}", lease.node);
    tx.exec(&format!("SELECT pg_notify('{CHANNEL}', $1)"), &[&payload])
        .await?;
    Ok(())
}
