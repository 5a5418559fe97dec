//! A [`Store`] in memory, for unit tests of what runs on a store (the host's capabilities) and for
//! `a2a-edge config check` (declarations reconciled as a first start would): the
//! same contract as SQLite (`store::contract`, in tests), nothing durable.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use a2a_protocol::TaskState;

use super::*;

/// Everything in maps behind one lock.
#[derive(Default)]
pub struct MemoryStore {
    data: Mutex<Data>,
    signal: Arc<tokio::sync::Notify>,
    /// Every call fails as unavailable while set (a database that is down).
    down: std::sync::atomic::AtomicBool,
}

#[derive(Default)]
struct Data {
    /// Notifications given up at the outbox's bound.
    dropped: u64,
    tasks: BTreeMap<String, TaskRow>,
    messages: BTreeMap<(String, String), MessageRecord>,
    instances: BTreeMap<String, InstanceRecord>,
    connections: BTreeMap<String, ConnectionRecord>,
    /// Push configs in creation order, with their delivery state.
    push: Vec<PushStatus>,
    /// Waiting notifications and when each is tried next, in outbox order.
    outbox: Vec<(Delivery, u64)>,
    seq: u64,
    /// Each task's frame log and latest sequence id.
    logs: BTreeMap<String, (Vec<Frame>, u64)>,
    /// When each running task's lease ends.
    leases: BTreeMap<String, u64>,
    /// The operator's notes on tasks, by instance and task.
    notes: BTreeMap<(String, String), String>,
    /// Agents' key-value buckets.
    kv: BTreeMap<KvKey, Vec<u8>>,
}

impl Data {
    /// Queues a notification of `row` for each of its task's configs.
    fn notify(&mut self, row: &TaskRow) {
        for p in self
            .push
            .iter()
            .filter(|p| (&p.config.instance_id, &p.config.task_id) == (&row.instance_id, &row.id))
        {
            self.seq += 1;
            let d = Delivery {
                seq: self.seq,
                config: p.config.clone(),
                payload: a2a_protocol::push::payload(&row.body),
                created_at: row.updated_at,
                attempts: 0,
            };
            self.outbox.push((d, row.updated_at));
        }
        for p in self.push.iter_mut() {
            let waiting: Vec<usize> = (0..self.outbox.len())
                .filter(|i| same(&self.outbox[*i].0.config, &p.config))
                .collect();
            if waiting.len() as u64 > MAX_WAITING {
                self.outbox.remove(waiting[1]);
                (p.failed, p.last_status) = (p.failed + 1, Some(OVERFLOW.into()));
                self.dropped += 1;
            }
        }
    }

    /// The outbox entries of a config.
    fn waiting<'a>(&'a self, c: &'a PushConfig) -> impl Iterator<Item = &'a (Delivery, u64)> {
        self.outbox.iter().filter(move |(d, _)| same(&d.config, c))
    }

    fn put_push(&mut self, config: PushConfig) -> Result<(), StoreError> {
        self.tasks
            .get(&config.task_id)
            .filter(|t| t.instance_id == config.instance_id)
            .ok_or(StoreError::NotFound)?;
        if let Some(p) = self.push.iter_mut().find(|p| same(&p.config, &config)) {
            p.config = config;
            return Ok(());
        }
        let max = a2a_protocol::push::MAX_PER_TASK;
        let of_task = |p: &&PushStatus| {
            (&p.config.instance_id, &p.config.task_id) == (&config.instance_id, &config.task_id)
        };
        if self.push.iter().filter(of_task).count() >= max {
            return Err(StoreError::Invalid(format!("{max} configs already")));
        }
        self.push.push(PushStatus {
            config,
            delivered: 0,
            failed: 0,
            pending: 0,
            attempts: 0,
            last_status: None,
            last_attempt_at: None,
            next_at: None,
        });
        Ok(())
    }
}

/// The same config (instance, task and id).
fn same(a: &PushConfig, b: &PushConfig) -> bool {
    (&a.instance_id, &a.task_id, &a.id) == (&b.instance_id, &b.task_id, &b.id)
}

impl Data {
    /// Appends frames to a task's log (within [`RETAIN_FRAMES`]); the first one's id.
    fn log(&mut self, task_id: &str, frames: Vec<NewFrame>) -> u64 {
        let (log, last) = self.logs.entry(task_id.to_owned()).or_default();
        let first = *last + 1;
        for f in frames {
            *last += 1;
            log.push(Frame {
                seq: *last,
                kind: f.kind,
                json: f.json.into(),
            });
        }
        let keep_after = last.saturating_sub(RETAIN_FRAMES);
        log.retain(|f| f.seq > keep_after);
        first
    }

    /// Takes (running) or ends the lease of a written row.
    fn lease(&mut self, row: &TaskRow) {
        match Lease::default().until(row.state, row.updated_at) {
            Some(until) => self.leases.insert(row.id.clone(), until as u64),
            None => self.leases.remove(&row.id),
        };
    }

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
            .filter(|t| f.principal.as_ref().is_none_or(|p| &t.principal == p))
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
    /// Takes the store down (every call fails as unavailable) or back up.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::Relaxed);
    }

    fn with<T>(&self, f: impl FnOnce(&mut Data) -> Result<T, StoreError>) -> Pending<T> {
        if self.down.load(std::sync::atomic::Ordering::Relaxed) {
            return Pending::ready(Err(StoreError::Unavailable("the database is down".into())));
        }
        let mut data = self.data.lock().unwrap();
        let before = (data.seq, data.outbox.len());
        let result = f(&mut data);
        if (data.seq, data.outbox.len()) != before {
            self.signal.notify_one();
        }
        Pending::ready(result)
    }
}

impl Tasks for MemoryStore {
    fn system(&self) -> &'static str {
        "memory"
    }

    fn create_task(
        &self,
        row: TaskRow,
        claim: Option<MessageClaim>,
        push: Option<PushConfig>,
    ) -> Pending<()> {
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
            let row = TaskRow { version: 1, ..row };
            d.lease(&row);
            d.tasks.insert(row.id.clone(), row.clone());
            if let Some(config) = push {
                d.put_push(config)?;
            }
            d.notify(&row);
            Ok(())
        })
    }

    fn update_task(
        &self,
        row: TaskRow,
        expected: u64,
        claim: Option<MessageClaim>,
        frames: Vec<NewFrame>,
    ) -> Pending<Written> {
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
            let (created_at, peer_id, principal, trace_id) = (
                current.created_at,
                current.peer_id.clone(),
                current.principal.clone(),
                current.trace_id.clone(),
            );
            if let Some(c) = &claim {
                d.record_claim(&row.instance_id, c, &row.id);
            }
            let row = TaskRow {
                version: expected + 1,
                created_at,
                peer_id,
                principal,
                trace_id,
                ..row
            };
            d.lease(&row);
            d.tasks.insert(row.id.clone(), row.clone());
            d.notify(&row);
            Ok(Written {
                version: expected + 1,
                first_seq: d.log(&row.id, frames),
            })
        })
    }

    fn fail_unsettled(&self, now: u64, status_text: String) -> Pending<u64> {
        self.with(|d| {
            let running = d.tasks.values_mut().filter(|t| t.state.is_running());
            let mut failed = Vec::new();
            for t in running {
                let (body, frames) = super::failed(&t.body, now, &status_text);
                (t.state, t.updated_at, t.version, t.body, t.stamp) =
                    (TaskState::Failed, now, t.version + 1, body, 0);
                failed.push((t.clone(), frames));
            }
            for (t, frames) in failed.iter().cloned() {
                d.notify(&t);
                d.log(&t.id, frames);
                d.leases.remove(&t.id);
            }
            Ok(failed.len() as u64)
        })
    }

    fn note_task(&self, instance_id: String, task_id: String, note: String) -> Pending<()> {
        self.with(|d| {
            d.notes.insert((instance_id, task_id), note);
            Ok(())
        })
    }

    fn task_note(&self, instance_id: String, task_id: String) -> Pending<Option<String>> {
        self.with(|d| Ok(d.notes.get(&(instance_id, task_id)).cloned()))
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
                        peer_id: None,
                    });
                s.task_count += 1;
                s.active_count += u64::from(t.state.is_active());
                (s.first_seen, s.last_seen) = (
                    s.first_seen.min(t.created_at),
                    s.last_seen.max(t.updated_at),
                );
                s.peer_id = s.peer_id.take().into_iter().chain(t.peer_id.clone()).min();
            }
            let mut all: Vec<ContextSummary> = by.into_values().collect();
            all.sort_by_key(|c| std::cmp::Reverse(c.last_seen));
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
}

impl FrameLog for MemoryStore {
    fn append_frames(
        &self,
        instance_id: String,
        task_id: String,
        frames: Vec<NewFrame>,
    ) -> Pending<u64> {
        self.with(|d| {
            let task = d
                .tasks
                .get(&task_id)
                .filter(|t| t.instance_id == instance_id)
                .ok_or(StoreError::NotFound)?;
            if task.state.is_terminal() {
                return Err(StoreError::settled(&task_id));
            }
            Ok(d.log(&task_id, frames))
        })
    }

    fn frames(
        &self,
        instance_id: String,
        task_id: String,
        after: u64,
        limit: u32,
    ) -> Pending<FramePage> {
        self.with(|d| {
            let task = d
                .tasks
                .get(&task_id)
                .filter(|t| t.instance_id == instance_id)
                .ok_or(StoreError::NotFound)?;
            let (log, last_seq) = d.logs.get(&task_id).cloned().unwrap_or_default();
            Ok(FramePage {
                frames: log
                    .into_iter()
                    .filter(|f| f.seq > after)
                    .take(limit as usize)
                    .collect(),
                last_seq,
                state: task.state,
            })
        })
    }

    fn prune_frames(&self, before: u64) -> Pending<u64> {
        self.with(|d| {
            let old: Vec<String> = d
                .tasks
                .values()
                .filter(|t| t.updated_at < before && !t.state.is_running())
                .map(|t| t.id.clone())
                .collect();
            let mut pruned = 0;
            for id in old {
                if let Some((log, _)) = d.logs.get_mut(&id) {
                    pruned += log.len() as u64;
                    log.clear();
                }
            }
            Ok(pruned)
        })
    }
}

impl PushOutbox for MemoryStore {
    fn put_push_config(&self, config: PushConfig) -> Pending<()> {
        self.with(|d| d.put_push(config))
    }

    fn delete_push_config(&self, instance_id: String, task_id: String, id: String) -> Pending<()> {
        self.with(|d| {
            let key = PushConfig {
                instance_id,
                task_id,
                id,
                body: String::new(),
            };
            d.push.retain(|p| !same(&p.config, &key));
            d.outbox.retain(|(o, _)| !same(&o.config, &key));
            Ok(())
        })
    }

    fn push_configs(&self, instance_id: String, task_id: String) -> Pending<Vec<PushConfig>> {
        self.with(|d| {
            Ok(d.push
                .iter()
                .filter(|p| p.config.instance_id == instance_id && p.config.task_id == task_id)
                .map(|p| p.config.clone())
                .collect())
        })
    }

    fn due_deliveries(&self, look: DueLook) -> Pending<DueDeliveries> {
        self.with(|d| {
            let now = look.now;
            let heads: Vec<&(Delivery, u64)> = d
                .push
                .iter()
                .filter_map(|p| d.waiting(&p.config).next())
                .collect();
            let mut due: Vec<&Delivery> = heads
                .iter()
                .filter(|(o, at)| *at <= now && !look.skip.contains(&o.config.instance_id))
                .map(|(o, _)| o)
                .collect();
            due.sort_by_key(|o| o.seq);
            // Each head's turn: how many heads of its instance come before it.
            let mut turns: HashMap<&str, u32> = HashMap::new();
            let mut due: Vec<(u32, &Delivery)> = due
                .into_iter()
                .map(|o| {
                    let turn = turns.entry(&o.config.instance_id).or_default();
                    *turn += 1;
                    (*turn, o)
                })
                .collect();
            due.sort_by_key(|(turn, o)| (*turn, o.seq));
            let due = due
                .into_iter()
                .take(look.limit as usize)
                .map(|(_, o)| o.clone())
                .collect();
            Ok(DueDeliveries {
                due,
                next_at: heads.iter().map(|(_, at)| *at).filter(|at| *at > now).min(),
                pending: d.outbox.len() as u64,
            })
        })
    }

    fn attempted(&self, seq: u64, now: u64, attempt: Attempt) -> Pending<()> {
        self.with(|d| {
            let Some(i) = d.outbox.iter().position(|(o, _)| o.seq == seq) else {
                return Ok(());
            };
            let config = d.outbox[i].0.config.clone();
            let status = d.push.iter_mut().find(|p| same(&p.config, &config));
            let status = status.ok_or(StoreError::NotFound)?;
            status.last_attempt_at = Some(now);
            match attempt {
                Attempt::Delivered(code) => {
                    (status.delivered, status.last_status) =
                        (status.delivered + 1, Some(code.to_string()));
                    d.outbox.remove(i);
                }
                Attempt::GaveUp(error) => {
                    (status.failed, status.last_status) = (status.failed + 1, Some(error));
                    d.outbox.remove(i);
                }
                Attempt::Retry { next_at, error } => {
                    status.last_status = Some(error);
                    let (o, at) = &mut d.outbox[i];
                    (o.attempts, *at) = (o.attempts + 1, next_at);
                }
            }
            d.seq += 1;
            Ok(())
        })
    }

    fn push_status(
        &self,
        instance_id: String,
        task_id: Option<String>,
    ) -> Pending<Vec<PushStatus>> {
        self.with(|d| {
            Ok(d.push
                .iter()
                .filter(|p| p.config.instance_id == instance_id)
                .filter(|p| task_id.as_ref().is_none_or(|t| &p.config.task_id == t))
                .map(|p| {
                    let head = d.waiting(&p.config).next();
                    PushStatus {
                        pending: d.waiting(&p.config).count() as u64,
                        attempts: head.map_or(0, |(o, _)| o.attempts),
                        next_at: head.map(|(_, at)| *at),
                        ..p.clone()
                    }
                })
                .collect())
        })
    }

    fn outbox_signal(&self) -> Arc<tokio::sync::Notify> {
        self.signal.clone()
    }

    fn push_dropped(&self) -> u64 {
        self.data.lock().unwrap().dropped
    }
}

impl Records for MemoryStore {
    fn put_instance(&self, record: InstanceRecord) -> Pending<()> {
        self.with(|d| {
            d.instances.insert(record.id.clone(), record);
            Ok(())
        })
    }

    fn delete_instance(&self, id: String) -> Pending<()> {
        self.with(|d| {
            d.instances.remove(&id);
            Ok(())
        })
    }

    fn put_connection(&self, record: ConnectionRecord) -> Pending<()> {
        self.with(|d| {
            d.connections.insert(record.id.clone(), record);
            Ok(())
        })
    }

    fn delete_connection(&self, id: String) -> Pending<()> {
        self.with(|d| {
            d.connections.remove(&id);
            Ok(())
        })
    }

    fn instances(&self) -> Pending<Vec<InstanceRecord>> {
        self.with(|d| Ok(d.instances.values().cloned().collect()))
    }

    fn connections(&self) -> Pending<Vec<ConnectionRecord>> {
        self.with(|d| Ok(d.connections.values().cloned().collect()))
    }
}

impl KeyValues for MemoryStore {
    fn kv_get(&self, at: KvKey) -> Pending<Option<Vec<u8>>> {
        self.with(|d| Ok(d.kv.get(&at).cloned()))
    }

    fn kv_set(&self, at: KvKey, value: Vec<u8>, quota: u64) -> Pending<()> {
        self.with(|d| {
            let used: u64 =
                d.kv.iter()
                    .filter(|(k, _)| k.scope == at.scope && **k != at)
                    .map(|(k, v)| k.cost(v.len()))
                    .sum();
            if used + at.cost(value.len()) > quota {
                return Err(over_quota(quota));
            }
            d.kv.insert(at, value);
            Ok(())
        })
    }

    fn kv_delete(&self, at: KvKey) -> Pending<()> {
        self.with(|d| {
            d.kv.remove(&at);
            Ok(())
        })
    }

    fn kv_keys(
        &self,
        scope: String,
        bucket: String,
        offset: u64,
        limit: u32,
    ) -> Pending<Vec<String>> {
        self.with(|d| {
            Ok(d.kv
                .keys()
                .filter(|k| k.scope == scope && k.bucket == bucket)
                .skip(offset as usize)
                .take(limit as usize)
                .map(|k| k.key.clone())
                .collect())
        })
    }
}

impl Cluster for MemoryStore {
    fn renew_leases(&self, now: u64, task_ids: Vec<String>) -> Pending<Vec<String>> {
        self.with(|d| {
            let until = now + Lease::default().ttl_ms;
            Ok(task_ids
                .into_iter()
                .filter(|id| match d.leases.get_mut(id) {
                    Some(u) => {
                        *u = until;
                        true
                    }
                    None => false,
                })
                .collect())
        })
    }

    fn expired_leases(&self, now: u64, limit: u32) -> Pending<Vec<TaskRow>> {
        self.with(|d| {
            Ok(d.leases
                .iter()
                .filter(|(_, until)| **until < now)
                .filter_map(|(id, _)| d.tasks.get(id).cloned())
                .take(limit as usize)
                .collect())
        })
    }
}

impl Store for MemoryStore {
    fn flush(&self) -> Pending<()> {
        Pending::ready(Ok(()))
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
