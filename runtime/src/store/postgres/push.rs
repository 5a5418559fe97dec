//! The PostgreSQL store's push configs and their outbox.

use tokio_postgres::Row;

use crate::store::{
    Attempt, Delivery, DueDeliveries, DueLook, MAX_WAITING, OVERFLOW, PushConfig, PushStatus,
    StoreError, TaskRow,
};

use super::conn::*;

impl Conn {
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

    /// The heads due in `look` (in turns across instances), the next head's time and the
    /// outbox size.
    pub async fn due(&mut self, look: &DueLook) -> Result<DueDeliveries, StoreError> {
        let now = look.now as i64;
        let due = self
            .read(
                &format!(
                    "SELECT seq, instance_id, task_id, id, body, payload, created_at, attempts FROM (
                         SELECT o.seq, p.instance_id, p.task_id, p.id, p.body, o.payload, o.created_at,
                             o.attempts,
                             ROW_NUMBER() OVER (PARTITION BY o.instance_id ORDER BY o.seq) AS turn
                         FROM push_outbox o JOIN push_configs p
                             ON p.instance_id = o.instance_id AND p.task_id = o.task_id AND p.id = o.config_id
                         WHERE o.next_at <= $1 AND {HEADS} AND NOT (o.instance_id = ANY($3))) heads
                     ORDER BY turn, seq LIMIT $2"
                ),
                &[&now, &i64::from(look.limit), &look.skip],
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
            concat!(
                push_status_select!(),
                " WHERE p.instance_id = $1 AND ($2::TEXT IS NULL OR p.task_id = $2)
             ORDER BY p.created LIMIT 500"
            ),
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
pub(super) const HEADS: &str = "o.seq = (SELECT MIN(h.seq) FROM push_outbox h
    WHERE h.instance_id = o.instance_id AND h.task_id = o.task_id AND h.config_id = o.config_id)";

pub(super) fn config(r: &Row) -> Result<PushConfig, StoreError> {
    Ok(PushConfig {
        instance_id: r.get(0),
        task_id: r.get(1),
        id: r.get(2),
        body: r.get(3),
    })
}

/// Inserts or replaces a config of an existing task of its instance, within the per-task cap.
pub(super) async fn put_config(tx: &mut Tx<'_>, p: &PushConfig) -> Result<(), StoreError> {
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
pub(super) async fn enqueue(tx: &mut Tx<'_>, row: &TaskRow) -> Result<bool, StoreError> {
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
