//! The data of one agent turn's store: WASI with nothing behind it (no preopened directory, no
//! network, an empty environment), outgoing HTTP under the preset's `allowedHosts`, the memory
//! and CPU meters, and one capability context per interface of the `agent` world, each
//! prepared from the turn and its grants; and the linker that reaches each through its context.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::agents::AgentsCtx;
use super::bindings;
use super::config::ConfigCtx;
use super::history::HistoryCtx;
use super::keyvalue::{KeyValueCtx, KeyValueView, WithBuckets};
use super::limits::{Limiter, Meter};
use super::llm::LlmCtx;
use super::logging::LoggingCtx;
use super::outgoing::Outgoing;
use super::progress::{Budget, ProgressCtx};
use super::stderr::Tail;
use crate::engine::wt;
use crate::sessions::openai::Chat;
use crate::sessions::preset::AgentLimits;
use crate::sessions::{EventSink, TurnInput};
use crate::store::{KeyValues, Tasks};

/// Most host resources (HTTP fields and bodies, streams, pollables, buckets) one turn holds.
const MAX_RESOURCES: usize = 2048;
/// Largest set of HTTP header fields one resource holds, bytes.
const MAX_FIELDS_BYTES: usize = 16 << 10;

/// What a preset grants its agent, prepared once per preset and shared by its turns.
pub struct Granted {
    /// The model, when granted.
    pub chat: Option<Arc<Chat>>,
    /// Connection names.
    pub agents: Arc<Vec<String>>,
    /// Hosts outgoing HTTP may reach.
    pub allowed_hosts: Arc<Vec<String>>,
    /// Whether they may be private addresses.
    pub allow_private: bool,
    /// The key-value store, when granted.
    pub key_values: Option<Arc<dyn KeyValues>>,
    /// `wasi:config` values.
    pub config: Arc<BTreeMap<String, String>>,
    /// Limits.
    pub limits: AgentLimits,
}

/// The capabilities of one turn, one per interface of the world.
struct Capabilities {
    progress: ProgressCtx,
    history: HistoryCtx,
    llm: LlmCtx,
    agents: AgentsCtx,
    kv: KeyValueCtx,
    logging: LoggingCtx,
    config: ConfigCtx,
}

/// The data of one turn's store.
pub struct AgentState {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    outgoing: Outgoing,
    /// Memory taken.
    pub limiter: Limiter,
    /// Computing time taken.
    pub meter: Meter,
    /// The end of what it wrote to standard error.
    pub stderr: Tail,
    caps: Capabilities,
}

impl AgentState {
    /// The store data of `agent`'s turn `input` under `granted`, its progress sent to `events`.
    pub fn prepare(
        agent: &str,
        granted: &Granted,
        input: &TurnInput,
        tasks: Arc<dyn Tasks>,
        events: EventSink,
        cancel: CancellationToken,
        exit: crate::egress::Exit,
    ) -> AgentState {
        let limits = granted.limits;
        let budget = Budget::default();
        let caps = Capabilities {
            progress: ProgressCtx::prepare(events.clone(), budget.clone()),
            history: HistoryCtx::prepare(tasks, input),
            llm: LlmCtx::prepare(granted.chat.clone(), input.host.clone(), events, budget),
            agents: AgentsCtx::prepare(granted.agents.clone(), input.host.clone(), cancel),
            kv: KeyValueCtx::prepare(
                granted.key_values.clone(),
                &input.instance_id,
                u64::from(limits.key_value_mib) << 20,
            ),
            logging: LoggingCtx::prepare(agent, &input.instance_id, &input.task_id),
            config: ConfigCtx::prepare(granted.config.clone()),
        };
        // Host-side objects an agent makes (HTTP fields, streams, pollables, buckets) are memory
        // outside its limiter: they are bounded in number and in size.
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let mut http = WasiHttpCtx::new();
        http.set_field_size_limit(MAX_FIELDS_BYTES);
        let stderr = Tail::default();
        AgentState {
            table,
            wasi: WasiCtx::builder().stderr(stderr.clone()).build(),
            http,
            outgoing: Outgoing::prepare(granted.allowed_hosts.clone(), granted.allow_private, exit),
            limiter: Limiter::new((limits.memory_mib as usize) << 20),
            meter: Meter::new(limits.cpu_ms),
            stderr,
            caps,
        }
    }

    /// Model tokens the turn used: prompt, completion.
    pub fn tokens(&self) -> (u64, u64) {
        self.caps.llm.tokens
    }

    /// Log lines the turn wanted past its bound.
    pub fn dropped_lines(&self) -> u32 {
        self.caps.logging.dropped()
    }
}

impl WasiView for AgentState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for AgentState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.outgoing,
        }
    }
}

/// The linker of the agent world: WASI (with nothing behind it), WASI HTTP's outgoing handler
/// and every interface of the world on its capability.
pub fn link(engine: &wasmtime::Engine) -> anyhow::Result<Linker<AgentState>> {
    use bindings::a2a::agent::{agents, history, llm, progress};
    use bindings::wasi::{config, keyvalue, logging};
    let mut linker: Linker<AgentState> = Linker::new(engine);
    wt(wasmtime_wasi::p2::add_to_linker_async(&mut linker))?;
    wt(wasmtime_wasi_http::p2::add_only_http_to_linker_async(
        &mut linker,
    ))?;
    wt(progress::add_to_linker::<_, HasSelf<ProgressCtx>>(
        &mut linker,
        |s| &mut s.caps.progress,
    ))?;
    wt(history::add_to_linker::<_, HasSelf<HistoryCtx>>(
        &mut linker,
        |s| &mut s.caps.history,
    ))?;
    wt(llm::add_to_linker::<_, HasSelf<LlmCtx>>(&mut linker, |s| {
        &mut s.caps.llm
    }))?;
    wt(agents::add_to_linker::<_, HasSelf<AgentsCtx>>(
        &mut linker,
        |s| &mut s.caps.agents,
    ))?;
    wt(keyvalue::store::add_to_linker::<_, WithBuckets>(
        &mut linker,
        |s| KeyValueView {
            ctx: &mut s.caps.kv,
            table: &mut s.table,
        },
    ))?;
    wt(logging::logging::add_to_linker::<_, HasSelf<LoggingCtx>>(
        &mut linker,
        |s| &mut s.caps.logging,
    ))?;
    wt(config::store::add_to_linker::<_, HasSelf<ConfigCtx>>(
        &mut linker,
        |s| &mut s.caps.config,
    ))?;
    Ok(linker)
}
