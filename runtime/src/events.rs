//! Reading task frame logs (docs/protocol.md "Frame logs"). The log itself is durable, in the store: every frame has a
//! per-task sequence id the store assigns in commit order. In front of it, each live task of this
//! node has a ring of its latest [`RING`] frames and a signal, so a subscriber on the node that
//! runs the task reads new frames from memory; anything the ring does not hold (a replay after a
//! reconnect or a restart, a task another node runs) is read from the store by cursor. A wake-up
//! that is missed (another node's notification lost) costs at most [`POLL`] of latency, never a
//! frame.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::store::{Frame, FrameLog, FramePage, StoreError};

/// Frames kept in memory per live task.
pub const RING: usize = 200;

/// Frames read from the store at a time.
pub const PAGE: u32 = 100;

/// Longest a subscriber waits without a wake-up before it looks at the store again.
pub const POLL: Duration = Duration::from_secs(1);

/// A frame's kind: the StreamResponse member it carries.
pub use a2a_protocol::sse::Member as FrameKind;

/// One task's frames on this node: the ring and the signal that something changed.
#[derive(Default)]
struct TaskLog {
    ring: Mutex<BTreeMap<u64, Frame>>,
    /// Bumped on every change (a frame, a close, another node's notification).
    signal: watch::Sender<u64>,
}

impl TaskLog {
    fn bump(&self) {
        self.signal.send_modify(|n| *n += 1);
    }
}

/// The logs of the tasks this node is writing or reading.
#[derive(Default)]
pub struct EventHub {
    logs: Mutex<HashMap<String, Arc<TaskLog>>>,
}

impl EventHub {
    fn log(&self, key: &str) -> Arc<TaskLog> {
        self.logs
            .lock()
            .unwrap()
            .entry(key.to_owned())
            .or_default()
            .clone()
    }

    /// Frames the store has committed for a task (`key`: instance/task): into its ring, and
    /// wakes its subscribers.
    pub fn committed(&self, key: &str, frames: impl IntoIterator<Item = Frame>) {
        let log = self.log(key);
        {
            let mut ring = log.ring.lock().unwrap();
            for f in frames {
                ring.insert(f.seq, f);
            }
            while ring.len() > RING {
                ring.pop_first();
            }
        }
        log.bump();
    }

    /// Something changed in a task's log elsewhere (another node): its subscribers look again.
    pub fn poke(&self, key: &str) {
        if let Some(log) = self.logs.lock().unwrap().get(key) {
            log.bump();
        }
    }

    /// The task settled here: its ring goes, its subscribers finish from the store.
    pub fn close(&self, key: &str) {
        if let Some(log) = self.logs.lock().unwrap().remove(key) {
            log.bump();
        }
    }

    /// A reader of an instance's task's log after `after` (none: only frames from now on);
    /// `NotFound` when the instance has no such task.
    pub async fn open(
        self: &Arc<Self>,
        store: Arc<dyn FrameLog>,
        instance_id: &str,
        task_id: &str,
        after: Option<u64>,
    ) -> Result<Subscription, StoreError> {
        let key = crate::records::task_key(instance_id, task_id);
        let log = self.log(&key);
        let signal = log.signal.subscribe();
        let page = store
            .frames(
                instance_id.to_owned(),
                task_id.to_owned(),
                after.unwrap_or(i64::MAX as u64),
                PAGE,
            )
            .await;
        let page = match page {
            Ok(p) => p,
            Err(e) => {
                self.release(&key, log);
                return Err(e);
            }
        };
        let mut sub = Subscription {
            hub: self.clone(),
            store,
            instance_id: instance_id.to_owned(),
            task_id: task_id.to_owned(),
            key,
            log: Some(log),
            signal,
            cursor: after.unwrap_or(page.last_seq).min(page.last_seq),
            head: page.last_seq,
            lagged: false,
            buffer: VecDeque::new(),
            done: false,
        };
        sub.take(page);
        Ok(sub)
    }

    /// Forgets a log nobody writes or reads any more.
    fn release(&self, key: &str, log: Arc<TaskLog>) {
        let mut logs = self.logs.lock().unwrap();
        // The map's reference and `log`: nobody else holds it.
        if Arc::strong_count(&log) <= 2
            && log.ring.lock().unwrap().is_empty()
            && logs.get(key).is_some_and(|l| Arc::ptr_eq(l, &log))
        {
            logs.remove(key);
        }
    }

    /// Number of logs held in memory.
    pub fn live(&self) -> usize {
        self.logs.lock().unwrap().len()
    }
}

/// A reader of one task's log.
pub struct Subscription {
    hub: Arc<EventHub>,
    store: Arc<dyn FrameLog>,
    instance_id: String,
    task_id: String,
    key: String,
    log: Option<Arc<TaskLog>>,
    signal: watch::Receiver<u64>,
    cursor: u64,
    head: u64,
    lagged: bool,
    buffer: VecDeque<Frame>,
    /// The task settled and every frame up to it has been read from the store.
    done: bool,
}

impl Subscription {
    /// The next frame after the cursor, if it has been read.
    pub fn try_next(&mut self) -> Option<Frame> {
        if self.buffer.is_empty() {
            self.take_ringed();
        }
        self.buffer.pop_front()
    }

    /// The task settled and every frame has been read.
    pub fn is_closed(&self) -> bool {
        self.done && self.buffer.is_empty()
    }

    /// The task's id.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The latest sequence id when this reader opened.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Retention removed frames before this reader got them.
    pub fn lagged(&self) -> bool {
        self.lagged
    }

    /// Waits until a frame after the cursor has been read or the log is finished (cancel-safe:
    /// what a store read brought stays buffered).
    pub async fn ready(&mut self) {
        loop {
            if !self.buffer.is_empty() || self.done {
                return;
            }
            self.signal.borrow_and_update();
            if self.take_ringed() {
                return;
            }
            match self
                .store
                .frames(
                    self.instance_id.clone(),
                    self.task_id.clone(),
                    self.cursor,
                    PAGE,
                )
                .await
            {
                Ok(page) => self.take(page),
                // The task is gone (its instance was deleted): nothing more will come.
                Err(StoreError::NotFound) => self.done = true,
                Err(e) => tracing::warn!(task = %self.key, "cannot read the frame log: {e}"),
            }
            if !self.buffer.is_empty() || self.done {
                return;
            }
            let _ = tokio::time::timeout(POLL, self.signal.changed()).await;
        }
    }

    /// Moves the frames after the cursor that the ring holds into the buffer; whether any.
    fn take_ringed(&mut self) -> bool {
        let Some(log) = &self.log else { return false };
        let ring = log.ring.lock().unwrap();
        let before = self.buffer.len();
        while let Some(f) = ring.get(&(self.cursor + 1)) {
            self.cursor = f.seq;
            self.buffer.push_back(f.clone());
        }
        self.buffer.len() > before
    }

    /// Takes a page read from the store: its frames after the cursor, and whether the log is
    /// finished (the page holds the last frame of a settled task).
    fn take(&mut self, page: FramePage) {
        let FramePage {
            frames,
            last_seq,
            state,
        } = page;
        for f in frames {
            if f.seq <= self.cursor {
                continue;
            }
            self.lagged |= f.seq > self.cursor + 1;
            self.cursor = f.seq;
            self.buffer.push_back(f);
        }
        // A task that was waiting for input when this reader opened is waited on (the reader
        // stays for its continuation); one that came to wait after it, or settled, is finished.
        self.done = self.cursor >= last_seq
            && (state.is_terminal() || (state.is_interrupted() && last_seq > self.head));
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(log) = self.log.take() {
            self.hub.release(&self.key, log);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::memory::MemoryStore;
    use crate::store::{NewFrame, contract::row};
    use a2a_protocol::TaskState;

    fn frame(n: u64) -> NewFrame {
        NewFrame {
            kind: FrameKind::ArtifactUpdate,
            json: format!("{{\"n\":{n}}}"),
        }
    }

    /// Appends through the store and tells the hub, as the host does.
    async fn publish(hub: &EventHub, store: &dyn Store, n: u64) -> u64 {
        let seq = store
            .append_frames("i".into(), "t".into(), vec![frame(n)])
            .await
            .unwrap();
        let json = frame(n).json.into();
        hub.committed(
            "i/t",
            [Frame {
                seq,
                kind: FrameKind::ArtifactUpdate,
                json,
            }],
        );
        seq
    }

    async fn settle(store: &dyn Store, version: u64) {
        let mut done = row("t", version + 1);
        done.state = TaskState::Completed;
        store
            .update_task(done, version, None, vec![NewFrame::status("{}".into())])
            .await
            .unwrap();
    }

    async fn setup() -> (Arc<EventHub>, Arc<dyn Store>) {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        store.create_task(row("t", 1), None, None).await.unwrap();
        (Arc::new(EventHub::default()), store)
    }

    #[tokio::test]
    async fn subscribers_see_identical_ordered_frames_then_the_end() {
        let (hub, store) = setup().await;
        let mut a = hub.open(store.clone(), "i", "t", None).await.unwrap();
        let mut b = hub.open(store.clone(), "i", "t", None).await.unwrap();
        for i in 0..3 {
            publish(&hub, &*store, i).await;
        }
        settle(&*store, 1).await;
        hub.close("i/t");
        for sub in [&mut a, &mut b] {
            let mut seqs = Vec::new();
            while !sub.is_closed() {
                sub.ready().await;
                seqs.extend(std::iter::from_fn(|| sub.try_next()).map(|f| f.seq));
            }
            assert_eq!(seqs, [1, 2, 3, 4], "three chunks and the settling status");
        }
        drop((a, b));
        assert_eq!(hub.live(), 0, "a settled task's log leaves memory");
    }

    #[tokio::test]
    async fn replay_comes_from_the_store_when_the_ring_no_longer_has_it() {
        let (hub, store) = setup().await;
        for i in 0..(RING as u64 + 10) {
            publish(&hub, &*store, i).await;
        }
        let mut from_5 = hub.open(store.clone(), "i", "t", Some(5)).await.unwrap();
        let seqs: Vec<u64> = std::iter::from_fn(|| from_5.try_next())
            .map(|f| f.seq)
            .take(3)
            .collect();
        assert_eq!(
            seqs,
            [6, 7, 8],
            "frames 6.. fell out of the ring, not the log"
        );
        assert!(!from_5.lagged());
        let mut live = hub.open(store.clone(), "i", "t", None).await.unwrap();
        assert!(live.try_next().is_none());
        assert_eq!(live.head(), RING as u64 + 10);
        let past = hub.open(store.clone(), "i", "t", Some(999)).await.unwrap();
        assert_eq!(
            past.head(),
            RING as u64 + 10,
            "a cursor past the head is clamped"
        );
    }

    #[tokio::test]
    async fn a_reader_on_another_node_gets_frames_it_was_never_told_of() {
        let (writer, store) = setup().await;
        let reader = Arc::new(EventHub::default());
        let mut sub = reader.open(store.clone(), "i", "t", None).await.unwrap();
        publish(&writer, &*store, 0).await;
        let started = std::time::Instant::now();
        sub.ready().await;
        assert_eq!(sub.try_next().unwrap().seq, 1);
        assert!(started.elapsed() <= POLL + Duration::from_millis(500));
        publish(&writer, &*store, 1).await;
        reader.poke("i/t");
        sub.ready().await;
        assert_eq!(sub.try_next().unwrap().seq, 2, "a poke reads at once");
    }

    #[tokio::test]
    async fn an_interrupted_or_unknown_task_finishes_the_reader() {
        let (hub, store) = setup().await;
        let mut waiting = row("t", 2);
        waiting.state = TaskState::InputRequired;
        store
            .update_task(waiting, 1, None, vec![NewFrame::status("{}".into())])
            .await
            .unwrap();
        let mut sub = hub.open(store.clone(), "i", "t", Some(0)).await.unwrap();
        assert_eq!(sub.try_next().unwrap().seq, 1);
        assert!(
            !sub.is_closed(),
            "opened on a task waiting for input: it waits for the continuation"
        );
        let mut again = row("t", 3);
        again.state = TaskState::InputRequired;
        store
            .update_task(again, 2, None, vec![NewFrame::status("{}".into())])
            .await
            .unwrap();
        sub.ready().await;
        assert_eq!(sub.try_next().unwrap().seq, 2);
        sub.ready().await;
        assert!(
            sub.is_closed(),
            "it came to wait again after this reader opened"
        );
        assert!(matches!(
            hub.open(store, "other", "t", None).await,
            Err(StoreError::NotFound)
        ));
        drop(sub);
        assert_eq!(hub.live(), 0, "nobody reads or writes it any more");
    }
}
