//! `a2a:edge/sessions`: turns on the instance's preset backend.

use wasmtime::component::Resource;
use wasmtime_wasi::p2::{DynPollable, subscribe};

use super::EdgeView;
use super::bindings::sessions::{Host, HostTurn, ToolCallDelta, TurnEvent, TurnRequest};
use crate::sessions::{self, Turn, TurnInput};

/// The running-turn key of a task of an instance.
pub fn task_key(instance_id: &str, task_id: &str) -> String {
    format!("{instance_id}/{task_id}")
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Turn {
    async fn ready(&mut self) {
        Turn::ready(self).await
    }
}

fn event_to_wit(e: sessions::TurnEvent) -> TurnEvent {
    use sessions::TurnEvent as E;
    match e {
        E::TextDelta(t) => TurnEvent::TextDelta(t),
        E::Reasoning(t) => TurnEvent::Reasoning(t),
        E::ToolCall(id, name, arguments) => TurnEvent::ToolCall(ToolCallDelta { id, name, arguments }),
        E::Artifact(j) => TurnEvent::Artifact(j),
        E::Message(j) => TurnEvent::Message(j),
        E::InputRequired(t) => TurnEvent::InputRequired(t),
        E::AuthRequired(t) => TurnEvent::AuthRequired(t),
        E::Completed => TurnEvent::Completed,
        E::Rejected(t) => TurnEvent::Rejected(t),
        E::Failed(t) => TurnEvent::Failed(t),
    }
}

impl Host for EdgeView<'_> {
    fn start_turn(&mut self, req: TurnRequest) -> wasmtime::Result<Result<Resource<Turn>, String>> {
        let instance = &self.req.instance;
        let history = crate::sessions::history::rebuild(&*self.req.app.store, &instance.record.id, &req.context_id, &req.task_id);
        let host = std::sync::Arc::new(crate::outbound::SessionTools {
            app: self.req.app.clone(),
            preset: instance.preset.id.clone(),
            caller: format!("{}/{}", instance.record.id, req.context_id),
        });
        let input = TurnInput {
            host,
            history,
            instance_id: instance.record.id.clone(),
            context_id: req.context_id,
            task_id: task_key(&instance.record.id, &req.task_id),
            message_id: req.message_id,
            skill: req.skill,
            prompt: req.prompt,
            message: req.message,
        };
        match self.req.app.sessions.start(&instance.preset.id, input) {
            Ok(turn) => Ok(Ok(self.table.push(turn)?)),
            Err(e) => Ok(Err(e)),
        }
    }

    fn cancel_task(&mut self, task_id: String) -> wasmtime::Result<bool> {
        Ok(self.req.app.sessions.cancel_task(&task_key(&self.req.instance.record.id, &task_id)))
    }
}

impl HostTurn for EdgeView<'_> {
    fn subscribe(&mut self, this: Resource<Turn>) -> wasmtime::Result<Resource<DynPollable>> {
        subscribe(self.table, this)
    }

    fn next(&mut self, this: Resource<Turn>) -> wasmtime::Result<Option<TurnEvent>> {
        Ok(self.table.get_mut(&this)?.try_next().map(event_to_wit))
    }

    fn cancel(&mut self, this: Resource<Turn>) -> wasmtime::Result<()> {
        self.table.get(&this)?.cancel();
        Ok(())
    }

    fn drop(&mut self, this: Resource<Turn>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}
