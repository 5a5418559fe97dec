//! The wasmtime host: one engine (pooling allocator, epoch interruption), one linker with WASI
//! p2, WASI HTTP and the `a2a:edge` interfaces, the component registry, and the per-request
//! store in which a component instance serves one HTTP request.

mod admission;
mod attachments;
pub mod bindings;
pub mod client;
mod context;
pub mod egress;
mod events;
mod handoff;
pub mod outbound_http;
pub mod registry;
mod sessions;
mod storage;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime::{CallHook, Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::app::App;
use crate::config::RuntimeSettings;
use crate::instances::{Instance, RouteKind};

pub use registry::Registry;

/// Epoch tick; the CPU limit is counted in these.
const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The engine, linker and components.
pub struct Host {
    /// Components by name.
    pub registry: Arc<Registry>,
    cpu_burst_ticks: u32,
    memory_bytes: usize,
    /// Instantiations so far.
    pub instantiations: AtomicU64,
    /// Time to create a request's store and instantiate its component.
    pub instantiate_time: crate::histogram::Histogram,
    /// Invocations that ended in a trap or limit.
    pub traps: AtomicU64,
    /// The outbound client component.
    pub client: Arc<client::ClientHost>,
}

/// How a request reached a component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// An instance route hit over HTTP.
    Http(RouteKind),
    /// `inbound.sendTest`.
    Internal,
}

/// What a request turned out to be, as its component told the host: for the request log line.
#[derive(Clone, Default)]
pub struct CallNote(Arc<std::sync::Mutex<Call>>);

/// The contents of a [`CallNote`].
#[derive(Clone, Debug, Default)]
pub struct Call {
    /// The A2A method.
    pub method: Option<String>,
    /// `ok`, or the error's reason.
    pub outcome: Option<String>,
    /// The first task the request created or changed.
    pub task_id: Option<String>,
}

impl CallNote {
    /// What was noted so far.
    pub fn take(&self) -> Call {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    fn with(&self, f: impl FnOnce(&mut Call)) {
        f(&mut self.0.lock().unwrap());
    }
}

/// Per-request state the `a2a:edge` interfaces see.
pub struct RequestState {
    app: Arc<App>,
    instance: Arc<Instance>,
    peer: SocketAddr,
    /// The caller's stable id, derived from `peer` and the instance.
    peer_id: String,
    route: Route,
    /// When the request arrived.
    started: std::time::Instant,
    /// Contexts this request worked in.
    contexts: crate::activity::Contexts,
    /// Tasks whose latest stored version this invocation wrote: id → version.
    written: Vec<(String, u64)>,
    /// What the request was, for the log.
    note: CallNote,
    /// Where the component leaves the rest of a stream it hands off.
    hand_off: handoff::Slot,
}

/// The data of one request's store.
pub struct State {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: outbound_http::Policy,
    limits: StoreLimits,
    req: RequestState,
    burst: Burst,
}

/// CPU-burst accounting of a store (see [`meter`]).
#[derive(Default)]
pub struct Burst {
    /// Epoch ticks since the guest last returned from a host function.
    ticks: u32,
    in_epoch_callback: bool,
}

/// Store data whose memory and CPU bursts are limited.
pub trait Metered: Send + 'static {
    /// Its burst accounting.
    fn burst(&mut self) -> &mut Burst;
    /// Its memory limits.
    fn limits(&mut self) -> &mut StoreLimits;
}

impl Metered for State {
    fn burst(&mut self) -> &mut Burst {
        &mut self.burst
    }
    fn limits(&mut self) -> &mut StoreLimits {
        &mut self.limits
    }
}

/// Applies the memory limit and the CPU-burst limit: a guest computing for more than
/// `max_ticks` epoch ticks without returning to the host traps.
fn meter<T: Metered>(store: &mut Store<T>, max_ticks: u32) {
    store.limiter(|s| s.limits());
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |mut ctx| {
        let b = ctx.data_mut().burst();
        b.ticks += 1;
        b.in_epoch_callback = true;
        if b.ticks > max_ticks {
            wasmtime::bail!("CPU limit: the component computed for more than {} ms without waiting", max_ticks as u128 * EPOCH_TICK.as_millis());
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store.call_hook(|mut ctx, hook| {
        // The epoch callback itself is a host call: its return must not reset the count.
        if matches!(hook, CallHook::ReturningFromHost) {
            let b = ctx.data_mut().burst();
            if !std::mem::take(&mut b.in_epoch_callback) {
                b.ticks = 0;
            }
        }
        Ok(())
    });
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
    }
}

/// The view the `a2a:edge` host traits are implemented on.
pub struct EdgeView<'a> {
    req: &'a mut RequestState,
    table: &'a mut ResourceTable,
}

struct Edge;

impl HasData for Edge {
    type Data<'a> = EdgeView<'a>;
}

fn edge(s: &mut State) -> EdgeView<'_> {
    EdgeView { req: &mut s.req, table: &mut s.table }
}

/// A response body of any origin (guest or host).
pub type Body = HyperOutgoingBody;

/// A complete host-made response body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}

impl Host {
    /// The engine (pooling allocator sized by `settings`), linker and registry with the
    /// embedded components and `<data-dir>/components/*.wasm`.
    pub fn new(settings: &RuntimeSettings, data_dir: &Path) -> anyhow::Result<Host> {
        let memory_bytes = usize::try_from(settings.memory_mib.max(1) << 20).context("memoryMib is too large")?;
        let max = settings.max_instances.max(1);
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(max)
            .total_core_instances(max * 4)
            .total_memories(max * 2)
            .total_tables(max * 4)
            .total_stacks(max)
            .max_memory_size(memory_bytes)
            .max_memories_per_component(4)
            .max_tables_per_component(8)
            .max_core_instances_per_component(16)
            // Reset a slot's first pages with memset rather than madvise: a request touches about
            // this much, and decommitting it costs a TLB shootdown across cores every time.
            .linear_memory_keep_resident(512 << 10)
            .table_keep_resident(16 << 10)
            .async_stack_keep_resident(64 << 10)
            .decommit_batch_size(64);
        let mut config = Config::new();
        config.wasm_component_model(true).epoch_interruption(true).allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = wt(Engine::new(&config)).context("cannot create the wasmtime engine (is enough virtual address space available?)")?;
        spawn_epoch_ticker(&engine);
        let mut linker: Linker<State> = Linker::new(&engine);
        wt(wasmtime_wasi::p2::add_to_linker_async(&mut linker))?;
        wt(wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker))?;
        wt(bindings::request_context::add_to_linker::<State, Edge>(&mut linker, edge))?;
        wt(bindings::storage::add_to_linker::<State, Edge>(&mut linker, edge))?;
        wt(bindings::events::add_to_linker::<State, Edge>(&mut linker, edge))?;
        wt(bindings::sessions::add_to_linker::<State, Edge>(&mut linker, edge))?;
        wt(bindings::admission::add_to_linker::<State, Edge>(&mut linker, edge))?;
        wt(bindings::attachments::add_to_linker::<State, Edge>(&mut linker, edge))?;
        let cache_dir = settings.cache_dir.clone().unwrap_or_else(|| data_dir.join("cache"));
        let registry = Arc::new(Registry::new(engine, linker, cache_dir, data_dir.join("components"))?);
        let cpu_burst_ticks = u32::try_from(settings.cpu_burst_ms / EPOCH_TICK.as_millis() as u64).unwrap_or(u32::MAX).max(1);
        let client = Arc::new(client::ClientHost::new(&registry, cpu_burst_ticks, memory_bytes)?);
        Ok(Host { registry, client, cpu_burst_ticks, memory_bytes, instantiations: AtomicU64::new(0), instantiate_time: Default::default(), traps: AtomicU64::new(0) })
    }

    /// Serves one request on the instance's component in a fresh store. The invocation may run
    /// on after the response head is sent (streams, `returnImmediately`); whatever way it ends,
    /// tasks it left unsettled are settled FAILED.
    pub async fn handle(&self, app: &Arc<App>, instance: Arc<Instance>, route: Route, peer: SocketAddr, req: http::Request<Full<Bytes>>, note: &CallNote) -> http::Response<Body> {
        let legacy = app.config.protocol.legacy_error_codes;
        let failure = |message: &str| crate::server::rpc_failure(500, a2a_protocol::ErrorKind::Internal, message, legacy);
        let Some(component) = self.registry.get(&instance.record.component) else {
            return failure(&format!("component {:?} is not loaded", instance.record.component));
        };
        let started = std::time::Instant::now();
        let contexts = crate::activity::Contexts::default();
        let hand_off = handoff::Slot::default();
        let served = instance.clone();
        let state = State {
            table: ResourceTable::new(),
            wasi: WasiCtx::builder().build(),
            http: WasiHttpCtx::new(),
            hooks: outbound_http::Policy::deny_all(),
            limits: StoreLimitsBuilder::new().memory_size(self.memory_bytes).build(),
            req: RequestState {
                app: app.clone(),
                peer_id: crate::activity::peer_id(peer.ip(), &instance.record.id),
                instance,
                peer,
                route,
                started,
                contexts: contexts.clone(),
                written: Vec::new(),
                note: note.clone(),
                hand_off: hand_off.clone(),
            },
            burst: Burst::default(),
        };
        let mut store = Store::new(self.registry.engine(), state);
        meter(&mut store, self.cpu_burst_ticks);
        let (tx, rx) = tokio::sync::oneshot::channel();
        let prepared = (|| -> wasmtime::Result<_> {
            let request = store.data_mut().http().new_incoming_request(Scheme::Http, req)?;
            let out = store.data_mut().http().new_response_outparam(tx)?;
            Ok((request, out))
        })();
        let (request, out) = match prepared {
            Ok(p) => p,
            Err(e) => return failure(&format!("cannot prepare the request: {e}")),
        };
        let store_setup = started.elapsed();
        self.instantiations.fetch_add(1, Ordering::Relaxed);
        let pre = component.pre.clone();
        let shared = app.clone();
        let wait = Duration::from_millis(app.config.runtime.instance_wait_ms);
        let invocation = tokio::spawn(async move {
            let result = async {
                let instantiating = std::time::Instant::now();
                let proxy = instantiate(&pre, &mut store, wait).await?;
                shared.host.instantiate_time.record(store_setup + instantiating.elapsed());
                proxy.wasi_http_incoming_handler().call_handle(&mut store, request, out).await
            }
            .await;
            if let Err(e) = &result {
                shared.host.traps.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(instance = %store.data().req.instance.record.id, error = %trap_cause(e), "component invocation failed");
            }
            let req = &store.data().req;
            storage::settle_abandoned(&shared, &req.instance.record.id, &req.written, result.as_ref().err().map(trap_cause)).await;
            result
        });
        match rx.await {
            Ok(Ok(response)) if is_event_stream(&response) => {
                let (parts, body) = response.into_parts();
                let body = handoff::chain(body, hand_off, app.store.clone());
                let (server_id, peer_id) = (&served.record.id, crate::activity::peer_id(peer.ip(), &served.record.id));
                http::Response::from_parts(parts, app.activity.watch_stream(&peer_id, server_id, contexts, body))
            }
            Ok(Ok(response)) => response,
            Ok(Err(code)) => failure(&format!("the component failed the request: {code:?}")),
            Err(_) => {
                let why = match invocation.await {
                    Ok(Err(e)) if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() => {
                        let why = format!("all {} component instances stayed busy for {} ms; retry shortly", app.config.runtime.max_instances, wait.as_millis());
                        return crate::server::rpc_failure(503, a2a_protocol::ErrorKind::Internal, &why, legacy);
                    }
                    Ok(Err(e)) => trap_cause(&e),
                    Ok(Ok(())) => "the component returned without answering".into(),
                    Err(e) => format!("the invocation panicked: {e}"),
                };
                failure(&format!("the component failed: {why}"))
            }
        }
    }
}

/// Instantiates a component; when every pooled instance is in use, waits for one to come free
/// (up to `wait`) instead of failing at once.
async fn instantiate(pre: &ProxyPre<State>, store: &mut Store<State>, wait: Duration) -> wasmtime::Result<wasmtime_wasi_http::p2::bindings::Proxy> {
    let deadline = std::time::Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        match pre.instantiate_async(&mut *store).await {
            Err(e) if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() && std::time::Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// A wasmtime result as an anyhow one.
pub fn wt<T>(r: wasmtime::Result<T>) -> anyhow::Result<T> {
    r.map_err(Into::into)
}

/// Whether a response is an SSE stream.
pub fn is_event_stream(r: &http::Response<Body>) -> bool {
    r.headers().get(http::header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// The cause of a failed invocation in words (`wasm trap: wasm \`unreachable\` instruction
/// executed`, `CPU limit: …`), without wasmtime's backtrace.
fn trap_cause(e: &wasmtime::Error) -> String {
    let root = e.root_cause().to_string();
    let line = root.lines().next().unwrap_or("");
    let prefix = if e.downcast_ref::<wasmtime::Trap>().is_some() { "wasm trap: " } else { "" };
    format!("{prefix}{}", line.chars().take(300).collect::<String>())
}

/// Advances the engine's epoch every tick until the engine is gone.
fn spawn_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("a2a-edge-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch thread");
}
