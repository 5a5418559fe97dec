//! What each layer between a request and a component costs, on one component (`probe`), so a
//! regression shows where it happened:
//!
//! - bare wasmtime: instantiate the component from its pre-instance in a fresh store (pooling
//!   allocator with wasmtime's default settings, WASI and WASI HTTP contexts) and call its
//!   handler, which returns at once;
//! - a2a-edge: the same through `Host::handle`, with the runtime's store setup (the capability
//!   contexts, limits, CPU metering), instantiation, call and settling;
//! - one round trip through a function of each `a2a:edge` interface: a request making 1,000
//!   calls, less the one making none, over 1,000.
//!
//! `cargo bench -p a2a-edge-tests --bench host_layers` (env ROUNDS, default 2000); `cargo test`
//! runs it for 50 rounds, to prove it still runs. Figures are for comparing builds on one machine,
//! never absolutes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_edge::hosts::server::{CallNote, Invocation, Route};
use a2a_edge::instances::RouteKind;
use a2a_edge_tests::{Server, config_with, put_component};
use bytes::Bytes;
use http_body_util::Full;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, Linker, ResourceTable, ResourceType};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::{
    Error as HttpError, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks,
    WasiHttpView,
};

const PROBE: &[u8] = include_bytes!(env!("PROBE_WASM"));
const INTERFACES: [&str; 6] = [
    "context",
    "storage",
    "events",
    "admission",
    "sessions",
    "attachments",
];
const CALLS: u32 = 1000;

/// The smallest store WASI HTTP runs in.
struct Bare {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hooks: NeverSends,
}

/// The probe never sends a request.
struct NeverSends;

impl WasiHttpHooks for NeverSends {
    fn send_request(
        &mut self,
        _: http::Request<WasiBody>,
        _: Option<RequestOptions>,
        _: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        unreachable!("the probe sends no request")
    }
}

type Sent = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

impl WasiView for Bare {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for Bare {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

fn request(path: &str) -> http::Request<Bytes> {
    http::Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{path}"))
        .body(Bytes::new())
        .unwrap()
}

/// p50 and mean of `rounds` runs of `f`.
async fn time<F: std::future::Future<Output = ()>>(
    rounds: usize,
    mut f: impl FnMut() -> F,
) -> (Duration, Duration) {
    let mut all = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        f().await;
        all.push(t.elapsed());
    }
    let mean = all.iter().sum::<Duration>() / rounds as u32;
    all.sort();
    (all[rounds / 2], mean)
}

/// The a2a:edge imports as functions that fail: present, never called on the bare path. (The
/// linker's own `define_unknown_imports_as_traps` also shadows WASI interfaces of a newer patch
/// version than wasmtime's, which breaks their shared resource types.)
fn stub_edge_imports(linker: &mut Linker<Bare>, component: &Component) {
    let engine = component.engine();
    for (name, item) in component.component_type().imports(engine) {
        let ComponentItem::ComponentInstance(interface) = item.ty else {
            continue;
        };
        if !name.starts_with("a2a:edge/") {
            continue;
        }
        let mut instance = linker.instance(name).unwrap();
        for (export, item) in interface.exports(engine) {
            match item.ty {
                ComponentItem::ComponentFunc(_) => instance
                    .func_new(export, |_, _, _, _| {
                        wasmtime::bail!("a2a:edge is not linked on the bare path")
                    })
                    .unwrap(),
                // `use wasi:io/poll.{pollable}`: the WASI resource itself.
                ComponentItem::Resource(_) if export == "pollable" => instance
                    .resource(
                        export,
                        ResourceType::host::<wasmtime_wasi::p2::DynPollable>(),
                        |_, _| Ok(()),
                    )
                    .unwrap(),
                ComponentItem::Resource(_) => instance
                    .resource(export, ResourceType::host::<Bare>(), |_, _| Ok(()))
                    .unwrap(),
                _ => {}
            }
        }
    }
}

async fn bare(rounds: usize) -> (Duration, Duration) {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(
            PoolingAllocationConfig::default(),
        ));
    let engine = Engine::new(&config).unwrap();
    let component = Component::new(&engine, PROBE).unwrap();
    let mut linker: Linker<Bare> = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).unwrap();
    stub_edge_imports(&mut linker, &component);
    let pre = ProxyPre::new(linker.instantiate_pre(&component).unwrap()).unwrap();
    time(rounds, || {
        let pre = pre.clone();
        let engine = engine.clone();
        async move {
            let mut store = Store::new(
                &engine,
                Bare {
                    wasi: WasiCtx::builder().build(),
                    http: WasiHttpCtx::new(),
                    table: ResourceTable::new(),
                    hooks: NeverSends,
                },
            );
            let req = store
                .data_mut()
                .http()
                .new_incoming_request(Scheme::Http, request("/none/0").map(Full::new))
                .unwrap();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let out = store.data_mut().http().new_response_outparam(tx).unwrap();
            let proxy = pre.instantiate_async(&mut store).await.unwrap();
            proxy
                .wasi_http_incoming_handler()
                .call_handle(&mut store, req, out)
                .await
                .unwrap();
            assert_eq!(rx.await.unwrap().unwrap().status(), 204);
        }
    })
    .await
}

fn main() {
    // `cargo bench` passes --bench; `cargo test` passes nothing.
    let measuring = std::env::args().any(|a| a == "--bench");
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(if measuring { 2000 } else { 50 });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let s = Server::start_with(config_with(&[("probe", "probe", None)]), |dir| {
            put_component(dir, "probe", PROBE)
        })
        .await;
        let app = s.app();
        let instance = app
            .instances()
            .into_iter()
            .find(|i| i.record.id == "probe")
            .expect("the probe instance is served");
        let handle = |path: String| {
            let instance: Arc<_> = instance.clone();
            async move {
                let call = Invocation {
                    instance,
                    route: Route::Http(RouteKind::Rpc),
                    peer: "127.0.0.1:1".parse().unwrap(),
                    caller: None,
                    note: CallNote::default(),
                };
                let response = app.host.handle(call, request(&path)).await;
                assert_eq!(response.status(), 204, "{path}");
            }
        };

        let (bare_p50, bare_mean) = bare(rounds).await;
        let (edge_p50, edge_mean) = time(rounds, || handle("/none/0".into())).await;
        println!("| layer | p50 | mean |");
        println!("|---|---|---|");
        println!("| bare wasmtime: instantiate + call | {bare_p50:.1?} | {bare_mean:.1?} |");
        println!("| a2a-edge: store setup + instantiate + call + settle | {edge_p50:.1?} | {edge_mean:.1?} |");
        // Negative when the runtime's engine settings (pages kept resident, reset by memset)
        // win back more than its store setup costs.
        let share = |edge: Duration, bare: Duration| {
            format!("{:+.1} µs", (edge.as_nanos() as f64 - bare.as_nanos() as f64) / 1000.0)
        };
        println!(
            "| a2a-edge's own share | {} | {} |",
            share(edge_p50, bare_p50),
            share(edge_mean, bare_mean)
        );
        let few = (rounds / 20).max(10);
        for interface in INTERFACES {
            let (_, with) = time(few, || handle(format!("/{interface}/{CALLS}"))).await;
            let (_, without) = time(few, || handle("/none/0".into())).await;
            let each = with.saturating_sub(without) / CALLS;
            println!("| one `{interface}` round trip | | {each:.2?} |");
        }
    });
}
