//! Live agent sessions: one per (instance, context id), running turns on the preset's backend
//! and reporting their events through a channel the guest reads via the `turn` resource.

mod command;
mod component;
mod echo;
pub mod groups;
pub mod history;
pub mod openai;
pub mod preset;
mod scripted;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use a2a_protocol::execution::Progress;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use preset::{Backend as Settings, Preset};

/// A tool a turn may call (an outbound remote skill, docs/outbound.md "Outbound connections").
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// The outbound connection it calls (by name).
    pub connection: String,
    /// The remote skill it calls.
    pub skill: String,
    /// What the model reads.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// A tool's answer: its text, or the error to show the model.
pub type ToolResult =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>>;

/// What a backend may ask of the runtime during a turn.
pub trait TurnHost: Send + Sync {
    /// A secret by name (credentials layer, then environment). Stays in the host.
    fn secret(&self, name: &str) -> Option<String>;
    /// The tools this turn may call.
    fn tools(&self) -> Vec<ToolSpec>;
    /// Calls a tool with its JSON arguments; `cancel` aborts it (the remote task is canceled).
    fn call_tool(&self, name: &str, arguments: &str, cancel: CancellationToken) -> ToolResult;
}

/// Where a turn's [`TurnHost`] comes from: the runtime's outbound connections, narrowed to the
/// preset and conversation of the turn.
pub trait Toolbox: Send + Sync {
    /// The services of a turn of `preset`, calling remote agents as `caller`
    /// (`<instance>/<context>`, which keeps each remote conversation apart).
    fn for_turn(&self, preset: &str, caller: String) -> Arc<dyn TurnHost>;
}

/// A host offering no tools and no secrets.
pub struct NoHost;

impl Toolbox for NoHost {
    fn for_turn(&self, _: &str, _: String) -> Arc<dyn TurnHost> {
        Arc::new(NoHost)
    }
}

impl TurnHost for NoHost {
    fn secret(&self, _: &str) -> Option<String> {
        None
    }
    fn tools(&self) -> Vec<ToolSpec> {
        Vec::new()
    }
    fn call_tool(&self, name: &str, _: &str, _: CancellationToken) -> ToolResult {
        let name = name.to_owned();
        Box::pin(async move { Err(format!("no tool {name:?}")) })
    }
}

/// What a turn starts from.
#[derive(Clone)]
pub struct TurnInput {
    /// Instance id.
    pub instance_id: String,
    /// Conversation key.
    pub context_id: String,
    /// Who the turn answers (docs/auth.md "Authentication"): its history is that principal's.
    pub principal: String,
    /// Task id (of the instance).
    pub task_id: String,
    /// Message id.
    pub message_id: String,
    /// Skill.
    pub skill: String,
    /// Rendered prompt.
    pub prompt: String,
    /// The user message (ProtoJSON).
    pub message: String,
    /// The context's earlier conversation, rebuilt from its persisted tasks (empty for a
    /// backend that does not use it).
    pub history: Vec<history::Entry>,
    /// The runtime's services for this turn.
    pub host: Arc<dyn TurnHost>,
}

impl TurnInput {
    /// A turn of `prompt` after `history`, with placeholder ids and no runtime services (unit tests).
    #[cfg(test)]
    pub fn sample(prompt: &str, history: Vec<history::Entry>) -> TurnInput {
        TurnInput {
            instance_id: "i".into(),
            context_id: "c".into(),
            principal: crate::records::SHARED_PRINCIPAL.into(),
            task_id: "t".into(),
            message_id: "m".into(),
            skill: "chat".into(),
            prompt: prompt.into(),
            message: "{}".into(),
            history,
            host: Arc::new(NoHost),
        }
    }
}

/// Sends a turn's events; the receiving side is the guest's `turn` resource.
pub type EventSink = mpsc::UnboundedSender<Progress>;

/// A session backend: runs one turn, sending events and ending with a final one, and stops
/// early when `cancel` fires.
pub trait Backend: Send + Sync {
    /// Runs a turn to its end.
    fn run(&self, input: TurnInput, events: EventSink, cancel: CancellationToken) -> BoxFuture;
    /// Whether its turns read [`TurnInput::history`] (rebuilding it costs a read of the
    /// context's tasks, so it is left empty for backends that do not).
    fn uses_history(&self) -> bool {
        false
    }
}

/// A boxed, sendable turn.
pub type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// What runs agent components (docs/agents.md).
pub trait Agents: Send + Sync {
    /// Runs one turn of `agent`, sending its progress to `events`; its final event. `cancel`
    /// stops it.
    fn turn(
        &self,
        agent: Arc<preset::ComponentSettings>,
        input: TurnInput,
        events: EventSink,
        cancel: CancellationToken,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Progress> + Send>>;
}

/// The most text one coalesced delta carries.
pub const COALESCE_BYTES: usize = 16 << 10;

/// A running turn, as the host hands it to the guest.
pub struct Turn {
    events: mpsc::UnboundedReceiver<Progress>,
    pending: Option<Progress>,
    finished: bool,
    cancel: CancellationToken,
    task_id: String,
}

impl Turn {
    fn new(
        events: mpsc::UnboundedReceiver<Progress>,
        cancel: CancellationToken,
        task_id: String,
    ) -> Turn {
        Turn {
            events,
            pending: None,
            finished: false,
            cancel,
            task_id,
        }
    }

    /// The next event if one is ready. Text deltas that are already queued come as one (up to
    /// [`COALESCE_BYTES`]), so a backend streaming many small pieces costs one crossing per
    /// batch, not per piece. A backend that stopped without a final event reads as failed, once.
    pub fn try_next(&mut self) -> Option<Progress> {
        if self.finished {
            return None;
        }
        let mut event = self.pending.take().or_else(|| self.recv_now())?;
        if let Progress::TextDelta(text) = &mut event {
            while text.len() < COALESCE_BYTES {
                match self.recv_now() {
                    Some(Progress::TextDelta(more)) => text.push_str(&more),
                    other => {
                        self.pending = other;
                        break;
                    }
                }
            }
        }
        self.finished = event.is_final();
        Some(event)
    }

    fn recv_now(&mut self) -> Option<Progress> {
        match self.events.try_recv() {
            Ok(e) => Some(e),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => Some(ended()),
        }
    }

    /// Waits until an event is ready or the turn is over (cancel-safe).
    pub async fn ready(&mut self) {
        if self.pending.is_some() || self.finished {
            return;
        }
        match self.events.recv().await {
            Some(e) => self.pending = Some(e),
            None => self.pending = Some(ended()),
        }
    }

    /// The task the turn runs (an id of its instance).
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// Asks the backend to stop.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }
}

/// The event of a backend that stopped without a final one.
fn ended() -> Progress {
    Progress::Unavailable("the session ended without an answer".into())
}

/// A turn its reader dropped before its final event (the request ended: a store write failed,
/// the task settled elsewhere, the component trapped) is canceled: nothing would read what it
/// does, and a command turn's process group must not outlive it.
impl Drop for Turn {
    fn drop(&mut self) {
        if !self.finished {
            self.cancel.cancel();
        }
    }
}

/// The live session of one (instance, context).
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// Preset it runs on.
    pub preset: String,
    /// First turn, ms.
    pub first_seen: u64,
    /// Latest turn, ms.
    pub last_seen: u64,
    /// Turns started.
    pub turns: u64,
}

/// The backend a preset names, with its settings.
fn backend(
    preset: &Preset,
    groups: &Arc<groups::Groups>,
    exit: &crate::egress::Exit,
    agents: &Arc<OnceLock<Arc<dyn Agents>>>,
) -> Arc<dyn Backend> {
    match &preset.backend {
        Settings::Echo => Arc::new(echo::Echo),
        Settings::Scripted => Arc::new(scripted::Scripted),
        Settings::Command(c) => Arc::new(command::Command {
            argv: c.command.clone(),
            working_dir: c.working_dir.clone(),
            timeout: std::time::Duration::from_millis(c.timeout_ms.unwrap_or(300_000)),
            groups: groups.clone(),
        }),
        Settings::OpenAi(o) => Arc::new(openai::OpenAi::new(o, exit)),
        Settings::Component(c) => Arc::new(component::Component::new(c, agents.clone())),
    }
}

/// Live agent sessions (one per instance and context): what the panel and the snapshot count.
/// An evicted context's next turn starts a fresh session on its stored history, as after a
/// restart.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SessionSettings {
    /// A session with no turn for this long is evicted, seconds.
    pub idle_secs: u64,
    /// Most live sessions: past it the longest idle ones are evicted.
    pub max_live: usize,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            idle_secs: 600,
            max_live: 10_000,
        }
    }
}

/// Every live session and running turn.
pub struct Sessions {
    backends: RwLock<HashMap<String, Arc<dyn Backend>>>,
    exit: crate::egress::Exit,
    groups: Arc<groups::Groups>,
    live: Mutex<HashMap<(String, String), SessionInfo>>,
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
    limits: SessionSettings,
    agents: Arc<OnceLock<Arc<dyn Agents>>>,
}

impl Sessions {
    /// Sessions over the given presets; command turns record their process groups under
    /// `run_dir` (see [`groups`]); model requests leave through `exit`.
    pub fn new(
        presets: &[Preset],
        run_dir: Option<std::path::PathBuf>,
        exit: &crate::egress::Exit,
    ) -> Sessions {
        let sessions = Sessions {
            backends: RwLock::default(),
            exit: exit.clone(),
            groups: Arc::new(groups::Groups::new(run_dir)),
            live: Mutex::default(),
            running: Arc::default(),
            limits: SessionSettings::default(),
            agents: Arc::default(),
        };
        sessions.set_presets(presets);
        sessions
    }

    /// Runs new turns on the backends of `presets`; turns already running keep theirs.
    pub fn set_presets(&self, presets: &[Preset]) {
        let backends = presets
            .iter()
            .map(|p| {
                let b = backend(p, &self.groups, &self.exit, &self.agents);
                (p.id.clone(), b)
            })
            .collect();
        *self.backends.write().unwrap() = backends;
    }

    /// Runs the presets' agent components on `agents` (set once, at start).
    pub fn run_agents_on(&self, agents: Arc<dyn Agents>) {
        let _ = self.agents.set(agents);
    }

    /// These sessions, evicted by `limits`.
    pub fn limited(self, limits: SessionSettings) -> Sessions {
        Sessions { limits, ..self }
    }

    /// Evicts the sessions idle for longer than `idleSecs` at `now` (ms), then the longest
    /// idle ones past `maxLive`; how many went.
    pub fn evict(&self, now: u64) -> usize {
        self.evict_to(now, self.limits.max_live)
    }

    /// [`Sessions::evict`] down to `cap` sessions.
    fn evict_to(&self, now: u64, cap: usize) -> usize {
        let cap = cap.max(1);
        let mut live = self.live.lock().unwrap();
        let before = live.len();
        let idle_ms = self.limits.idle_secs.saturating_mul(1000);
        live.retain(|_, s| now.saturating_sub(s.last_seen) < idle_ms);
        if live.len() > cap {
            let mut seen: Vec<u64> = live.values().map(|s| s.last_seen).collect();
            let cut = live.len() - cap;
            let (_, oldest_kept, _) = seen.select_nth_unstable(cut);
            let oldest_kept = *oldest_kept;
            live.retain(|_, s| s.last_seen >= oldest_kept);
            // Ties at the cut: drop any still over the cap.
            let over = live.len().saturating_sub(cap);
            let ties: Vec<_> = live
                .iter()
                .filter(|(_, s)| s.last_seen == oldest_kept)
                .map(|(k, _)| k.clone())
                .take(over)
                .collect();
            for k in ties {
                live.remove(&k);
            }
        }
        before - live.len()
    }

    /// Evicts idle sessions every minute (and at the cap on every new one) until `stop`.
    pub async fn sweep(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
            }
            let gone = self.evict(crate::clock::now_ms());
            if gone > 0 {
                tracing::debug!(sessions = gone, "evicted idle sessions");
            }
        }
    }

    /// Kills the process groups of every command turn still running (at shutdown); how many.
    pub fn kill_processes(&self) -> usize {
        self.groups.kill_all()
    }

    /// Whether turns of `preset` read the context's history.
    pub fn uses_history(&self, preset: &str) -> bool {
        let backends = self.backends.read().unwrap();
        backends.get(preset).is_some_and(|b| b.uses_history())
    }

    /// Starts a turn on `preset`'s backend.
    pub fn start(&self, preset: &str, input: TurnInput) -> Result<Turn, String> {
        let backend = self
            .backends
            .read()
            .unwrap()
            .get(preset)
            .cloned()
            .ok_or_else(|| format!("preset {preset:?} does not exist"))?;
        let now = crate::clock::now_ms();
        let mut live = self.live.lock().unwrap();
        live.entry((input.instance_id.clone(), input.context_id.clone()))
            .and_modify(|s| {
                s.last_seen = now;
                s.turns += 1;
            })
            .or_insert(SessionInfo {
                preset: preset.to_owned(),
                first_seen: now,
                last_seen: now,
                turns: 1,
            });
        let over = live.len() > self.limits.max_live;
        drop(live);
        if over {
            // Down to nine tenths of the cap, so a burst of new contexts scans the table
            // once per tenth, not once each.
            self.evict_to(now, self.limits.max_live - self.limits.max_live / 10);
        }
        let cancel = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let task_id = crate::records::task_key(&input.instance_id, &input.task_id);
        let reported = input.task_id.clone();
        self.running
            .lock()
            .unwrap()
            .insert(task_id.clone(), cancel.clone());
        let span = tracing::info_span!(
            "session",
            otel.name = "turn",
            a2a_edge.preset = preset,
            a2a.task.id = input.task_id.as_str(),
            a2a.context.id = input.context_id.as_str(),
        );
        let mut run = backend.run(input, tx, cancel.clone()).instrument(span);
        // A backend with its answer at hand (echo, most scripted behaviours) is done after one
        // poll, before the component first asks: no task spawned, no wait in the component.
        let mut first = std::task::Context::from_waker(std::task::Waker::noop());
        if std::pin::Pin::new(&mut run).poll(&mut first).is_ready() {
            self.running.lock().unwrap().remove(&task_id);
        } else {
            let running = self.running.clone();
            tokio::spawn(async move {
                run.await;
                running.lock().unwrap().remove(&task_id);
            });
        }
        Ok(Turn::new(rx, cancel, reported))
    }

    /// Cancels a task's running turn; true if one ran.
    pub fn cancel_task(&self, task_id: &str) -> bool {
        self.running
            .lock()
            .unwrap()
            .get(task_id)
            .map(|c| c.cancel())
            .is_some()
    }

    /// The task keys (`instance/task`) with a running turn.
    pub fn running_tasks(&self) -> Vec<String> {
        self.running.lock().unwrap().keys().cloned().collect()
    }

    /// Whether a task has a running turn.
    pub fn is_running(&self, task_id: &str) -> bool {
        self.running.lock().unwrap().contains_key(task_id)
    }

    /// Whether (instance, context) has a live session.
    pub fn is_live(&self, instance_id: &str, context_id: &str) -> bool {
        self.live
            .lock()
            .unwrap()
            .contains_key(&(instance_id.to_owned(), context_id.to_owned()))
    }

    /// Releases the live sessions of a context (on one instance, or on all); returns how many.
    /// The next message on it starts a fresh session (with history rebuilt from its tasks).
    pub fn close(&self, instance_id: Option<&str>, context_id: &str) -> usize {
        let mut live = self.live.lock().unwrap();
        let before = live.len();
        live.retain(|(i, c), _| !(c == context_id && instance_id.is_none_or(|want| want == i)));
        before - live.len()
    }

    /// How many sessions are live.
    pub fn live_count(&self) -> usize {
        self.live.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queued_text_deltas_come_as_one_in_order() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut turn = Turn::new(rx, CancellationToken::new(), "t".into());
        for w in ["a ", "b ", "c"] {
            tx.send(Progress::TextDelta(w.into())).unwrap();
        }
        tx.send(Progress::Reasoning("r".into())).unwrap();
        tx.send(Progress::TextDelta("d".into())).unwrap();
        tx.send(Progress::Completed).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| turn.try_next()).collect();
        assert_eq!(
            got,
            [
                Progress::TextDelta("a b c".into()),
                Progress::Reasoning("r".into()),
                Progress::TextDelta("d".into()),
                Progress::Completed
            ]
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let mut turn = Turn::new(rx, CancellationToken::new(), "t".into());
        let piece = "x".repeat(1000);
        for _ in 0..40 {
            tx.send(Progress::TextDelta(piece.clone())).unwrap();
        }
        let Progress::TextDelta(first) = turn.try_next().unwrap() else {
            panic!()
        };
        assert!(
            first.len() >= COALESCE_BYTES && first.len() < COALESCE_BYTES + 1000,
            "bounded: {}",
            first.len()
        );
    }

    #[test]
    fn a_turn_dropped_before_its_end_is_canceled() {
        let (tx, rx) = mpsc::unbounded_channel();
        let turn = Turn::new(rx, CancellationToken::new(), "t".into());
        let cancel = turn.cancel.clone();
        drop(turn);
        assert!(cancel.is_cancelled(), "nobody reads it any more");
        let (tx2, rx2) = mpsc::unbounded_channel();
        let mut ended = Turn::new(rx2, CancellationToken::new(), "t".into());
        tx2.send(Progress::Completed).unwrap();
        assert_eq!(ended.try_next(), Some(Progress::Completed));
        let cancel = ended.cancel.clone();
        drop(ended);
        assert!(
            !cancel.is_cancelled(),
            "a turn read to its end is left alone"
        );
        drop(tx);
    }

    #[tokio::test]
    async fn idle_sessions_are_evicted_and_the_live_table_is_capped() {
        let echo = Preset::builtin("echo", "Echo", "", preset::Backend::Echo);
        let sessions =
            Sessions::new(&[echo], None, &crate::egress::Exit::direct()).limited(SessionSettings {
                idle_secs: 600,
                max_live: 100,
            });
        for n in 0..1000 {
            let mut input = TurnInput::sample("hi", Vec::new());
            input.context_id = format!("c{n}");
            drop(sessions.start("echo", input).unwrap());
        }
        assert!(
            (90..=100).contains(&sessions.live_count()),
            "held at the cap: {}",
            sessions.live_count()
        );
        assert!(sessions.is_live("i", "c999"), "the newest stay");
        assert!(!sessions.is_live("i", "c0"), "the oldest went");
        let later = crate::clock::now_ms() + 601_000;
        let left = sessions.live_count();
        assert_eq!(sessions.evict(later), left);
        assert_eq!(sessions.live_count(), 0, "idle past idleSecs");
        let none = Sessions::new(
            &[Preset::builtin("echo", "Echo", "", preset::Backend::Echo)],
            None,
            &crate::egress::Exit::direct(),
        )
        .limited(SessionSettings {
            idle_secs: 600,
            max_live: 0,
        });
        for n in 0..3 {
            let mut input = TurnInput::sample("hi", Vec::new());
            input.context_id = format!("z{n}");
            drop(none.start("echo", input).unwrap());
        }
        assert_eq!(
            none.live_count(),
            1,
            "a cap of 0 keeps the newest, never panics"
        );
    }
}
