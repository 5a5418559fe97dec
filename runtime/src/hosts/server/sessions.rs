//! `a2a:edge/sessions`: turns on the instance's preset backend.

use std::sync::Arc;

use a2a_protocol::execution::{Progress, UNAVAILABLE};
use wasmtime::component::Resource;
use wasmtime_wasi::p2::{DynPollable, subscribe};

use super::bindings::sessions::{Host, HostTurn, TimedEvents, TurnEvent, TurnRequest};
use super::services::{Invocation, Services, View};
use crate::admission::TaskSlot;
use crate::identity::claim_key;
use crate::records::{SHARED_PRINCIPAL, task_key};
use crate::sessions::{Sessions, Toolbox, Turn, TurnInput, history};
use crate::store::Tasks;

/// The sessions capability of one request.
pub struct SessionsCtx {
    /// Live sessions and running turns.
    sessions: Arc<Sessions>,
    /// The store (a context's history is rebuilt from its tasks).
    store: Arc<dyn Tasks>,
    /// The tools and secrets of a turn.
    toolbox: Arc<dyn Toolbox>,
    /// The instance.
    instance_id: String,
    /// Whose turns these are (the runtime's own calls: the shared principal's).
    principal: String,
    /// The skills the caller's key may call (empty: all); checked here too, so no component
    /// gets past it.
    skills: Vec<String>,
    /// Its preset.
    preset: String,
    /// The concurrency slots turns hold (`start-turn-holding`), by the turn's handle.
    held: Vec<(u32, TaskSlot)>,
}

/// The longest note kept on a task, bytes.
const MAX_NOTE_BYTES: usize = 4 << 10;

impl SessionsCtx {
    /// The capability of `call`: turns on its instance's preset.
    pub fn prepare(s: &Services, call: &Invocation) -> SessionsCtx {
        SessionsCtx {
            sessions: s.sessions.clone(),
            store: s.store.clone(),
            toolbox: s.toolbox.clone(),
            instance_id: call.instance.record.id.clone(),
            principal: call
                .caller
                .as_ref()
                .map_or(SHARED_PRINCIPAL, |c| c.principal.as_str())
                .to_owned(),
            skills: call
                .caller
                .as_ref()
                .and_then(|c| Some(c.key.as_ref()?.skills.clone()))
                .unwrap_or_default(),
            preset: call.instance.preset.id.clone(),
            held: Vec::new(),
        }
    }

    /// A turn of `task_id` could not run: the caller is told [`UNAVAILABLE`]; the reason goes to
    /// the log and to the task's note, where the control API and the panel show it.
    fn unavailable(&self, task_id: &str, mut why: String) {
        let shown = crate::telemetry::logging::printable(&why);
        tracing::warn!(instance = %self.instance_id, task = task_id, why = %shown, "the agent is not available");
        if why.len() > MAX_NOTE_BYTES {
            let cut = why.floor_char_boundary(MAX_NOTE_BYTES);
            why.truncate(cut);
        }
        let noted = self
            .store
            .note_task(self.instance_id.clone(), task_id.to_owned(), why);
        // Nothing waits on it. On SQLite it is queued before the component's write of the FAILED
        // task; on PostgreSQL it may land just after, so the task view shows it a moment later.
        tokio::spawn(async move {
            if let Err(e) = noted.await {
                tracing::debug!(error = %e, "the task's note was not kept");
            }
        });
    }
}

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Turn {
    async fn ready(&mut self) {
        Turn::ready(self).await
    }
}

impl Host for View<'_, SessionsCtx> {
    async fn start_turn(
        &mut self,
        req: TurnRequest,
    ) -> wasmtime::Result<Result<Resource<Turn>, String>> {
        let c = &self.ctx;
        let history = if c.sessions.uses_history(&c.preset) {
            let principal = Some(c.principal.as_str());
            history::rebuild(
                &*c.store,
                &c.instance_id,
                &req.context_id,
                principal,
                &req.task_id,
            )
            .await
        } else {
            Vec::new()
        };
        if !c.skills.is_empty() && !c.skills.contains(&req.skill) {
            let why = format!(
                "the caller's API key may not call skill {:?} (it may call {})",
                req.skill,
                c.skills.join(", ")
            );
            c.unavailable(&req.task_id, why);
            return Ok(Err(UNAVAILABLE.into()));
        }
        // Remote agents keep a context per caller: the shared principal's as before principals,
        // any other's apart (keyed as its message ids are, so no context id names another's).
        let context = claim_key(&c.principal, req.context_id.clone());
        let caller = format!("{}/{context}", c.instance_id);
        let input = TurnInput {
            host: c.toolbox.for_turn(&c.preset, caller),
            history,
            instance_id: c.instance_id.clone(),
            context_id: req.context_id,
            principal: c.principal.clone(),
            task_id: req.task_id,
            message_id: req.message_id,
            skill: req.skill,
            prompt: req.prompt,
            message: req.message,
        };
        let task_id = input.task_id.clone();
        match c.sessions.start(&c.preset, input) {
            Ok(turn) => Ok(Ok(self.table.push(turn)?)),
            Err(why) => {
                c.unavailable(&task_id, why);
                Ok(Err(UNAVAILABLE.into()))
            }
        }
    }

    async fn start_turn_holding(
        &mut self,
        req: TurnRequest,
        slot: Resource<TaskSlot>,
    ) -> wasmtime::Result<Result<Resource<Turn>, String>> {
        let slot = self.table.delete(slot)?;
        let started = self.start_turn(req).await?;
        if let Ok(turn) = &started {
            self.ctx.held.push((turn.rep(), slot));
        }
        Ok(started)
    }

    fn cancel_task(&mut self, task_id: String) -> wasmtime::Result<bool> {
        Ok(self
            .ctx
            .sessions
            .cancel_task(&task_key(&self.ctx.instance_id, &task_id)))
    }
}

/// Events one `take` hands over at most.
const MAX_TAKEN: u32 = 64;

impl View<'_, SessionsCtx> {
    /// The turn's next event, if one is ready (an unavailable backend noted for the task).
    fn pull(&mut self, this: &Resource<Turn>) -> wasmtime::Result<Option<TurnEvent>> {
        let turn = self.table.get_mut(this)?;
        let event = turn.try_next();
        if let Some(Progress::Unavailable(why)) = &event {
            self.ctx.unavailable(turn.task_id(), why.clone());
        }
        Ok(event.map(Into::into))
    }
}

impl HostTurn for View<'_, SessionsCtx> {
    fn subscribe(&mut self, this: Resource<Turn>) -> wasmtime::Result<Resource<DynPollable>> {
        subscribe(self.table, this)
    }

    fn next(&mut self, this: Resource<Turn>) -> wasmtime::Result<Option<TurnEvent>> {
        self.pull(&this)
    }

    fn take(&mut self, this: Resource<Turn>, max: u32) -> wasmtime::Result<Vec<TurnEvent>> {
        let mut events = Vec::new();
        for _ in 0..max.clamp(1, MAX_TAKEN) {
            let Some(event) = self.pull(&this)? else {
                break;
            };
            events.push(event);
        }
        Ok(events)
    }

    fn take_timed(&mut self, this: Resource<Turn>, max: u32) -> wasmtime::Result<TimedEvents> {
        let events = self.take(this, max)?;
        Ok(TimedEvents {
            now_ms: crate::clock::now_ms(),
            events,
        })
    }

    fn cancel(&mut self, this: Resource<Turn>) -> wasmtime::Result<()> {
        self.table.get(&this)?.cancel();
        Ok(())
    }

    fn drop(&mut self, this: Resource<Turn>) -> wasmtime::Result<()> {
        self.ctx.held.retain(|(turn, _)| *turn != this.rep());
        self.table.delete(this)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::component::ResourceTable;

    use super::*;
    use crate::sessions::NoHost;
    use crate::sessions::preset::{Backend, Preset};
    use crate::store::memory::MemoryStore;

    fn request(task: &str, prompt: &str) -> TurnRequest {
        TurnRequest {
            context_id: "c".into(),
            task_id: task.into(),
            message_id: prompt.into(),
            skill: "chat".into(),
            prompt: prompt.into(),
            message: "{}".into(),
        }
    }

    /// The capability of instance `i` on `preset`, over sessions of `presets`.
    fn ctx(presets: &[Preset], store: Arc<MemoryStore>, preset: &str) -> SessionsCtx {
        SessionsCtx {
            sessions: Arc::new(Sessions::new(presets, None, &crate::egress::Exit::direct())),
            store,
            toolbox: Arc::new(NoHost),
            instance_id: "i".into(),
            principal: SHARED_PRINCIPAL.into(),
            skills: Vec::new(),
            preset: preset.into(),
            held: Vec::new(),
        }
    }

    /// A turn started holding a concurrency slot frees it when dropped; one that does not start
    /// frees it at once.
    #[tokio::test]
    async fn a_turn_holds_its_slot_until_dropped() {
        let presets = [Preset::builtin("echo", "Echo", "", Backend::Echo)];
        let mut ctx = ctx(&presets, Arc::new(MemoryStore::default()), "echo");
        let mut table = ResourceTable::new();
        let mut view = View {
            ctx: &mut ctx,
            table: &mut table,
        };
        let admission = crate::admission::Admission::default();
        let slot = admission.acquire("i", 1, None, 0).unwrap();
        let slot = view.table.push(slot).unwrap();
        let turn = view
            .start_turn_holding(request("t1", "hello"), slot)
            .await
            .unwrap()
            .expect("the echo preset runs");
        assert_eq!(
            admission.acquire("i", 1, None, 0).err(),
            Some(1),
            "the turn holds it"
        );
        view.drop(turn).unwrap();
        let again = admission
            .acquire("i", 1, None, 0)
            .expect("freed with the turn");
        // A turn refused (a skill the caller may not call) frees its slot at once.
        drop(again);
        view.ctx.skills = vec!["other".into()];
        let slot = view
            .table
            .push(admission.acquire("i", 1, None, 0).unwrap())
            .unwrap();
        assert!(
            view.start_turn_holding(request("t2", "hello"), slot)
                .await
                .unwrap()
                .is_err()
        );
        assert!(
            admission.acquire("i", 1, None, 0).is_ok(),
            "freed on refusal"
        );
    }

    #[tokio::test]
    async fn a_turn_runs_on_the_preset_and_a_task_cancel_stops_it() {
        let scripted = Preset::builtin("scripted", "Scripted", "", Backend::Scripted);
        let presets = [Preset::builtin("echo", "Echo", "", Backend::Echo), scripted];
        let mut ctx = ctx(&presets, Arc::new(MemoryStore::default()), "echo");
        let mut table = ResourceTable::new();
        let mut view = View {
            ctx: &mut ctx,
            table: &mut table,
        };
        let turn = view
            .start_turn(request("t1", "hello"))
            .await
            .unwrap()
            .expect("the echo preset runs");
        let mut events = Vec::new();
        while !matches!(
            events.last(),
            Some(TurnEvent::Completed | TurnEvent::Failed(_))
        ) {
            view.table
                .get_mut(&Resource::<Turn>::new_borrow(turn.rep()))
                .unwrap()
                .ready()
                .await;
            events.extend(view.next(Resource::new_borrow(turn.rep())).unwrap());
        }
        assert!(
            matches!(events.first(), Some(TurnEvent::TextDelta(t)) if t == "hello"),
            "{events:?}"
        );
        // A slow scripted turn, canceled by task id (as CancelTask from another request does).
        view.ctx.preset = "scripted".into();
        let slow = view
            .start_turn(request("t2", "tck-long-running"))
            .await
            .unwrap()
            .unwrap();
        assert!(view.cancel_task("t2".into()).unwrap(), "a turn was running");
        assert!(!view.cancel_task("nope".into()).unwrap());
        let last = loop {
            view.table
                .get_mut(&Resource::<Turn>::new_borrow(slow.rep()))
                .unwrap()
                .ready()
                .await;
            if let Some(e) = view
                .next(Resource::new_borrow(slow.rep()))
                .unwrap()
                .filter(|e| matches!(e, TurnEvent::Failed(_) | TurnEvent::Completed))
            {
                break e;
            }
        };
        assert!(
            matches!(&last, TurnEvent::Failed(why) if why == "canceled"),
            "{last:?}"
        );
    }

    #[tokio::test]
    async fn a_turn_that_cannot_run_tells_the_component_only_that_and_notes_why() {
        let store = Arc::new(MemoryStore::default());
        let mut ctx = ctx(&[], store.clone(), "gone-preset");
        let mut table = ResourceTable::new();
        let mut view = View {
            ctx: &mut ctx,
            table: &mut table,
        };
        let refused = view.start_turn(request("t1", "hello")).await.unwrap();
        assert_eq!(refused.err().as_deref(), Some(UNAVAILABLE));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let noted = loop {
            match store.task_note("i".into(), "t1".into()).await.unwrap() {
                Some(n) => break n,
                None if std::time::Instant::now() < deadline => tokio::task::yield_now().await,
                None => panic!("no note was kept"),
            }
        };
        assert!(noted.contains("gone-preset"), "{noted}");
        assert!(
            matches!(
                TurnEvent::from(Progress::Unavailable("key K at /etc".into())),
                TurnEvent::Failed(said) if said == UNAVAILABLE
            ),
            "the reason never reaches the component"
        );
    }

    #[tokio::test]
    async fn a_key_limited_to_some_skills_runs_no_other_whatever_the_component_asks() {
        let store = Arc::new(MemoryStore::default());
        let echo = [Preset::builtin("echo", "Echo", "", Backend::Echo)];
        let mut ctx = SessionsCtx {
            skills: vec!["summarise".into()],
            ..ctx(&echo, store.clone(), "echo")
        };
        let mut table = ResourceTable::new();
        let mut view = View {
            ctx: &mut ctx,
            table: &mut table,
        };
        let refused = view.start_turn(request("t1", "hello")).await.unwrap();
        assert_eq!(refused.err().as_deref(), Some(UNAVAILABLE), "skill chat");
        let mut allowed = request("t2", "hello");
        allowed.skill = "summarise".into();
        assert!(view.start_turn(allowed).await.unwrap().is_ok());
    }
}
