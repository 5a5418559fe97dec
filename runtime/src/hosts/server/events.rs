//! `a2a:edge/events`: the frame logs, keyed by instance and task so an instance never reads or
//! writes another's logs, and the hand-off of a stream's rest to the host.

use std::sync::Arc;
use std::time::Duration;

use a2a_protocol::sse::Envelope;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::{DynPollable, subscribe};

use super::bindings::events::{Frame, Host, HostSubscription};
use super::bindings::types::{FrameKind, StoreError};
use super::handoff;
use super::owner::Owner;
use super::services::{Books, Invocation, Services, View};
use crate::events::{EventHub, Subscription};
use crate::records::task_key;
use crate::store::{self, FrameLog};

/// The events capability of one request.
pub struct EventsCtx {
    /// Every live task's log.
    hub: Arc<EventHub>,
    /// The store (a log is opened only for a task of the instance).
    store: Arc<dyn FrameLog>,
    /// The instance.
    instance_id: String,
    /// The tasks the request reaches (a log is opened only for one of them).
    owner: Owner,
    /// Keep-alive interval of a handed-off stream.
    keep_alive: Duration,
    /// Where a handed-off stream waits for the host.
    hand_off: handoff::Slot,
}

impl EventsCtx {
    /// The capability of `call`, handing streams off through `books`.
    pub fn prepare(s: &Services, call: &Invocation, books: &Books) -> EventsCtx {
        let limits = &call.instance.record.limits;
        EventsCtx {
            hub: s.events.clone(),
            store: s.store.clone(),
            instance_id: call.instance.record.id.clone(),
            owner: Owner::of(s, call),
            keep_alive: Duration::from_millis(limits.keep_alive_ms.max(100)),
            hand_off: books.hand_off.clone(),
        }
    }

    fn key(&self, task_id: &str) -> String {
        task_key(&self.instance_id, task_id)
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Subscription {
    async fn ready(&mut self) {
        Subscription::ready(self).await
    }
}

impl Host for View<'_, EventsCtx> {
    async fn publish(
        &mut self,
        task_id: String,
        kind: FrameKind,
        json: String,
    ) -> wasmtime::Result<Result<u64, StoreError>> {
        let frame = store::NewFrame {
            kind: kind.into(),
            json,
        };
        let c = &self.ctx;
        let first = c
            .store
            .append_frames(c.instance_id.clone(), task_id.clone(), vec![frame.clone()])
            .await;
        Ok(match first {
            Ok(seq) => {
                c.hub
                    .committed(&c.key(&task_id), store::numbered(seq, vec![frame]));
                Ok(seq)
            }
            Err(e) => Err(e.into()),
        })
    }

    fn close(&mut self, task_id: String) -> wasmtime::Result<()> {
        self.ctx.hub.close(&self.ctx.key(&task_id));
        Ok(())
    }

    async fn open(
        &mut self,
        task_id: String,
        after: Option<u64>,
    ) -> wasmtime::Result<Result<Resource<Subscription>, String>> {
        let c = &self.ctx;
        if c.owner.owns(&task_id).await.is_err() {
            return Ok(Err(format!("task {task_id} not found")));
        }
        let opened = c
            .hub
            .open(c.store.clone(), &c.instance_id, &task_id, after)
            .await;
        match opened {
            Ok(sub) => Ok(Ok(self.table.push(sub)?)),
            Err(store::StoreError::NotFound) => Ok(Err(format!("task {task_id} not found"))),
            Err(e) => Ok(Err(format!(
                "the log of task {task_id} cannot be read: {e}"
            ))),
        }
    }

    fn hand_off(
        &mut self,
        sub: Resource<Subscription>,
        request_id: Option<String>,
        v03: bool,
    ) -> wasmtime::Result<()> {
        let sub = self.table.delete(sub)?;
        let c = &self.ctx;
        let task_id = sub.task_id().to_owned();
        let id = |id: String| serde_json::from_str(&id).unwrap_or(serde_json::Value::Null);
        let envelope = Envelope {
            rpc_id: request_id.map(id),
            v03,
        };
        *c.hand_off.lock().unwrap() = Some(handoff::Continuation {
            sub,
            envelope,
            task_id,
            instance_id: c.instance_id.clone(),
            keep_alive: c.keep_alive,
        });
        Ok(())
    }
}

impl HostSubscription for View<'_, EventsCtx> {
    fn subscribe(
        &mut self,
        this: Resource<Subscription>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        subscribe(self.table, this)
    }

    fn try_next(&mut self, this: Resource<Subscription>) -> wasmtime::Result<Option<Frame>> {
        Ok(self.table.get_mut(&this)?.try_next().map(|f| Frame {
            seq: f.seq,
            kind: f.kind.into(),
            json: f.json.to_string(),
        }))
    }

    fn is_closed(&mut self, this: Resource<Subscription>) -> wasmtime::Result<bool> {
        Ok(self.table.get(&this)?.is_closed())
    }

    fn lagged(&mut self, this: Resource<Subscription>) -> wasmtime::Result<bool> {
        Ok(self.table.get(&this)?.lagged())
    }

    fn head(&mut self, this: Resource<Subscription>) -> wasmtime::Result<u64> {
        Ok(self.table.get(&this)?.head())
    }

    fn drop(&mut self, this: Resource<Subscription>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Store;
    use wasmtime::component::ResourceTable;

    use super::*;
    use crate::store::memory::MemoryStore;

    #[tokio::test]
    async fn logs_replay_from_a_sequence_and_stay_within_the_instance() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        store
            .create_task(crate::store::contract::row("t", 1), None, None)
            .await
            .unwrap();
        let hub = Arc::new(EventHub::default());
        let ctx = |instance: &str| EventsCtx {
            hub: hub.clone(),
            store: store.clone(),
            instance_id: instance.into(),
            owner: Owner::new(store.clone(), instance, None),
            keep_alive: Duration::from_secs(1),
            hand_off: Default::default(),
        };
        let (mut mine, mut theirs) = (ctx("i"), ctx("j"));
        let mut table = ResourceTable::new();
        let mut view = View {
            ctx: &mut mine,
            table: &mut table,
        };
        for n in 1..=3 {
            let seq = view
                .publish(
                    "t".into(),
                    FrameKind::StatusUpdate,
                    format!("{{\"n\":{n}}}"),
                )
                .await
                .unwrap();
            assert!(matches!(seq, Ok(s) if s == n), "{seq:?}");
        }
        let sub = view
            .open("t".into(), Some(1))
            .await
            .unwrap()
            .expect("the instance's own task");
        let next = view
            .try_next(Resource::new_borrow(sub.rep()))
            .unwrap()
            .unwrap();
        assert_eq!(
            (next.seq, next.kind, next.json.as_str()),
            (2, FrameKind::StatusUpdate, "{\"n\":2}"),
            "replay starts after the given sequence"
        );
        assert_eq!(view.head(Resource::new_borrow(sub.rep())).unwrap(), 3);
        let mut done = crate::store::contract::row("t", 2);
        done.state = a2a_protocol::TaskState::Completed;
        store.update_task(done, 1, None, vec![]).await.unwrap();
        view.close("t".into()).unwrap();
        while view
            .try_next(Resource::new_borrow(sub.rep()))
            .unwrap()
            .is_some()
        {}
        view.table.get_mut(&sub).unwrap().ready().await;
        assert!(view.is_closed(Resource::new_borrow(sub.rep())).unwrap());
        let mut other = View {
            ctx: &mut theirs,
            table: &mut table,
        };
        assert_eq!(
            other.open("t".into(), None).await.unwrap().err().as_deref(),
            Some("task t not found"),
            "another instance cannot open the log"
        );
    }
}
