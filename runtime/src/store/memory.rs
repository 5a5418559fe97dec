//! A [`Store`] in memory, for unit tests of what runs on a store (the host's capabilities): the
//! same contract as SQLite ([`super::contract`]), nothing durable.

use std::collections::BTreeMap;
use std::sync::Mutex;

use a2a_protocol::TaskState;

use super::*;

/// Everything in maps behind one lock.
#[derive(Default)]
pub struct MemoryStore {
    data: Mutex<Data>,
}

#[derive(Default)]
struct Data {
    tasks: BTreeMap<String, TaskRow>,
    messages: BTreeMap<(String, String), MessageRecord>,
    instances: BTreeMap<String, InstanceRecord>,
    connections: BTreeMap<String, ConnectionRecord>,
}

impl Data {
    fn check_claim(&self, instance_id: &str, claim: &MessageClaim) -> Result<(), StoreError> {
        match self
            .messages
            .get(&(instance_id.to_owned(), claim.message_id.clone()))
        {
            Some(current) if Some(current) != claim.replaces.as_ref() => {
                Err(StoreError::DuplicateMessage(current.clone()))
            }
            _ => Ok(()),
        }
    }

    fn record_claim(&mut self, instance_id: &str, claim: &MessageClaim, task_id: &str) {
        let record = MessageRecord {
            task_id: task_id.to_owned(),
            fingerprint: claim.fingerprint.clone(),
        };
        self.messages
            .insert((instance_id.to_owned(), claim.message_id.clone()), record);
    }

    /// Tasks matching a filter, newest `updated_at` first (then id, descending).
    fn filtered(&self, f: &TaskFilter) -> Vec<&TaskRow> {
        let mut rows: Vec<&TaskRow> = self
            .tasks
            .values()
            .filter(|t| f.instance_id.as_ref().is_none_or(|i| &t.instance_id == i))
            .filter(|t| f.context_id.as_ref().is_none_or(|c| &t.context_id == c))
            .filter(|t| f.state.is_none_or(|s| t.state == s))
            .filter(|t| f.updated_after.is_none_or(|a| t.updated_at >= a))
            .collect();
        rows.sort_by(|a, b| (b.updated_at, &b.id).cmp(&(a.updated_at, &a.id)));
        rows
    }

    fn list(&self, f: &TaskFilter) -> Result<TaskPage, StoreError> {
        let rows = self.filtered(f);
        let total = rows.len() as u32;
        let skip = match &f.start {
            PageStart::First => 0,
            PageStart::Offset(o) => *o as usize,
            PageStart::Token(t) => {
                let (at, id) = parse_token(t)?;
                rows.iter()
                    .take_while(|r| (r.updated_at, r.id.as_str()) >= (at, id.as_str()))
                    .count()
            }
        };
        f.page(rows.into_iter().skip(skip).map(|r| Ok(r.clone())), total)
    }
}

impl MemoryStore {
    fn with<T>(&self, f: impl FnOnce(&mut Data) -> Result<T, StoreError>) -> Pending<T> {
        Pending::ready(f(&mut self.data.lock().unwrap()))
    }
}

impl Store for MemoryStore {
    fn create_task(&self, row: TaskRow, claim: Option<MessageClaim>) -> Pending<()> {
        self.with(|d| {
            if let Some(c) = &claim {
                d.check_claim(&row.instance_id, c)?;
            }
            if d.tasks.contains_key(&row.id) {
                return Err(StoreError::Invalid(format!(
                    "task {} already exists",
                    row.id
                )));
            }
            if let Some(c) = &claim {
                d.record_claim(&row.instance_id, c, &row.id);
            }
            d.tasks
                .insert(row.id.clone(), TaskRow { version: 1, ..row });
            Ok(())
        })
    }

    fn update_task(
        &self,
        row: TaskRow,
        expected: u64,
        claim: Option<MessageClaim>,
    ) -> Pending<u64> {
        self.with(|d| {
            if let Some(c) = &claim {
                d.check_claim(&row.instance_id, c)?;
            }
            let current = d
                .tasks
                .get(&row.id)
                .filter(|t| t.instance_id == row.instance_id)
                .ok_or(StoreError::NotFound)?;
            if current.version != expected {
                return Err(StoreError::Conflict(Box::new(current.clone())));
            }
            let (created_at, peer_id) = (current.created_at, current.peer_id.clone());
            if let Some(c) = &claim {
                d.record_claim(&row.instance_id, c, &row.id);
            }
            d.tasks.insert(
                row.id.clone(),
                TaskRow {
                    version: expected + 1,
                    created_at,
                    peer_id,
                    ..row
                },
            );
            Ok(expected + 1)
        })
    }

    fn put_instance(&self, record: InstanceRecord) -> Pending<()> {
        self.with(|d| Ok(drop(d.instances.insert(record.id.clone(), record))))
    }

    fn delete_instance(&self, id: String) -> Pending<()> {
        self.with(|d| Ok(drop(d.instances.remove(&id))))
    }

    fn put_connection(&self, record: ConnectionRecord) -> Pending<()> {
        self.with(|d| Ok(drop(d.connections.insert(record.id.clone(), record))))
    }

    fn delete_connection(&self, id: String) -> Pending<()> {
        self.with(|d| Ok(drop(d.connections.remove(&id))))
    }

    fn fail_unsettled(&self, now: u64, status_text: String) -> Pending<u64> {
        self.with(|d| {
            let running = d.tasks.values_mut().filter(|t| t.state.is_running());
            let mut n = 0;
            for t in running {
                (t.state, t.updated_at, t.version, t.body) = (
                    TaskState::Failed,
                    now,
                    t.version + 1,
                    crate::tasks::fail_body(&t.body, now, &status_text),
                );
                n += 1;
            }
            Ok(n)
        })
    }

    fn flush(&self) -> Pending<()> {
        Pending::ready(Ok(()))
    }

    fn get_task(&self, id: String, instance_id: Option<String>) -> Pending<Option<TaskRow>> {
        self.with(|d| {
            Ok(d.tasks
                .get(&id)
                .filter(|t| instance_id.as_ref().is_none_or(|i| &t.instance_id == i))
                .cloned())
        })
    }

    fn list_tasks(&self, filter: TaskFilter) -> Pending<TaskPage> {
        self.with(|d| d.list(&filter))
    }

    fn find_message(
        &self,
        instance_id: String,
        message_id: String,
    ) -> Pending<Option<MessageRecord>> {
        self.with(|d| Ok(d.messages.get(&(instance_id, message_id)).cloned()))
    }

    fn contexts(
        &self,
        instance_id: Option<String>,
        context_id: Option<String>,
        limit: u32,
    ) -> Pending<Vec<ContextSummary>> {
        self.with(|d| {
            let mut by: BTreeMap<(String, String), ContextSummary> = BTreeMap::new();
            let matching = d.tasks.values().filter(|t| {
                instance_id.as_ref().is_none_or(|i| &t.instance_id == i)
                    && context_id.as_ref().is_none_or(|c| &t.context_id == c)
            });
            for t in matching {
                let s = by
                    .entry((t.instance_id.clone(), t.context_id.clone()))
                    .or_insert_with(|| ContextSummary {
                        instance_id: t.instance_id.clone(),
                        context_id: t.context_id.clone(),
                        task_count: 0,
                        active_count: 0,
                        first_seen: t.created_at,
                        last_seen: t.updated_at,
                    });
                s.task_count += 1;
                s.active_count += u64::from(t.state.is_active());
                (s.first_seen, s.last_seen) = (
                    s.first_seen.min(t.created_at),
                    s.last_seen.max(t.updated_at),
                );
            }
            let mut all: Vec<ContextSummary> = by.into_values().collect();
            all.sort_by(|a, b| b.last_seen.cmp(&a.last_seen));
            all.truncate(limit as usize);
            Ok(all)
        })
    }

    fn state_counts(&self) -> Pending<Vec<(String, TaskState, u64)>> {
        self.with(|d| {
            let mut counts: BTreeMap<(String, i64), (TaskState, u64)> = BTreeMap::new();
            for t in d.tasks.values() {
                counts
                    .entry((t.instance_id.clone(), t.state.number()))
                    .or_insert((t.state, 0))
                    .1 += 1;
            }
            Ok(counts
                .into_iter()
                .map(|((i, _), (s, n))| (i, s, n))
                .collect())
        })
    }

    fn instances(&self) -> Pending<Vec<InstanceRecord>> {
        self.with(|d| Ok(d.instances.values().cloned().collect()))
    }

    fn connections(&self) -> Pending<Vec<ConnectionRecord>> {
        self.with(|d| Ok(d.connections.values().cloned().collect()))
    }

    fn close(&self) {}
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn keeps_the_store_contract() {
        super::super::contract::check(&super::MemoryStore::default()).await;
    }
}
