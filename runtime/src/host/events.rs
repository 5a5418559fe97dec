//! `a2a:edge/events`: the frame log, keyed by instance and task so an instance never reads or
//! writes another's logs.

use wasmtime::component::Resource;
use wasmtime_wasi::p2::{DynPollable, subscribe};

use super::EdgeView;
use super::bindings::events::{Frame, FrameKind, Host, HostSubscription};
use crate::events::{self as hub, Subscription};
use crate::store::Store;

/// The hub key of a task of an instance.
pub fn log_key(instance_id: &str, task_id: &str) -> String {
    format!("{instance_id}/{task_id}")
}

fn kind_from_wit(k: FrameKind) -> hub::FrameKind {
    match k {
        FrameKind::Task => hub::FrameKind::Task,
        FrameKind::Message => hub::FrameKind::Message,
        FrameKind::StatusUpdate => hub::FrameKind::StatusUpdate,
        FrameKind::ArtifactUpdate => hub::FrameKind::ArtifactUpdate,
    }
}

fn kind_to_wit(k: hub::FrameKind) -> FrameKind {
    match k {
        hub::FrameKind::Task => FrameKind::Task,
        hub::FrameKind::Message => FrameKind::Message,
        hub::FrameKind::StatusUpdate => FrameKind::StatusUpdate,
        hub::FrameKind::ArtifactUpdate => FrameKind::ArtifactUpdate,
    }
}

impl EdgeView<'_> {
    fn key(&self, task_id: &str) -> String {
        log_key(&self.req.instance.record.id, task_id)
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Subscription {
    async fn ready(&mut self) {
        Subscription::ready(self).await
    }
}

impl Host for EdgeView<'_> {
    fn publish(&mut self, task_id: String, kind: FrameKind, json: String) -> wasmtime::Result<u64> {
        Ok(self.req.app.events.publish(&self.key(&task_id), kind_from_wit(kind), json))
    }

    fn close(&mut self, task_id: String) -> wasmtime::Result<()> {
        self.req.app.events.close(&self.key(&task_id));
        Ok(())
    }

    fn open(&mut self, task_id: String, after: Option<u64>) -> wasmtime::Result<Result<Resource<Subscription>, String>> {
        if self.req.app.store.get_task(&task_id, Some(&self.req.instance.record.id)).ok().flatten().is_none() {
            return Ok(Err(format!("task {task_id} not found")));
        }
        let sub = self.req.app.events.subscribe(&self.key(&task_id), after);
        Ok(Ok(self.table.push(sub)?))
    }

    fn hand_off(&mut self, sub: Resource<Subscription>, request_id: String) -> wasmtime::Result<()> {
        let sub = self.table.delete(sub)?;
        let instance = &self.req.instance.record;
        let task_id = sub.key().strip_prefix(&format!("{}/", instance.id)).unwrap_or_default().to_owned();
        let request_id = serde_json::from_str(&request_id).unwrap_or(serde_json::Value::Null);
        let keep_alive = std::time::Duration::from_millis(instance.limits.keep_alive_ms.max(100));
        *self.req.hand_off.lock().unwrap() = Some(super::handoff::Continuation { sub, request_id, task_id, instance_id: instance.id.clone(), keep_alive });
        Ok(())
    }
}

impl HostSubscription for EdgeView<'_> {
    fn subscribe(&mut self, this: Resource<Subscription>) -> wasmtime::Result<Resource<DynPollable>> {
        subscribe(self.table, this)
    }

    fn try_next(&mut self, this: Resource<Subscription>) -> wasmtime::Result<Option<Frame>> {
        Ok(self.table.get_mut(&this)?.try_next().map(|f| Frame { seq: f.seq, kind: kind_to_wit(f.kind), json: f.json.to_string() }))
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
