//! The activity feed of the control surface (`GET /a2a/api/events`): task state changes and
//! control actions as they happen, so the panel redraws what changed instead of polling. Nothing
//! is built when nobody watches; watchers are few and bounded, and one that falls behind is told
//! how many events it missed (it then reads the state again) instead of holding the others back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Watchers at once; one more is refused until another leaves.
pub const MAX_WATCHERS: usize = 16;

/// Events kept for a slow watcher before it is told it lagged.
const BACKLOG: usize = 512;

/// One event: its kind (the SSE `event:` name) and its JSON.
#[derive(Clone, Debug)]
pub struct Event {
    /// `task` or `change`.
    pub kind: &'static str,
    /// The event's body.
    pub data: Arc<str>,
}

/// The feed's sender, shared by every publisher (cheap to clone).
#[derive(Clone)]
pub struct Feed {
    tx: broadcast::Sender<Event>,
    watchers: Arc<AtomicUsize>,
    closed: CancellationToken,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            tx: broadcast::channel(BACKLOG).0,
            watchers: Arc::default(),
            closed: CancellationToken::new(),
        }
    }
}

impl Feed {
    /// Publishes an event; `data` is only built when somebody watches.
    pub fn publish(&self, kind: &'static str, data: impl FnOnce() -> Value) {
        if self.watchers.load(Ordering::Relaxed) == 0 {
            return;
        }
        let data = data().to_string().into();
        let _ = self.tx.send(Event { kind, data });
    }

    /// A new watcher, or `None` when [`MAX_WATCHERS`] watch already.
    pub fn watch(&self) -> Option<Watcher> {
        self.watchers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_WATCHERS).then_some(n + 1)
            })
            .ok()?;
        Some(Watcher {
            rx: self.tx.subscribe(),
            watchers: self.watchers.clone(),
            closed: self.closed.clone(),
        })
    }

    /// Ends every watcher (at shutdown, so no feed holds the server open).
    pub fn close(&self) {
        self.closed.cancel();
    }
}

/// One watcher's end of the feed; leaving frees its place.
pub struct Watcher {
    rx: broadcast::Receiver<Event>,
    watchers: Arc<AtomicUsize>,
    closed: CancellationToken,
}

/// What a watcher receives next.
#[derive(Debug)]
pub enum Next {
    /// An event.
    Event(Event),
    /// This many events were dropped because the watcher fell behind.
    Lagged(u64),
}

impl Watcher {
    /// The next event; `None` once the feed is closed.
    pub async fn next(&mut self) -> Option<Next> {
        // Biased: once closed, a watcher ends at once, whatever is still queued for it.
        let received = tokio::select! {
            biased;
            _ = self.closed.cancelled() => return None,
            r = self.rx.recv() => r,
        };
        match received {
            Ok(e) => Some(Next::Event(e)),
            Err(broadcast::error::RecvError::Lagged(n)) => Some(Next::Lagged(n)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.watchers.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn builds_nothing_unwatched_bounds_watchers_and_tells_a_slow_one_it_lagged() {
        let feed = Feed::default();
        feed.publish("task", || unreachable!("nobody watches"));
        let mut watchers: Vec<Watcher> = (0..MAX_WATCHERS).map(|_| feed.watch().unwrap()).collect();
        assert!(feed.watch().is_none(), "one watcher too many is refused");
        watchers.pop();
        let mut w = feed.watch().expect("a place was freed");
        feed.publish(
            "change",
            || serde_json::json!({ "action": "inbound.create" }),
        );
        match w.next().await {
            Some(Next::Event(e)) => {
                assert_eq!(e.kind, "change");
                assert_eq!(&*e.data, r#"{"action":"inbound.create"}"#);
            }
            other => panic!("expected the event, got {other:?}"),
        }
        for i in 0..BACKLOG + 10 {
            feed.publish("task", || serde_json::json!(i));
        }
        assert!(matches!(w.next().await, Some(Next::Lagged(10))));
        match w.next().await {
            Some(Next::Event(e)) => assert_eq!(&*e.data, "10", "it goes on from the oldest kept"),
            other => panic!("expected an event, got {other:?}"),
        }
        feed.close();
        assert!(w.next().await.is_none(), "a closed feed ends its watchers");
    }
}
