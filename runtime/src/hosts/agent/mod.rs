//! The agents' host (world `a2a:agent/agent`, docs/agents.md): agent components
//! loaded by name (`<data-dir>/components/<name>.wasm`, or a built-in one), their imports
//! checked, pre-instantiated; each turn in a fresh instance of its own store, with what the
//! preset grants and within its memory and CPU limits. A reload swaps the component for new
//! turns while running ones finish on the version they started on.

mod agents;
mod bindings;
mod bucket;
mod config;
mod history;
mod imports;
mod keyvalue;
mod limits;
mod llm;
mod logging;
mod outgoing;
mod progress;
mod state;
mod stderr;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use wasmtime::component::Linker;
use wasmtime::{Store, UpdateDeadline};

use a2a_protocol::execution::Progress;

use crate::engine::registry::{Source, read};
use crate::engine::{Cache, trap_cause, wt};
use crate::sessions::openai::Chat;
use crate::sessions::preset::{ComponentSettings, LlmGrant};
use crate::sessions::{Agents, EventSink, TurnInput};
use crate::store::Store as TaskStore;
use crate::telemetry::{AgentTurn, Metrics};
use bindings::a2a::agent::types::{Outcome, Turn};
use bindings::{Agent as AgentWorld, AgentPre};
use state::{AgentState, Granted};

/// Most agent turns instantiated at once, whatever the presets' `concurrentTurns` add up to.
const MAX_SLOTS: u32 = 4096;

/// The agents built into the binary.
pub const EMBEDDED: &[(&str, &[u8])] = &[(
    "echo-agent",
    include_bytes!(env!("A2A_EDGE_ECHO_AGENT_WASM")),
)];

/// A loaded agent component, ready to instantiate.
pub struct Agent {
    /// Name presets refer to.
    pub name: String,
    /// Origin.
    pub source: Source,
    /// sha256 of the wasm, hex.
    pub sha256: String,
    /// Size of the wasm, bytes.
    pub size: usize,
    /// The interfaces it imports.
    pub imports: Vec<String>,
    /// When it was loaded, ms.
    pub loaded_at: u64,
    pre: AgentPre<AgentState>,
}

/// The agents' host.
pub struct AgentHost {
    engine: wasmtime::Engine,
    /// Advances the engine's epoch while a turn runs.
    ticker: crate::engine::Ticker,
    cache: Cache,
    linker: Linker<AgentState>,
    components_dir: PathBuf,
    loaded: RwLock<HashMap<String, Arc<Agent>>>,
    store: Arc<dyn TaskStore>,
    exit: crate::egress::Exit,
    chats: Mutex<HashMap<(LlmGrant, u64), Arc<Chat>>>,
    metrics: Arc<Metrics>,
    /// Why each agent that failed its latest load did.
    failures: Mutex<HashMap<String, String>>,
    /// One load at a time, so a component is compiled once however many turns wait for it,
    /// and a later reload is never overwritten by an earlier load.
    loading: tokio::sync::Mutex<()>,
    /// The pool's instance slots: more turns than the pool holds wait for one.
    slots: tokio::sync::Semaphore,
    /// The pool's size, made at start: instance slots and MiB per instance.
    pool: (u32, u32),
}

/// The pool `presets` need: instance slots (their `concurrentTurns` summed, at most
/// [`MAX_SLOTS`]) and the largest memory limit, MiB; none without an agent preset.
fn pool(presets: &[crate::sessions::preset::Preset]) -> (u32, u32) {
    let limits = presets.iter().filter_map(|p| match &p.backend {
        crate::sessions::preset::Backend::Component(c) => Some(c.limits),
        _ => None,
    });
    let (slots, memory_mib) = limits.fold((0u32, 0u32), |(n, m), l| {
        (n.saturating_add(l.concurrent_turns), m.max(l.memory_mib))
    });
    (slots.min(MAX_SLOTS), memory_mib)
}

impl AgentHost {
    /// The host of the agents in `components_dir` (and the built-in ones) that `presets` run,
    /// compiled into `cache_dir`; their key-value buckets and histories in `store`, their
    /// requests leaving through `exit`, their turns counted in `metrics`.
    pub fn new(
        cache_dir: &std::path::Path,
        components_dir: PathBuf,
        presets: &[crate::sessions::preset::Preset],
        store: Arc<dyn TaskStore>,
        exit: crate::egress::Exit,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<AgentHost> {
        let (slots, memory_mib) = pool(presets);
        let (engine, cache, ticker) =
            crate::engine::agent_engine(cache_dir, slots, (memory_mib as usize) << 20)?;
        let linker = state::link(&engine)?;
        Ok(AgentHost {
            engine,
            ticker,
            cache,
            linker,
            components_dir,
            loaded: RwLock::default(),
            store,
            exit,
            chats: Mutex::default(),
            metrics,
            failures: Mutex::default(),
            loading: tokio::sync::Mutex::default(),
            slots: tokio::sync::Semaphore::new(slots as usize),
            pool: (slots, memory_mib),
        })
    }

    /// Whether the agents `presets` run fit the pool made at start; if not, what to do.
    pub fn fits(&self, presets: &[crate::sessions::preset::Preset]) -> anyhow::Result<()> {
        let (slots, memory_mib) = pool(presets);
        let (have_slots, have_mib) = self.pool;
        if slots > have_slots || memory_mib > have_mib {
            anyhow::bail!(
                "the presets' agent components need a pool of {slots} turns of {memory_mib} MiB; the one made at start holds {have_slots} of {have_mib} MiB: restart to apply them"
            );
        }
        Ok(())
    }

    /// Every loaded agent, by name.
    pub fn all(&self) -> Vec<Arc<Agent>> {
        let mut all: Vec<_> = self.loaded.read().unwrap().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// The loaded agent `name`, if it is.
    pub fn get(&self, name: &str) -> Option<Arc<Agent>> {
        self.loaded.read().unwrap().get(name).cloned()
    }

    /// Why `name`'s latest load failed, if it did.
    pub fn failure(&self, name: &str) -> Option<String> {
        self.failures.lock().unwrap().get(name).cloned()
    }

    /// Loads `names` in the background (at start, so a first turn finds them compiled and a bad
    /// one is in the log at once).
    pub fn preload(self: &Arc<Self>, names: Vec<String>) {
        let this = self.clone();
        tokio::spawn(async move {
            for name in names {
                if let Err(e) = this.agent(&name).await {
                    tracing::error!(agent = %name, error = %format!("{e:#}"), "agent component not loaded");
                }
            }
        });
    }

    /// The agent `name`, loading it on first use (once, whoever else waits for it).
    pub async fn agent(self: &Arc<Self>, name: &str) -> anyhow::Result<Arc<Agent>> {
        if let Some(a) = self.get(name) {
            return Ok(a);
        }
        let _one = self.loading.lock().await;
        if let Some(a) = self.get(name) {
            return Ok(a);
        }
        self.load_now(name).await
    }

    /// Reads `name` again from its source (`<components-dir>/<name>.wasm`, else the built-in
    /// one), checks and pre-instantiates it on a blocking thread, then swaps it in for new
    /// turns. On any error the current version keeps serving.
    pub async fn reload(self: &Arc<Self>, name: &str) -> anyhow::Result<Arc<Agent>> {
        let _one = self.loading.lock().await;
        self.load_now(name).await
    }

    /// Loads `name` and swaps it in (the caller holds `loading`).
    async fn load_now(self: &Arc<Self>, name: &str) -> anyhow::Result<Arc<Agent>> {
        let loaded = self.clone().read_and_load(name).await;
        let mut failures = self.failures.lock().unwrap();
        match &loaded {
            Ok(_) => failures.remove(name),
            Err(e) => failures.insert(name.to_owned(), format!("{e:#}")),
        };
        drop(failures);
        let agent = Arc::new(loaded?);
        tracing::info!(agent = %name, sha256 = %&agent.sha256[..12], "agent component ready");
        self.loaded
            .write()
            .unwrap()
            .insert(name.to_owned(), agent.clone());
        Ok(agent)
    }

    /// Reads `name` from its source and loads it on a blocking thread.
    async fn read_and_load(self: Arc<Self>, name: &str) -> anyhow::Result<Agent> {
        let (wasm, source) = read(&self.components_dir, name, EMBEDDED, "agent component")?;
        let owned = name.to_owned();
        tokio::task::spawn_blocking(move || self.load(&owned, &wasm, source)).await?
    }

    /// Compiles (or loads from cache), checks the imports of and pre-instantiates a component.
    fn load(&self, name: &str, wasm: &[u8], source: Source) -> anyhow::Result<Agent> {
        let (component, sha256, _) = self.cache.load(name, wasm)?;
        let imports = imports::of(&component, &self.engine);
        imports::check(name, &imports)?;
        let pre = wt(self.linker.instantiate_pre(&component)).with_context(|| {
            format!("agent component {name:?} imports something this runtime does not provide")
        })?;
        let pre = wt(AgentPre::new(pre)).with_context(|| {
            format!("component {name:?} is not an agent: it does not export a2a:agent's `run`")
        })?;
        Ok(Agent {
            name: name.to_owned(),
            source,
            sha256,
            size: wasm.len(),
            imports,
            loaded_at: crate::clock::now_ms(),
            pre,
        })
    }

    /// What `settings` grant, with the model client shared by every preset naming it.
    fn granted(&self, settings: &ComponentSettings) -> Granted {
        let g = &settings.grants;
        let chat = g.llm.as_ref().map(|l| {
            self.chats
                .lock()
                .unwrap()
                .entry((l.clone(), settings.limits.timeout_ms))
                .or_insert_with(|| {
                    Arc::new(Chat::new(
                        l.base_url.as_deref(),
                        l.model.as_deref(),
                        l.api_key_env.as_deref(),
                        std::time::Duration::from_millis(settings.limits.timeout_ms),
                        &self.exit,
                    ))
                })
                .clone()
        });
        Granted {
            chat,
            agents: Arc::new(g.agents.clone()),
            allowed_hosts: Arc::new(g.allowed_hosts.clone()),
            allow_private: g.allow_private,
            key_values: g
                .key_value
                .then(|| self.store.clone() as Arc<dyn crate::store::KeyValues>),
            config: Arc::new(settings.config.clone()),
            limits: settings.limits,
        }
    }

    /// Runs one turn of `settings`' agent; its final event.
    pub async fn run(
        self: Arc<Self>,
        settings: Arc<ComponentSettings>,
        input: TurnInput,
        events: EventSink,
        cancel: CancellationToken,
    ) -> Progress {
        let agent = match self.agent(&settings.component).await {
            Ok(a) => a,
            Err(e) => return Progress::Unavailable(format!("{e:#}")),
        };
        let Ok(_slot) = self.slots.acquire().await else {
            return Progress::Unavailable("the agents' instance pool is closed".into());
        };
        // A turn dropped before its end (its timeout, a cancel) is counted all the same.
        let mut uncounted = Uncounted {
            metrics: &self.metrics,
            cancel: &cancel,
            armed: true,
        };
        let turn = turn(&input);
        let data = AgentState::prepare(
            &agent.name,
            &self.granted(&settings),
            &input,
            self.store.clone(),
            events,
            cancel.clone(),
            self.exit.clone(),
        );
        let meter = data.meter.clone();
        let mut store = Store::new(&self.engine, data);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(1);
        let checked = meter.clone();
        store.epoch_deadline_callback(move |_| {
            checked.check()?;
            Ok(UpdateDeadline::Yield(1))
        });
        let _ticking = self.ticker.running();
        let run = meter.polls(async {
            let instance: AgentWorld = agent.pre.instantiate_async(&mut store).await?;
            instance.call_run(&mut store, &turn).await
        });
        let result = tokio::select! {
            () = cancel.cancelled() => None,
            r = run => Some(r),
        };
        let canceled = result.is_none();
        let last = match result {
            None => Progress::Failed("canceled".into()),
            Some(Ok(outcome)) => bounded(outcome),
            Some(Err(e)) => Progress::Failed(format!("the agent stopped: {}", trap_cause(&e))),
        };
        uncounted.armed = false;
        let data = store.data();
        self.count(&last, canceled, data);
        let stderr = data.stderr.text();
        if !stderr.is_empty() && !matches!(last, Progress::Completed) {
            tracing::warn!(agent = %agent.name, instance = %input.instance_id, task = %input.task_id, %stderr, "the agent's turn did not complete; the end of its standard error");
        }
        last
    }

    fn count(&self, last: &Progress, canceled: bool, data: &AgentState) {
        let outcome = match last {
            _ if canceled => "canceled",
            Progress::Completed => "completed",
            Progress::InputRequired(_) => "input_required",
            Progress::AuthRequired(_) => "auth_required",
            Progress::Unavailable(_) => "unavailable",
            _ => "failed",
        };
        self.metrics.agent_turn(AgentTurn {
            outcome,
            cpu: data.meter.cpu(),
            peak_memory: data.limiter.peak as u64,
            tokens: data.tokens(),
        });
        if data.dropped_lines() > 0 {
            tracing::warn!(
                lines = data.dropped_lines(),
                "an agent logged more lines than a turn may: dropped"
            );
        }
    }
}

/// The turn's end as `outcome` says, its text within [`progress::MAX_STATUS_BYTES`] (it becomes
/// the task's status message); a longer one fails the turn naming the bound.
fn bounded(outcome: Outcome) -> Progress {
    let (kind, text, end): (_, _, fn(String) -> Progress) = match outcome {
        Outcome::Completed => return Progress::Completed,
        Outcome::InputRequired(t) => ("input-required", t, Progress::InputRequired),
        Outcome::AuthRequired(t) => ("auth-required", t, Progress::AuthRequired),
        Outcome::Failed(t) => ("failed", t, Progress::Failed),
        Outcome::Unavailable(t) => ("unavailable", t, Progress::Unavailable),
    };
    if text.len() > progress::MAX_STATUS_BYTES {
        return Progress::Failed(format!(
            "the agent's `{kind}` text is {} bytes; an outcome's text is at most {} bytes",
            text.len(),
            progress::MAX_STATUS_BYTES
        ));
    }
    end(text)
}

/// Counts a turn that was dropped before its end: canceled, or failed (its timeout).
struct Uncounted<'a> {
    metrics: &'a Metrics,
    cancel: &'a CancellationToken,
    armed: bool,
}

impl Drop for Uncounted<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.metrics.agent_turn(AgentTurn {
                outcome: if self.cancel.is_cancelled() {
                    "canceled"
                } else {
                    "failed"
                },
                cpu: std::time::Duration::ZERO,
                peak_memory: 0,
                tokens: (0, 0),
            });
        }
    }
}

/// The turn as the agent reads it: the message's text, parts and metadata.
fn turn(input: &TurnInput) -> Turn {
    let message: serde_json::Value = serde_json::from_str(&input.message).unwrap_or_default();
    let json = |v: &serde_json::Value, empty: &str| {
        if v.is_null() {
            empty.to_owned()
        } else {
            v.to_string()
        }
    };
    Turn {
        task_id: input.task_id.clone(),
        context_id: input.context_id.clone(),
        message_id: input.message_id.clone(),
        skill: input.skill.clone(),
        text: input.prompt.clone(),
        parts: json(&message["parts"], "[]"),
        metadata: json(&message["metadata"], "{}"),
    }
}

/// The agents' host as the sessions run it.
pub struct Runner(pub Arc<AgentHost>);

impl Agents for Runner {
    fn turn(
        &self,
        agent: Arc<ComponentSettings>,
        input: TurnInput,
        events: EventSink,
        cancel: CancellationToken,
    ) -> std::pin::Pin<Box<dyn Future<Output = Progress> + Send>> {
        Box::pin(self.0.clone().run(agent, input, events, cancel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn presets(text: &str) -> Vec<crate::sessions::preset::Preset> {
        toml::from_str::<crate::config::Config>(text)
            .unwrap()
            .presets
    }

    #[test]
    fn the_pool_holds_the_presets_turns_summed_and_their_largest_memory() {
        let one = "[[presets]]\nid = \"a\"\nbackend = \"component\"\ncomponent = \"echo-agent\"\n\
                   limits = { concurrentTurns = 20, memoryMib = 512 }\n";
        assert_eq!(pool(&presets(one)), (20, 512));
        let two = format!(
            "{one}[[presets]]\nid = \"b\"\nbackend = \"component\"\ncomponent = \"echo-agent\"\n\
             limits = {{ concurrentTurns = 30 }}\n"
        );
        assert_eq!(pool(&presets(&two)), (50, 512));
        // No agent preset: no pool.
        assert_eq!(pool(&presets("")), (0, 0));
    }
}
