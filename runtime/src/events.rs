//! The per-task frame log: the latest 200 frames of each live task, with sequence ids, fanned out
//! to every subscriber in the same order (SPEC §5).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// Frames kept per task for replay.
pub const RING: usize = 200;

/// A frame's kind: the StreamResponse member it carries.
pub use a2a_protocol::sse::Member as FrameKind;

/// One published frame.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Per-task sequence, from 1.
    pub seq: u64,
    /// Kind.
    pub kind: FrameKind,
    /// The member's JSON.
    pub json: Arc<str>,
}

#[derive(Default)]
struct Log {
    frames: VecDeque<Frame>,
    next_seq: u64,
}

/// One task's log.
pub struct TaskLog {
    log: Mutex<Log>,
    /// (latest seq, closed)
    signal: watch::Sender<(u64, bool)>,
}

/// Every live task's log.
#[derive(Default)]
pub struct EventHub {
    logs: Mutex<HashMap<String, Arc<TaskLog>>>,
    /// The last sequence id of closed logs, so a task that runs again (after INPUT_REQUIRED)
    /// continues its sequence. Bounded: forgotten wholesale past [`CLOSED_MEMORY`] entries.
    closed: Mutex<HashMap<String, u64>>,
}

/// How many closed logs' sequences are remembered.
pub const CLOSED_MEMORY: usize = 100_000;

impl EventHub {
    fn log(&self, task_id: &str) -> Arc<TaskLog> {
        let mut logs = self.logs.lock().unwrap();
        if let Some(log) = logs.get(task_id) {
            return log.clone();
        }
        let last = self.closed.lock().unwrap().remove(task_id).unwrap_or(0);
        let log = Arc::new(TaskLog {
            log: Mutex::new(Log {
                next_seq: last + 1,
                ..Default::default()
            }),
            signal: watch::channel((last, false)).0,
        });
        logs.insert(task_id.to_owned(), log.clone());
        log
    }

    /// Appends a frame; returns its sequence id.
    pub fn publish(&self, task_id: &str, kind: FrameKind, json: String) -> u64 {
        let log = self.log(task_id);
        let seq = {
            let mut l = log.log.lock().unwrap();
            let seq = l.next_seq;
            l.next_seq += 1;
            if l.frames.len() == RING {
                l.frames.pop_front();
            }
            l.frames.push_back(Frame {
                seq,
                kind,
                json: json.into(),
            });
            seq
        };
        log.signal.send_replace((seq, false));
        seq
    }

    /// Ends a task's log: current subscribers drain it and end; the next `open` starts a new one.
    pub fn close(&self, task_id: &str) {
        if let Some(log) = self.logs.lock().unwrap().remove(task_id) {
            let last = log.log.lock().unwrap().next_seq - 1;
            let mut closed = self.closed.lock().unwrap();
            if closed.len() >= CLOSED_MEMORY {
                closed.clear();
            }
            closed.insert(task_id.to_owned(), last);
            log.signal.send_modify(|s| s.1 = true);
        }
    }

    /// A reader of a task's log after `after` (none: only frames published from now on).
    pub fn subscribe(&self, task_id: &str, after: Option<u64>) -> Subscription {
        let log = self.log(task_id);
        let head = log.log.lock().unwrap().next_seq - 1;
        Subscription {
            signal: log.signal.subscribe(),
            log,
            cursor: after.unwrap_or(head).min(head),
            head,
            lagged: false,
            key: task_id.to_owned(),
        }
    }

    /// Number of live logs.
    pub fn live(&self) -> usize {
        self.logs.lock().unwrap().len()
    }
}

/// A reader of one task's log.
pub struct Subscription {
    log: Arc<TaskLog>,
    signal: watch::Receiver<(u64, bool)>,
    cursor: u64,
    head: u64,
    lagged: bool,
    key: String,
}

impl Subscription {
    /// The next frame after the cursor, if published.
    pub fn try_next(&mut self) -> Option<Frame> {
        let l = self.log.log.lock().unwrap();
        let first = l.frames.front()?.seq;
        if self.cursor + 1 < first {
            self.lagged = true;
            self.cursor = first - 1;
        }
        let frame = l.frames.get((self.cursor + 1 - first) as usize)?.clone();
        self.cursor = frame.seq;
        Some(frame)
    }

    /// The log is closed and fully read.
    pub fn is_closed(&self) -> bool {
        let (latest, closed) = *self.signal.borrow();
        closed && self.cursor >= latest
    }

    /// The key of the log it reads.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The latest sequence id when this reader opened.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Frames were dropped from the ring before this reader got them.
    pub fn lagged(&self) -> bool {
        self.lagged
    }

    /// Waits until a frame after the cursor exists or the log is closed (cancel-safe).
    pub async fn ready(&mut self) {
        let cursor = self.cursor;
        let _ = self
            .signal
            .wait_for(|(latest, closed)| *latest > cursor || *closed)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn subscribers_see_identical_ordered_frames_and_the_close() {
        let hub = EventHub::default();
        let mut a = hub.subscribe("t", None);
        let mut b = hub.subscribe("t", None);
        for i in 0..3 {
            hub.publish("t", FrameKind::StatusUpdate, format!("{{\"n\":{i}}}"));
        }
        hub.close("t");
        for sub in [&mut a, &mut b] {
            sub.ready().await;
            let seqs: Vec<u64> = std::iter::from_fn(|| sub.try_next())
                .map(|f| f.seq)
                .collect();
            assert_eq!(seqs, [1, 2, 3]);
            assert!(sub.is_closed());
        }
        assert_eq!(hub.live(), 0);
    }

    #[tokio::test]
    async fn replay_from_a_sequence_and_ring_overflow() {
        let hub = EventHub::default();
        for _ in 0..(RING + 10) {
            hub.publish("t", FrameKind::ArtifactUpdate, "{}".into());
        }
        let mut from_5 = hub.subscribe("t", Some(5));
        assert_eq!(
            from_5.try_next().unwrap().seq,
            11,
            "frames 6..=10 fell out of the ring"
        );
        assert!(from_5.lagged());
        let mut from_200 = hub.subscribe("t", Some(200));
        assert_eq!(from_200.try_next().unwrap().seq, 201);
        assert!(!from_200.lagged());
        let mut live = hub.subscribe("t", None);
        assert!(live.try_next().is_none());
        assert_eq!(live.head(), RING as u64 + 10);
    }

    #[tokio::test]
    async fn a_task_that_runs_again_continues_its_sequence() {
        let hub = EventHub::default();
        hub.publish("t", FrameKind::StatusUpdate, "{}".into());
        hub.publish("t", FrameKind::StatusUpdate, "{}".into());
        hub.close("t");
        assert_eq!(hub.publish("t", FrameKind::StatusUpdate, "{}".into()), 3);
        let sub = hub.subscribe("t", Some(99));
        assert_eq!(sub.head(), 3, "a cursor past the head is clamped");
    }
}
