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
mod card_cache;
mod context;
mod drive;
mod events;
mod exchange;

/// The interface a component reads its request and writes its answer through in one crossing.
const EXCHANGE: &str = "a2a:edge/exchange@0.7.0";
mod handoff;
mod owner;
mod push;
mod services;
mod sessions;
mod state;
mod storage;
mod warm;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::Full;
use tracing::Instrument;
use wasmtime::Store;
use wasmtime::component::Resource;
use wasmtime_wasi_http::WasiHttpView;
use wasmtime_wasi_http::p2::bindings::http::types::{IncomingRequest, ResponseOutparam, Scheme};
use wasmtime_wasi_http::p2::bindings::{Proxy, ProxyPre};

use crate::engine::registry::{Loaded, Source};
use crate::engine::{Engine, Metered, Registry, trap_cause};
use crate::instances::RouteKind;
use crate::responses::{Body, Framing, is_event_stream, rpc_failure};
use crate::settlement::{Settle, Written};
use crate::telemetry::Metrics;

pub use services::{Books, Call, CallNote, Invocation, Route, Services, View};
pub use state::State;

/// The server world's host: its components, and the services their requests reach.
pub struct Host {
    engine: Arc<Engine>,
    /// Components by name.
    pub registry: Arc<Registry<State>>,
    services: Services,
    cards: card_cache::CardCache,
    warm: Arc<warm::Warm>,
}

impl Host {
    /// Links the server world and loads the embedded components and `<data-dir>/components/*.wasm`.
    pub fn new(engine: Arc<Engine>, data_dir: &Path, services: Services) -> anyhow::Result<Host> {
        let linker = state::link(&engine.wasm)?;
        let registry = Arc::new(Registry::new(
            engine.cache.clone(),
            linker,
            data_dir.join("components"),
        )?);
        Ok(Host {
            engine,
            registry,
            warm: warm::Warm::new(services.warm_instances.min(services.max_instances) as usize),
            services,
            cards: card_cache::CardCache::default(),
        })
    }

    /// The shared services.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Components compiled (not loaded from the cache) since start.
    pub fn compilations(&self) -> u64 {
        self.engine
            .cache
            .compilations
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    fn failure(&self, route: Route, status: u16, message: &str) -> http::Response<Body> {
        let framing = match route {
            Route::Http(RouteKind::Rest) => Framing::Rest,
            _ => Framing::JsonRpc,
        };
        rpc_failure(
            framing,
            status,
            a2a_protocol::ErrorKind::Internal,
            message,
            self.services.legacy_error_codes,
        )
    }

    /// Serves one request on the instance's component in a fresh store. The invocation may run
    /// on after the response head is sent (streams, `returnImmediately`); whatever way it ends,
    /// tasks it left unsettled are settled FAILED.
    pub async fn handle(
        &self,
        call: Invocation,
        req: http::Request<Bytes>,
    ) -> http::Response<Body> {
        let (instance_id, route) = (call.instance.record.id.clone(), call.route);
        let component = &call.instance.record.component;
        let Some(component) = self.registry.get(component) else {
            return self.failure(
                route,
                500,
                &format!("component {component:?} is not loaded"),
            );
        };
        let card = match self.card(&call, &component.sha256, req.headers()) {
            Ok(card) => card,
            Err(cached) => return cached,
        };
        let started = match self.start(&call, &component, req) {
            Ok(started) => started,
            Err(e) => return self.failure(route, 500, &format!("cannot prepare the request: {e}")),
        };
        let (hand_off, contexts) = (started.hand_off, started.contexts);
        let (response, running) = match self.answer(route, started.invocation, started.answer).await
        {
            Ok(answered) => answered,
            Err(failed) => return failed,
        };
        let response = if is_event_stream(&response) {
            let (parts, body) = response.into_parts();
            let body = handoff::chain(body, hand_off, self.services.store.clone());
            let peer_id = crate::activity::peer_id(call.peer.ip(), &instance_id);
            let body = self
                .services
                .activity
                .watch_stream(&peer_id, &instance_id, contexts, body);
            http::Response::from_parts(parts, body)
        } else {
            response
        };
        let response = match running {
            Some(invocation) => response.map(|body| drive::drive(body, invocation)),
            None => response,
        };
        match card {
            Some((version, variant)) => {
                self.cards
                    .keep(&instance_id, version, variant, response)
                    .await
            }
            None => response,
        }
    }

    /// For a card request, the version and variant its answer is cached under; the cached
    /// answer itself when it still holds (`Err`).
    fn card(
        &self,
        call: &Invocation,
        component_sha256: &str,
        headers: &http::HeaderMap,
    ) -> Result<Option<(card_cache::Version, card_cache::Variant)>, http::Response<Body>> {
        if call.route != Route::Http(RouteKind::Card) {
            return Ok(None);
        }
        let instance_id = &call.instance.record.id;
        let version = card_cache::Version {
            record: call.instance.record.updated_at,
            auth: call.instance.token.is_some(),
            endpoint: call.instance.endpoint_url.clone(),
            component: component_sha256.to_owned(),
        };
        let variant = card_cache::Variant::of(headers, call.instance.record.compat03);
        match self.cards.answer(instance_id, &version, variant, headers) {
            Some((response, outcome)) => {
                self.services
                    .metrics
                    .request(instance_id, "GetAgentCard", outcome);
                call.note.call("GetAgentCard", outcome);
                Err(response)
            }
            None => Ok(Some((version, variant))),
        }
    }

    /// Starts the invocation of `component` on `req` (not polled yet): on a warm instance of
    /// the built-in component when one is idle, else in a fresh store.
    fn start(
        &self,
        call: &Invocation,
        component: &Loaded<State>,
        req: http::Request<Bytes>,
    ) -> wasmtime::Result<Started> {
        let started = Instant::now();
        let state::Prepared {
            state,
            written,
            hand_off,
            contexts,
        } = state::prepare(
            &self.services,
            call,
            crate::store::Writer::of(&component.sha256),
            started,
            self.engine.limits(),
        );
        let reuse = component.source == Source::Embedded || call.instance.record.reuse_instances;
        let key = reuse.then(|| warm::Key {
            instance: call.instance.record.id.clone(),
            component: component.sha256.clone(),
        });
        let (mut store, proxy) = match key.as_ref().and_then(|k| self.warm.take(k)) {
            Some(idle) => {
                let mut store = idle.store;
                store.data_mut().renew(state);
                store.set_epoch_deadline(1);
                (store, Some(idle.proxy))
            }
            None => (self.engine.store(state), None),
        };
        let (tx, answer) = tokio::sync::oneshot::channel();
        // A component that reads its request through the exchange gets it there, whole.
        let req = if component.imports(EXCHANGE) {
            store.data_mut().exchange().hold(req)
        } else {
            req.map(Full::new)
        };
        let request = store
            .data_mut()
            .http()
            .new_incoming_request(Scheme::Http, req)?;
        let out = store.data_mut().http().new_response_outparam(tx)?;
        let run = Run {
            pre: component.pre.clone(),
            proxy,
            warm: key.map(|k| (k, self.warm.clone())),
            store,
            request,
            out,
            setup: started.elapsed(),
            written,
        };
        let span = method_span(call);
        call.note.trace(&span);
        let invocation: drive::Invocation = Box::pin(
            std::panic::AssertUnwindSafe(
                run.invoke(
                    self.settle(),
                    self.services.metrics.clone(),
                    self.services.instance_wait,
                    call.instance.record.id.clone(),
                )
                .instrument(span),
            )
            .catch_unwind(),
        );
        Ok(Started {
            invocation,
            answer,
            hand_off,
            contexts,
        })
    }

    /// Runs the invocation on this task until it answers: the answer, and the invocation when
    /// it runs on (its answer's body drives the rest); the failure to send when it answered
    /// none or an error.
    async fn answer(
        &self,
        route: Route,
        invocation: drive::Invocation,
        mut rx: Answer,
    ) -> Result<(http::Response<Body>, Option<drive::Invocation>), http::Response<Body>> {
        let mut running = Some(invocation);
        let answer = tokio::select! {
            biased;
            answer = &mut rx => answer,
            ended = running.as_mut().expect("not yet ended") => {
                running = None;
                match rx.try_recv() {
                    Ok(answer) => Ok(answer),
                    Err(_) => return Err(self.never_answered(route, ended)),
                }
            }
        };
        match answer {
            Ok(Ok(response)) => Ok((response, running)),
            Ok(Err(code)) => {
                if let Some(invocation) = running {
                    drive::detach(invocation);
                }
                Err(self.failure(
                    route,
                    500,
                    &format!("the component failed the request: {code:?}"),
                ))
            }
            // The outparam was dropped unset: the invocation's end says why.
            Err(_) => {
                let ended = match running {
                    Some(invocation) => invocation.await,
                    None => Ok(Ok(())),
                };
                Err(self.never_answered(route, ended))
            }
        }
    }

    /// Settling the tasks left running.
    pub fn settle(&self) -> Settle {
        self.services.settle()
    }

    /// The answer to a request whose invocation ended without one: 503 when no instance came
    /// free in time, else 500 with the cause.
    fn never_answered(&self, route: Route, ended: drive::Ended) -> http::Response<Body> {
        let why = match ended {
            Ok(Err(e))
                if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
                    .is_some() =>
            {
                let (max, wait) = (
                    self.services.max_instances,
                    self.services.instance_wait.as_millis(),
                );
                return self.failure(
                    route,
                    503,
                    &format!(
                        "all {max} component instances stayed busy for {wait} ms; retry shortly"
                    ),
                );
            }
            Ok(Err(e)) => trap_cause(&e),
            Ok(Ok(())) => "the component returned without answering".into(),
            Err(panic) => format!(
                "the invocation panicked: {}",
                panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("(no message)")
            ),
        };
        self.failure(route, 500, &format!("the component failed: {why}"))
    }
}

/// Where the component's answer comes (its outparam's channel).
type Answer = tokio::sync::oneshot::Receiver<
    Result<http::Response<Body>, wasmtime_wasi_http::p2::bindings::http::types::ErrorCode>,
>;

/// An invocation started for a request, and what its capabilities keep for the response.
struct Started {
    /// The invocation, not polled yet.
    invocation: drive::Invocation,
    /// Where its answer comes.
    answer: Answer,
    /// Where a stream is handed off.
    hand_off: handoff::Slot,
    /// The contexts the request works in.
    contexts: crate::activity::Contexts,
}

/// One invocation, ready to run on its own task.
struct Run {
    pre: ProxyPre<State>,
    /// The warm instance it runs on, if any.
    proxy: Option<Proxy>,
    /// Where its instance is kept afterwards, for the built-in component.
    warm: Option<(warm::Key, Arc<warm::Warm>)>,
    store: Store<State>,
    request: Resource<IncomingRequest>,
    out: Resource<ResponseOutparam>,
    setup: Duration,
    written: Written,
}

impl Run {
    /// Instantiates and calls the component; then settles the tasks it abandoned.
    async fn invoke(
        mut self,
        settle: Settle,
        metrics: Arc<Metrics>,
        wait: Duration,
        instance_id: String,
    ) -> wasmtime::Result<()> {
        let warm = self.warm.as_ref().map(|(_, w)| w.clone());
        let reused = self.proxy.is_some();
        let result = async {
            let proxy = match self.proxy.take() {
                Some(proxy) => {
                    metrics.reused();
                    proxy
                }
                None => {
                    let instantiating = Instant::now();
                    let proxy = instantiate(&self.pre, &mut self.store, wait, warm.as_deref())
                        .instrument(tracing::info_span!("component", otel.name = "instantiate"))
                        .await?;
                    metrics.instantiated(self.setup + instantiating.elapsed());
                    proxy
                }
            };
            proxy
                .wasi_http_incoming_handler()
                .call_handle(&mut self.store, self.request, self.out)
                .instrument(tracing::info_span!(
                    "component",
                    otel.name = "run",
                    a2a.component.reused = reused
                ))
                .await?;
            Ok(proxy)
        }
        .await;
        metrics.host_calls(self.store.data_mut().burst().host_calls());
        self.store.data_mut().end();
        let result = match result {
            Ok(proxy) => {
                if let Some((key, warm)) = self.warm
                    && self.store.data().reusable()
                {
                    warm.keep(
                        key,
                        warm::Idle {
                            store: self.store,
                            proxy,
                        },
                    );
                } else {
                    drop(self.store);
                }
                Ok(())
            }
            Err(e) => {
                metrics.trapped();
                tracing::warn!(instance = %instance_id, error = %trap_cause(&e), "component invocation failed");
                drop(self.store);
                Err(e)
            }
        };
        let why = self.written.why(result.as_ref().err().map(trap_cause));
        settle
            .abandoned(&instance_id, &self.written.take(), why)
            .await;
        result
    }
}

/// The span of a request's work in its component: named for the A2A method once the component
/// tells it (the proposed A2A conventions), with the task and context it worked on.
fn method_span(call: &Invocation) -> tracing::Span {
    use tracing::field::Empty;
    let r = &call.instance.record;
    tracing::info_span!(
        "a2a.method",
        otel.name = "a2a",
        a2a.method.name = Empty,
        a2a.task.id = Empty,
        a2a.context.id = Empty,
        a2a.instance.id = r.id.as_str(),
        a2a.component = r.component.as_str(),
        "error.type" = Empty,
    )
}

/// Instantiates a component; when every pooled instance is in use, waits for one to come free
/// (up to `wait`) instead of failing at once.
async fn instantiate(
    pre: &ProxyPre<State>,
    store: &mut Store<State>,
    wait: Duration,
    warm: Option<&warm::Warm>,
) -> wasmtime::Result<Proxy> {
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(1);
    loop {
        match pre.instantiate_async(&mut *store).await {
            Err(e)
                if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>()
                    .is_some()
                    && Instant::now() + pause < deadline =>
            {
                // An idle warm instance holds a slot a request can use.
                if warm.is_some_and(warm::Warm::evict) {
                    continue;
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}
