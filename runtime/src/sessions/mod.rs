//! Live agent sessions: one per (instance, context id), running turns on the preset's backend
//! and reporting their events through a channel the guest reads via the `turn` resource.

mod command;
mod echo;
pub mod groups;
pub mod history;
mod openai;
mod scripted;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Preset;

/// Names of the session backends this runtime has.
pub const BACKENDS: &[&str] = &["echo", "scripted", "command", "openai"];

/// What a turn reports (mirrors `a2a:edge/sessions.turn-event`).
#[derive(Clone, Debug, PartialEq)]
pub enum TurnEvent {
    /// Assistant text to append.
    TextDelta(String),
    /// Reasoning (not projected).
    Reasoning(String),
    /// A tool-call delta: id, name, arguments delta.
    ToolCall(String, String, String),
    /// A whole artifact (ProtoJSON).
    Artifact(String),
    /// A direct message answer (ProtoJSON).
    Message(String),
    /// Needs input.
    InputRequired(String),
    /// Needs authentication.
    AuthRequired(String),
    /// Done.
    Completed,
    /// The backend rejects the task.
    Rejected(String),
    /// Failed.
    Failed(String),
}

impl TurnEvent {
    /// Whether this event ends the turn.
    pub fn is_final(&self) -> bool {
        !matches!(self, Self::TextDelta(_) | Self::Reasoning(_) | Self::ToolCall(..) | Self::Artifact(_))
    }
}

/// A tool a turn may call (an outbound remote skill, SPEC §7).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What the model reads.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
}

/// A tool's answer: its text, or the error to show the model.
pub type ToolResult = std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send>>;

/// What a backend may ask of the runtime during a turn.
pub trait TurnHost: Send + Sync {
    /// A secret by name (credentials layer, then environment). Stays in the host.
    fn secret(&self, name: &str) -> Option<String>;
    /// The tools this turn may call.
    fn tools(&self) -> Vec<ToolSpec>;
    /// Calls a tool with its JSON arguments; `cancel` aborts it (the remote task is canceled).
    fn call_tool(&self, name: &str, arguments: &str, cancel: CancellationToken) -> ToolResult;
}

/// A host offering no tools and no secrets.
pub struct NoHost;

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
    /// Task id.
    pub task_id: String,
    /// Message id.
    pub message_id: String,
    /// Skill.
    pub skill: String,
    /// Rendered prompt.
    pub prompt: String,
    /// The user message (ProtoJSON).
    pub message: String,
    /// The context's earlier conversation, rebuilt from its persisted tasks.
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
pub type EventSink = mpsc::UnboundedSender<TurnEvent>;

/// A session backend: runs one turn, sending events and ending with a final one, and stops
/// early when `cancel` fires.
pub trait Backend: Send + Sync {
    /// Runs a turn to its end.
    fn run(&self, input: TurnInput, events: EventSink, cancel: CancellationToken) -> BoxFuture;
}

/// A boxed, sendable turn.
pub type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The most text one coalesced delta carries.
pub const COALESCE_BYTES: usize = 16 << 10;

/// A running turn, as the host hands it to the guest.
pub struct Turn {
    events: mpsc::UnboundedReceiver<TurnEvent>,
    pending: Option<TurnEvent>,
    finished: bool,
    cancel: CancellationToken,
}

impl Turn {
    /// The next event if one is ready. Text deltas that are already queued come as one (up to
    /// [`COALESCE_BYTES`]), so a backend streaming many small pieces costs one crossing per
    /// batch, not per piece. A backend that stopped without a final event reads as failed, once.
    pub fn try_next(&mut self) -> Option<TurnEvent> {
        if self.finished {
            return None;
        }
        let mut event = self.pending.take().or_else(|| self.recv_now())?;
        if let TurnEvent::TextDelta(text) = &mut event {
            while text.len() < COALESCE_BYTES {
                match self.recv_now() {
                    Some(TurnEvent::TextDelta(more)) => text.push_str(&more),
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

    fn recv_now(&mut self) -> Option<TurnEvent> {
        match self.events.try_recv() {
            Ok(e) => Some(e),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => Some(TurnEvent::Failed("the session ended without an answer".into())),
        }
    }

    /// Waits until an event is ready or the turn is over (cancel-safe).
    pub async fn ready(&mut self) {
        if self.pending.is_some() || self.finished {
            return;
        }
        match self.events.recv().await {
            Some(e) => self.pending = Some(e),
            None => self.pending = Some(TurnEvent::Failed("the session ended without an answer".into())),
        }
    }

    /// Asks the backend to stop.
    pub fn cancel(&self) {
        self.cancel.cancel();
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

/// The backend a preset names (one of [`BACKENDS`]), with its settings.
fn backend(preset: &Preset, groups: &Arc<groups::Groups>) -> Option<Arc<dyn Backend>> {
    match preset.backend.as_str() {
        "echo" => Some(Arc::new(echo::Echo)),
        "scripted" => Some(Arc::new(scripted::Scripted)),
        "command" if !preset.command.is_empty() => Some(Arc::new(command::Command {
            argv: preset.command.clone(),
            working_dir: preset.working_dir.clone(),
            timeout: std::time::Duration::from_millis(preset.timeout_ms.unwrap_or(300_000)),
            groups: groups.clone(),
        })),
        "openai" => Some(Arc::new(openai::OpenAi::new(preset))),
        _ => None,
    }
}

/// Every live session and running turn.
pub struct Sessions {
    backends: HashMap<String, Arc<dyn Backend>>,
    groups: Arc<groups::Groups>,
    live: Mutex<HashMap<(String, String), SessionInfo>>,
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

impl Sessions {
    /// Sessions over the given presets; command turns record their process groups under
    /// `run_dir` (see [`groups`]).
    pub fn new(presets: &[Preset], run_dir: Option<std::path::PathBuf>) -> Sessions {
        let groups = Arc::new(groups::Groups::new(run_dir));
        let backends = presets.iter().filter_map(|p| Some((p.id.clone(), backend(p, &groups)?))).collect();
        Sessions { backends, groups, live: Mutex::default(), running: Arc::default() }
    }

    /// Kills the process groups of every command turn still running (at shutdown); how many.
    pub fn kill_processes(&self) -> usize {
        self.groups.kill_all()
    }

    /// Starts a turn on `preset`'s backend.
    pub fn start(&self, preset: &str, input: TurnInput) -> Result<Turn, String> {
        let backend = self.backends.get(preset).cloned().ok_or_else(|| format!("preset {preset:?} does not exist"))?;
        let now = crate::tasks::now_ms();
        self.live
            .lock()
            .unwrap()
            .entry((input.instance_id.clone(), input.context_id.clone()))
            .and_modify(|s| {
                s.last_seen = now;
                s.turns += 1;
            })
            .or_insert(SessionInfo { preset: preset.to_owned(), first_seen: now, last_seen: now, turns: 1 });
        let cancel = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let task_id = input.task_id.clone();
        self.running.lock().unwrap().insert(task_id.clone(), cancel.clone());
        let running = self.running.clone();
        let run = backend.run(input, tx, cancel.clone());
        tokio::spawn(async move {
            run.await;
            running.lock().unwrap().remove(&task_id);
        });
        Ok(Turn { events: rx, pending: None, finished: false, cancel })
    }

    /// Cancels a task's running turn; true if one ran.
    pub fn cancel_task(&self, task_id: &str) -> bool {
        self.running.lock().unwrap().get(task_id).map(|c| c.cancel()).is_some()
    }

    /// Whether a task has a running turn.
    pub fn is_running(&self, task_id: &str) -> bool {
        self.running.lock().unwrap().contains_key(task_id)
    }

    /// Whether (instance, context) has a live session.
    pub fn is_live(&self, instance_id: &str, context_id: &str) -> bool {
        self.live.lock().unwrap().contains_key(&(instance_id.to_owned(), context_id.to_owned()))
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
        let mut turn = Turn { events: rx, pending: None, finished: false, cancel: CancellationToken::new() };
        for w in ["a ", "b ", "c"] {
            tx.send(TurnEvent::TextDelta(w.into())).unwrap();
        }
        tx.send(TurnEvent::Reasoning("r".into())).unwrap();
        tx.send(TurnEvent::TextDelta("d".into())).unwrap();
        tx.send(TurnEvent::Completed).unwrap();
        let got: Vec<_> = std::iter::from_fn(|| turn.try_next()).collect();
        assert_eq!(got, [TurnEvent::TextDelta("a b c".into()), TurnEvent::Reasoning("r".into()), TurnEvent::TextDelta("d".into()), TurnEvent::Completed]);
        let (tx, rx) = mpsc::unbounded_channel();
        let mut turn = Turn { events: rx, pending: None, finished: false, cancel: CancellationToken::new() };
        let piece = "x".repeat(1000);
        for _ in 0..40 {
            tx.send(TurnEvent::TextDelta(piece.clone())).unwrap();
        }
        let TurnEvent::TextDelta(first) = turn.try_next().unwrap() else { panic!() };
        assert!(first.len() >= COALESCE_BYTES && first.len() < COALESCE_BYTES + 1000, "bounded: {}", first.len());
    }
}
