//! Who is calling, and which streams are open: remote peers per instance (source, tasks,
//! streaming), open SSE streams with the contexts they carry, and the switches that end a peer's
//! or an instance's streams (`inbound.close`, `inbound.disable`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use serde::Serialize;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::feed::Feed;
use crate::responses::Body;

/// Peers remembered per instance at most; the least recently seen go first.
const MAX_PEERS: usize = 4096;

/// One remote caller of one instance, as the snapshot shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerView {
    /// `<source address>@<instance id>`.
    pub id: String,
    /// The instance it calls.
    pub server_id: String,
    /// Its `User-Agent`, or the source address.
    pub label: String,
    /// Source address.
    pub source: String,
    /// First request, ms.
    pub first_seen: u64,
    /// Latest request, ms.
    pub last_seen: u64,
    /// Tasks it created.
    pub task_count: u64,
    /// Its tasks not yet terminal.
    pub active_task_ids: Vec<String>,
    /// Whether it has a stream open now.
    pub streaming: bool,
}

struct Peer {
    view: PeerView,
    active: BTreeSet<String>,
    streams: u32,
    closer: CancellationToken,
}

struct OpenStream {
    peer_id: String,
    server_id: String,
    contexts: Contexts,
}

/// The contexts a request touched (shared with its open stream).
pub type Contexts = Arc<Mutex<Vec<String>>>;

#[derive(Default)]
struct Inner {
    peers: HashMap<String, Peer>,
    task_peer: HashMap<String, String>,
    streams: HashMap<u64, OpenStream>,
    next_stream: u64,
    instance_closers: HashMap<String, CancellationToken>,
}

/// The activity registry.
#[derive(Default)]
pub struct Activity {
    inner: Arc<Mutex<Inner>>,
    feed: Feed,
}

/// The stable id of a caller of an instance.
pub fn peer_id(source: IpAddr, server_id: &str) -> String {
    format!("{source}@{server_id}")
}

impl Activity {
    /// Records a request from `source` to `server_id`.
    pub fn seen(&self, server_id: &str, source: IpAddr, label: Option<&str>, now: u64) {
        let id = peer_id(source, server_id);
        let mut inner = self.inner.lock().unwrap();
        if !inner.peers.contains_key(&id) && inner.peers.len() >= MAX_PEERS {
            evict_oldest(&mut inner);
        }
        let peer = inner.peers.entry(id.clone()).or_insert_with(|| Peer {
            view: PeerView {
                id,
                server_id: server_id.to_owned(),
                label: String::new(),
                source: source.to_string(),
                first_seen: now,
                last_seen: now,
                task_count: 0,
                active_task_ids: Vec::new(),
                streaming: false,
            },
            active: BTreeSet::new(),
            streams: 0,
            closer: CancellationToken::new(),
        });
        peer.view.last_seen = now;
        peer.view.label = label
            .map(|l| l.chars().take(80).collect())
            .unwrap_or_else(|| source.to_string());
    }

    /// A known peer created a task.
    pub fn task_created(&self, peer_id: &str, task_id: &str) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(peer) = inner.peers.get_mut(peer_id) {
            peer.view.task_count += 1;
            peer.active.insert(task_id.to_owned());
            inner
                .task_peer
                .insert(task_id.to_owned(), peer_id.to_owned());
        }
    }

    /// A task reached a terminal state.
    pub fn task_settled(&self, task_id: &str) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(peer_id) = inner.task_peer.remove(task_id)
            && let Some(peer) = inner.peers.get_mut(&peer_id)
        {
            peer.active.remove(task_id);
        }
    }

    /// A task of `server_id` was written in `state`: told to the feed's watchers.
    pub fn task_written(&self, server_id: &str, task_id: &str, context_id: &str, state: &str) {
        self.feed.publish("task", || {
            serde_json::json!({ "serverId": server_id, "taskId": task_id, "contextId": context_id, "state": state })
        });
    }

    /// The activity feed (task writes here, control actions by the control API).
    pub fn feed(&self) -> &Feed {
        &self.feed
    }

    /// Every peer, most recently seen first.
    pub fn peers(&self) -> Vec<PeerView> {
        let inner = self.inner.lock().unwrap();
        let mut out: Vec<PeerView> = inner
            .peers
            .values()
            .map(|p| PeerView {
                active_task_ids: p.active.iter().cloned().collect(),
                streaming: p.streams > 0,
                ..p.view.clone()
            })
            .collect();
        out.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then_with(|| a.id.cmp(&b.id)));
        out
    }

    /// Ends a peer's open streams and answers its non-terminal tasks (to be canceled); none
    /// when the peer is unknown.
    pub fn close_peer(&self, peer_id: &str) -> Option<Vec<String>> {
        let mut inner = self.inner.lock().unwrap();
        let peer = inner.peers.get_mut(peer_id)?;
        std::mem::take(&mut peer.closer).cancel();
        Some(peer.active.iter().cloned().collect())
    }

    /// Ends every open stream of an instance (it was disabled or removed).
    pub fn close_instance(&self, server_id: &str) {
        if let Some(t) = self
            .inner
            .lock()
            .unwrap()
            .instance_closers
            .remove(server_id)
        {
            t.cancel();
        }
    }

    /// Open streams now.
    pub fn open_streams(&self) -> usize {
        self.inner.lock().unwrap().streams.len()
    }

    /// The (instance, context) pairs that have a stream open now.
    pub fn streaming_contexts(&self) -> HashSet<(String, String)> {
        let inner = self.inner.lock().unwrap();
        inner
            .streams
            .values()
            .flat_map(|s| {
                s.contexts
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|c| (s.server_id.clone(), c.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Wraps an SSE response body: counted as open while it lasts, ended cleanly when its peer is
    /// closed or its instance disabled. Internal callers (no known peer) are only tied to the
    /// instance.
    pub fn watch_stream(
        &self,
        peer_id: &str,
        server_id: &str,
        contexts: Contexts,
        body: Body,
    ) -> Body {
        let mut inner = self.inner.lock().unwrap();
        let instance = inner
            .instance_closers
            .entry(server_id.to_owned())
            .or_default()
            .clone();
        let peer = inner.peers.get_mut(peer_id).map(|p| {
            p.streams += 1;
            p.closer.clone()
        });
        let id = inner.next_stream;
        inner.next_stream += 1;
        inner.streams.insert(
            id,
            OpenStream {
                peer_id: peer_id.to_owned(),
                server_id: server_id.to_owned(),
                contexts,
            },
        );
        drop(inner);
        let stop = CancellationToken::new();
        let (a, b, s) = (instance, peer, stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = a.cancelled() => {}
                _ = async { match b { Some(b) => b.cancelled().await, None => std::future::pending().await } } => {}
                _ = s.cancelled() => {}
            }
            s.cancel();
        });
        use http_body_util::BodyExt;
        Watched {
            inner: body,
            stop: Box::pin(stop.clone().cancelled_owned()),
            _guard: Guard {
                activity: self.inner.clone(),
                id,
                stop,
            },
        }
        .boxed_unsync()
    }
}

fn evict_oldest(inner: &mut Inner) {
    if let Some(oldest) = inner
        .peers
        .values()
        .filter(|p| p.streams == 0 && p.active.is_empty())
        .min_by_key(|p| p.view.last_seen)
        .map(|p| p.view.id.clone())
    {
        inner.peers.remove(&oldest);
    }
}

/// Unregisters an open stream when its body is dropped.
struct Guard {
    activity: Arc<Mutex<Inner>>,
    id: u64,
    stop: CancellationToken,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop.cancel();
        let mut inner = self.activity.lock().unwrap();
        if let Some(s) = inner.streams.remove(&self.id)
            && let Some(p) = inner.peers.get_mut(&s.peer_id)
        {
            p.streams = p.streams.saturating_sub(1);
        }
    }
}

/// A body that ends (cleanly, as if complete) once `stop` fires.
struct Watched {
    inner: Body,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
    _guard: Guard,
}

impl HttpBody for Watched {
    type Data = Bytes;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if self.stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_tasks_and_closing() {
        let a = Activity::default();
        let ip: IpAddr = "10.0.0.7".parse().unwrap();
        a.seen("s1", ip, Some("a2a-sdk/1.3"), 5);
        let id = peer_id(ip, "s1");
        a.task_created(&id, "t1");
        a.task_created(&id, "t2");
        a.task_created("unknown", "t3");
        a.task_settled("t1");
        let peers = a.peers();
        assert_eq!(peers.len(), 1);
        assert_eq!(
            (peers[0].task_count, peers[0].active_task_ids.clone()),
            (2, vec!["t2".to_owned()])
        );
        assert_eq!(peers[0].label, "a2a-sdk/1.3");
        assert_eq!(a.close_peer(&id), Some(vec!["t2".to_owned()]));
        assert_eq!(a.close_peer("nobody"), None);
    }
}
