//! The host's part of a stream a component handed off (`events.hand-off`): when the
//! component's SSE body ends, the host writes the rest — the subscription's frames, keep-alives,
//! the settled snapshot — so an idle subscriber holds a tokio task and a channel, never a
//! component instance from the pool.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use a2a_protocol::sse::{self, Envelope};
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame};
use tokio::sync::mpsc;

use crate::events::Subscription;
use crate::responses::Body;
use crate::store::Tasks;

/// What the host needs to go on with a stream.
pub struct Continuation {
    /// The task's log, at the point the component stopped reading.
    pub sub: Subscription,
    /// How the events are framed.
    pub envelope: Envelope,
    /// The task, and the instance it belongs to (for the settled snapshot).
    pub task_id: String,
    /// The instance.
    pub instance_id: String,
    /// Keep-alive interval.
    pub keep_alive: Duration,
}

/// Where a component leaves its [`Continuation`] during a request.
pub type Slot = Arc<Mutex<Option<Continuation>>>;

/// A response body: the component's, then, if it handed off, the host's.
pub fn chain(guest: Body, slot: Slot, store: Arc<dyn Tasks>) -> Body {
    Chained {
        guest: Some(guest),
        slot,
        store,
        host: None,
    }
    .boxed_unsync()
}

struct Chained {
    guest: Option<Body>,
    slot: Slot,
    store: Arc<dyn Tasks>,
    host: Option<mpsc::Receiver<Bytes>>,
}

impl HttpBody for Chained {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(guest) = self.guest.as_mut() {
            match std::task::ready!(Pin::new(guest).poll_frame(cx)) {
                Some(frame) => return Poll::Ready(Some(frame)),
                None => {
                    self.guest = None;
                    let handed = self.slot.lock().unwrap().take();
                    if let Some(cont) = handed {
                        let (tx, rx) = mpsc::channel(16);
                        tokio::spawn(produce(cont, self.store.clone(), tx));
                        self.host = Some(rx);
                    }
                }
            }
        }
        let Some(host) = self.host.as_mut() else {
            return Poll::Ready(None);
        };
        Poll::Ready(std::task::ready!(host.poll_recv(cx)).map(|b| Ok(Frame::data(b))))
    }
}

/// Writes the rest of the stream until the log closes (then the settled snapshot) or the client
/// goes away.
async fn produce(mut c: Continuation, store: Arc<dyn Tasks>, tx: mpsc::Sender<Bytes>) {
    let send = |text: String| {
        let tx = tx.clone();
        async move { tx.send(Bytes::from(text)).await.is_ok() }
    };
    loop {
        while let Some(f) = c.sub.try_next() {
            if !send(sse::result_event(
                Some(f.seq),
                &c.envelope,
                f.kind.name(),
                &f.json,
            ))
            .await
            {
                return;
            }
        }
        if c.sub.is_closed() {
            break;
        }
        tokio::select! {
            _ = c.sub.ready() => {}
            _ = tokio::time::sleep(c.keep_alive) => {
                if !send(sse::KEEP_ALIVE.to_owned()).await {
                    return;
                }
            }
            _ = tx.closed() => return,
        }
    }
    if !c.envelope.ends_with_snapshot() {
        return;
    }
    if let Ok(Some(row)) = store
        .get_task(c.task_id.clone(), Some(c.instance_id.clone()))
        .await
    {
        send(sse::result_event(
            None,
            &c.envelope,
            sse::Member::Task.name(),
            &row.body,
        ))
        .await;
    }
}
