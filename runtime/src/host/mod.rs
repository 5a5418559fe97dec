//! The wasmtime glue of the `server` world: one linker with WASI p2, WASI HTTP and the
//! `a2a:edge` interfaces, and the per-request store in which a component instance serves one HTTP
//! request.
//!
//! Each interface is implemented on a narrow capability context of its own, built per request
//! from the shared [`Services`] (link once, prepare per request): storage sees the store scoped
//! to the instance, events the frame logs, sessions the session registry, admission the gate,
//! request-context the instance record and the metrics. No capability sees another's, and none
//! sees the application: each is unit-tested alone on an in-memory store.

mod admission;
mod attachments;
pub mod bindings;
mod context;
mod events;
mod handoff;
mod sessions;
mod settle;
mod storage;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use wasmtime::component::{HasData, HasSelf, Linker, ResourceTable};
use wasmtime::{Store, StoreLimits};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView};

use crate::activity::Activity;
use crate::admission::Admission;
use crate::attachments::Attachments;
use crate::config::Provider;
use crate::engine::{Burst, Engine, Metered, Registry, trap_cause, wt};
use crate::events::EventHub;
use crate::instances::{Instance, RouteKind};
use crate::responses::{Body, is_event_stream, rpc_failure};
use crate::sessions::{Sessions, Toolbox};
use crate::store::Store as TaskStore;
use crate::telemetry::Metrics;

pub use context::{Call, CallNote};

/// The runtime services the capabilities reach, shared by every request.
pub struct Services {
    /// Durable state.
    pub store: Arc<dyn TaskStore>,
    /// Frame logs.
    pub events: Arc<EventHub>,
    /// Live sessions.
    pub sessions: Arc<Sessions>,
    /// Rate limits and slots.
    pub admission: Arc<Admission>,
    /// Stored attachments.
    pub attachments: Arc<Attachments>,
    /// Peers and open streams.
    pub activity: Arc<Activity>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The tools and secrets of session turns.
    pub toolbox: Arc<dyn Toolbox>,
    /// Provider shown on every card.
    pub provider: Option<Provider>,
    /// Emit the seed's error numbers (SPEC §13).
    pub legacy_error_codes: bool,
    /// How long a request waits for a free component instance.
    pub instance_wait: Duration,
    /// Component instances alive at once.
    pub max_instances: u32,
}

/// How a request reached a component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// An instance route hit over HTTP.
    Http(RouteKind),
    /// `inbound.sendTest`.
    Internal,
}

/// One request for an instance's component.
pub struct Invocation {
    /// The instance serving it.
    pub instance: Arc<Instance>,
    /// How it arrived.
    pub route: Route,
    /// The TCP peer.
    pub peer: SocketAddr,
    /// What the component tells of the request, for the log.
    pub note: CallNote,
}

/// The capabilities of one request's store, one per `a2a:edge` interface.
struct Capabilities {
    context: context::ContextCtx,
    storage: storage::StorageCtx,
    events: events::EventsCtx,
    sessions: sessions::SessionsCtx,
    admission: admission::AdmissionCtx,
    attachments: attachments::AttachmentsCtx,
}

/// The data of one request's store.
pub struct State {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: NoOutbound,
    limits: StoreLimits,
    burst: Burst,
    caps: Capabilities,
}

impl Metered for State {
    fn burst(&mut self) -> &mut Burst {
        &mut self.burst
    }
    fn limits(&mut self) -> &mut StoreLimits {
        &mut self.limits
    }
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

/// The server component may not call out: every outbound request is refused.
struct NoOutbound;

/// What a request sent through WASI HTTP resolves to.
type Sent = Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), HttpError>> + Send>), HttpError>;

impl WasiHttpHooks for NoOutbound {
    fn send_request(&mut self, request: http::Request<WasiBody>, _: Option<RequestOptions>, _: Box<dyn Future<Output = Result<(), HttpError>> + Send>) -> Box<dyn Future<Output = Sent> + Send> {
        tracing::warn!(uri = %request.uri(), "refused an outbound request from a component: outbound HTTP is not allowed here");
        Box::new(async { Err(ErrorCode::HttpRequestDenied.into()) })
    }
}

/// A capability context next to the store's resource table (for interfaces with resources).
pub struct View<'a, C> {
    ctx: &'a mut C,
    table: &'a mut ResourceTable,
}

/// The [`HasData`] of a [`View`].
struct WithTable<C>(std::marker::PhantomData<C>);

impl<C: Send + 'static> HasData for WithTable<C> {
    type Data<'a> = View<'a, C>;
}

/// The linker of the server world: WASI, WASI HTTP (without the default outgoing handler) and
/// every `a2a:edge` interface on its capability.
fn link(engine: &wasmtime::Engine) -> anyhow::Result<Linker<State>> {
    let mut linker: Linker<State> = Linker::new(engine);
    wt(wasmtime_wasi::p2::add_to_linker_async(&mut linker))?;
    wt(wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker))?;
    wt(bindings::request_context::add_to_linker::<State, HasSelf<context::ContextCtx>>(&mut linker, |s| &mut s.caps.context))?;
    wt(bindings::storage::add_to_linker::<State, HasSelf<storage::StorageCtx>>(&mut linker, |s| &mut s.caps.storage))?;
    wt(bindings::attachments::add_to_linker::<State, HasSelf<attachments::AttachmentsCtx>>(&mut linker, |s| &mut s.caps.attachments))?;
    wt(bindings::events::add_to_linker::<State, WithTable<events::EventsCtx>>(&mut linker, |s| View { ctx: &mut s.caps.events, table: &mut s.table }))?;
    wt(bindings::sessions::add_to_linker::<State, WithTable<sessions::SessionsCtx>>(&mut linker, |s| View { ctx: &mut s.caps.sessions, table: &mut s.table }))?;
    wt(bindings::admission::add_to_linker::<State, WithTable<admission::AdmissionCtx>>(&mut linker, |s| View { ctx: &mut s.caps.admission, table: &mut s.table }))?;
    Ok(linker)
}

/// The server world's host: its components, and the services their requests reach.
pub struct Host {
    engine: Arc<Engine>,
    /// Components by name.
    pub registry: Arc<Registry<State>>,
    services: Services,
}

impl Host {
    /// Links the server world and loads the embedded components and `<data-dir>/components/*.wasm`.
    pub fn new(engine: Arc<Engine>, data_dir: &Path, services: Services) -> anyhow::Result<Host> {
        let linker = link(&engine.wasm)?;
        let registry = Arc::new(Registry::new(engine.cache.clone(), linker, data_dir.join("components"))?);
        Ok(Host { engine, registry, services })
    }

    /// The shared services.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Components compiled (not loaded from the cache) since start.
    pub fn compilations(&self) -> u64 {
        self.engine.cache.compilations.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The store of one request, its capabilities prepared from the services.
    fn prepare(&self, call: &Invocation, started: Instant) -> (State, settle::Written, handoff::Slot, crate::activity::Contexts) {
        let s = &self.services;
        let instance = &call.instance;
        let id = &instance.record.id;
        let peer_id = crate::activity::peer_id(call.peer.ip(), id);
        let written = settle::Written::default();
        let hand_off = handoff::Slot::default();
        let contexts = crate::activity::Contexts::default();
        let caps = Capabilities {
            context: context::ContextCtx::new(instance.clone(), s, call, peer_id.clone(), started),
            storage: storage::StorageCtx {
                store: s.store.clone(),
                activity: s.activity.clone(),
                instance_id: id.clone(),
                peer_id,
                written: written.clone(),
                contexts: contexts.clone(),
                note: call.note.clone(),
            },
            events: events::EventsCtx {
                hub: s.events.clone(),
                store: s.store.clone(),
                instance_id: id.clone(),
                keep_alive: Duration::from_millis(instance.record.limits.keep_alive_ms.max(100)),
                hand_off: hand_off.clone(),
            },
            sessions: sessions::SessionsCtx {
                sessions: s.sessions.clone(),
                store: s.store.clone(),
                toolbox: s.toolbox.clone(),
                instance_id: id.clone(),
                preset: instance.preset.id.clone(),
            },
            admission: admission::AdmissionCtx {
                admission: s.admission.clone(),
                metrics: s.metrics.clone(),
                instance_id: id.clone(),
                limits: instance.record.limits,
                source: call.peer.ip(),
            },
            attachments: attachments::AttachmentsCtx(s.attachments.clone()),
        };
        let state = State {
            table: ResourceTable::new(),
            wasi: WasiCtx::builder().build(),
            http: WasiHttpCtx::new(),
            hooks: NoOutbound,
            limits: self.engine.limits(),
            burst: Burst::default(),
            caps,
        };
        (state, written, hand_off, contexts)
    }

    /// Serves one request on the instance's component in a fresh store. The invocation may run
    /// on after the response head is sent (streams, `returnImmediately`); whatever way it ends,
    /// tasks it left unsettled are settled FAILED.
    pub async fn handle(&self, call: Invocation, req: http::Request<Full<Bytes>>) -> http::Response<Body> {
        let s = &self.services;
        let failure = |message: &str| rpc_failure(500, a2a_protocol::ErrorKind::Internal, message, s.legacy_error_codes);
        let Some(component) = self.registry.get(&call.instance.record.component) else {
            return failure(&format!("component {:?} is not loaded", call.instance.record.component));
        };
        let started = Instant::now();
        let (state, written, hand_off, contexts) = self.prepare(&call, started);
        let mut store = self.engine.store(state);
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
        let (pre, wait, metrics) = (component.pre.clone(), s.instance_wait, s.metrics.clone());
        let settle = settle::Settle { store: s.store.clone(), sessions: s.sessions.clone(), events: s.events.clone(), activity: s.activity.clone() };
        let instance_id = call.instance.record.id.clone();
        let invocation = tokio::spawn(async move {
            let result = async {
                let instantiating = Instant::now();
                let proxy = instantiate(&pre, &mut store, wait).await?;
                metrics.instantiated(store_setup + instantiating.elapsed());
                proxy.wasi_http_incoming_handler().call_handle(&mut store, request, out).await
            }
            .await;
            if let Err(e) = &result {
                metrics.trapped();
                tracing::warn!(instance = %instance_id, error = %trap_cause(e), "component invocation failed");
            }
            drop(store);
            settle.abandoned(&instance_id, &written.take(), result.as_ref().err().map(trap_cause)).await;
            result
        });
        match rx.await {
            Ok(Ok(response)) if is_event_stream(&response) => {
                let (parts, body) = response.into_parts();
                let body = handoff::chain(body, hand_off, s.store.clone());
                let (server_id, peer_id) = (&call.instance.record.id, crate::activity::peer_id(call.peer.ip(), &call.instance.record.id));
                http::Response::from_parts(parts, s.activity.watch_stream(&peer_id, server_id, contexts, body))
            }
            Ok(Ok(response)) => response,
            Ok(Err(code)) => failure(&format!("the component failed the request: {code:?}")),
            Err(_) => {
                let why = match invocation.await {
                    Ok(Err(e)) if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() => {
                        let why = format!("all {} component instances stayed busy for {} ms; retry shortly", s.max_instances, wait.as_millis());
                        return rpc_failure(503, a2a_protocol::ErrorKind::Internal, &why, s.legacy_error_codes);
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
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        match pre.instantiate_async(&mut *store).await {
            Err(e) if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() && Instant::now() + pause < deadline => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}
