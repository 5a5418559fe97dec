//! The PostgreSQL store's reads: tasks, pages of them, contexts, counts, records.

use a2a_protocol::TaskState;
use tokio_postgres::types::ToSql;

use crate::store::{
    ContextSummary, KvKey, MessageRecord, PageStart, SealedSecret, StoreError, TaskFilter,
    TaskPage, TaskRow, parse_token,
};

use super::conn::*;

impl Conn {
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

    /// A page of the tasks `f` matches and their count. A state other than COMPLETED also
    /// states the condition of the partial index `tasks_by_state_update`, which a generic plan
    /// could not prove from the bound state; a context's tasks (on an instance or all) are counted
    /// from its conversations' summaries.
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
        if let Some(p) = &f.principal {
            arg("principal = ?", Box::new(p.clone()), &mut args);
        }
        if let Some(s) = f.state {
            arg("state = ?", Box::new(state_number(s)), &mut args);
        }
        if let Some(after) = f.updated_after {
            arg("updated_at >= ?", Box::new(after as i64), &mut args);
        }
        if f.state.is_some_and(|s| s != TaskState::Completed) {
            clauses.push(format!("state <> {}", state_number(TaskState::Completed)));
        }
        let filter = clauses.join(" AND ");
        let summarised = f.context_id.is_some()
            && f.principal.is_none()
            && f.state.is_none()
            && f.updated_after.is_none();
        let count = if summarised {
            format!("SELECT COALESCE(SUM(tasks), 0)::BIGINT FROM contexts WHERE {filter}")
        } else {
            format!("SELECT COUNT(*) FROM tasks WHERE {filter}")
        };
        let count_args: Vec<&(dyn ToSql + Sync)> = args
            .iter()
            .map(|a| a.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let total = self
            .read(&count, &count_args, |r| Ok(r.get::<_, i64>(0)))
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

    /// Conversations from their kept summaries (schema migration 7), newest `last_seen` first,
    /// then by instance and context id in byte order: the first rows of an index, however many
    /// tasks are stored.
    pub async fn contexts(
        &mut self,
        instance_id: Option<&str>,
        context_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ContextSummary>, StoreError> {
        // One context's rows are read by `contexts_by_context`; the others walk
        // `contexts_by_last_seen` (an instance's until `limit` of them). Every parameter is named,
        // so each has a type; an absent one is NULL.
        let filter = match (instance_id, context_id) {
            (None, None) => "$1::TEXT IS NULL AND $2::TEXT IS NULL",
            (Some(_), None) => "instance_id = $1 AND $2::TEXT IS NULL",
            (None, Some(_)) => "context_id = $2 AND $1::TEXT IS NULL",
            (Some(_), Some(_)) => "context_id = $2 AND instance_id = $1",
        };
        let sql = format!(
            "SELECT instance_id, context_id, tasks, active, first_seen, last_seen, peer_id
             FROM contexts WHERE {filter}
             ORDER BY last_seen DESC, instance_id COLLATE \"C\", context_id COLLATE \"C\" LIMIT $3"
        );
        self.read(&sql, &[&instance_id, &context_id, &i64::from(limit)], |r| {
            Ok(ContextSummary {
                instance_id: r.get(0),
                context_id: r.get(1),
                task_count: r.get::<_, i64>(2) as u64,
                active_count: r.get::<_, i64>(3) as u64,
                first_seen: r.get::<_, i64>(4) as u64,
                last_seen: r.get::<_, i64>(5) as u64,
                peer_id: r.get(6),
            })
        })
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

    pub async fn kv_get(&mut self, at: &KvKey) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .read(
                "SELECT value FROM agent_kv WHERE scope = $1 AND bucket = $2 AND key = $3",
                &[&at.scope, &at.bucket, &at.key],
                |r| Ok(r.get::<_, Vec<u8>>(0)),
            )
            .await?
            .into_iter()
            .next())
    }

    pub async fn kv_keys(
        &mut self,
        scope: &str,
        bucket: &str,
        offset: u64,
        limit: u32,
    ) -> Result<Vec<String>, StoreError> {
        self.read(
            "SELECT key FROM agent_kv WHERE scope = $1 AND bucket = $2 ORDER BY key LIMIT $3 OFFSET $4",
            &[&scope, &bucket, &(limit as i64), &(offset as i64)],
            |r| Ok(r.get::<_, String>(0)),
        )
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
}
