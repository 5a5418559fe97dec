//! The outbound client component's host: one store and instance per remote call, with the
//! connection it serves, the caller's abort signal and the outbound policy that injects the
//! credential. The same path serves `outbound.discover`, `outbound.call` and session tools.

mod bindings;
mod policy;

pub use bindings::a2a::edge::outbound::ConnectionInfo;
pub use bindings::exports::a2a::edge::client::CallRequest;
pub use policy::origin;

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use wasmtime::Store;
use wasmtime::component::{HasSelf, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::{DynPollable, subscribe};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::engine::{Burst, Engine, Metered, wt};
use bindings::a2a::edge::outbound;
use bindings::exports::a2a::edge::client::CallError;
use bindings::{OutboundClient, OutboundClientPre};
use policy::{Policy, Rules};

/// The outbound A2A client component (world `outbound-client`), built into the binary.
const CLIENT_WASM: &[u8] = include_bytes!(env!("A2A_EDGE_CLIENT_WASM"));

/// Largest response body a remote agent may send.
const MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// One remote call's setting: where, how long, with which credential.
pub struct Target {
    /// What the component sees of the connection (never the secret).
    pub info: ConnectionInfo,
    /// The bearer token the host injects.
    pub bearer: Option<String>,
    /// Origins the token may go to (`scheme://authority`).
    pub origins: Vec<String>,
    /// Which addresses the call may reach.
    pub reach: crate::egress::Reach,
}

/// The data of one client call's store.
pub struct ClientState {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: Policy,
    limits: crate::engine::Limits,
    burst: Burst,
    info: ConnectionInfo,
    abort: CancellationToken,
}

impl WasiView for ClientState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for ClientState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl Metered for ClientState {
    fn burst(&mut self) -> &mut Burst {
        &mut self.burst
    }
    fn limits(&mut self) -> &mut crate::engine::Limits {
        &mut self.limits
    }
}

/// Ready once the caller aborted.
struct Abort(CancellationToken);

#[wasmtime_wasi::async_trait]
impl wasmtime_wasi::p2::Pollable for Abort {
    async fn ready(&mut self) {
        self.0.cancelled().await
    }
}

impl outbound::Host for ClientState {
    fn connection(&mut self) -> wasmtime::Result<ConnectionInfo> {
        Ok(self.info.clone())
    }

    fn aborted(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        let r = self.table.push(Abort(self.abort.clone()))?;
        subscribe(&mut self.table, r)
    }
}

/// The compiled client component, ready to instantiate.
pub struct ClientHost {
    engine: Arc<Engine>,
    pre: OutboundClientPre<ClientState>,
    exit: crate::egress::Exit,
    /// sha256 of its wasm, hex.
    pub sha256: String,
}

/// The name the client component is listed under.
pub const CLIENT_COMPONENT: &str = "a2a-client";

/// The size of the client component's wasm, bytes.
pub const CLIENT_SIZE: usize = CLIENT_WASM.len();

impl ClientHost {
    /// Links and pre-instantiates the embedded client component.
    /// Its requests leave through `exit`.
    pub fn new(engine: Arc<Engine>, exit: crate::egress::Exit) -> anyhow::Result<ClientHost> {
        let mut linker: Linker<ClientState> = Linker::new(&engine.wasm);
        wt(wasmtime_wasi::p2::add_to_linker_async(&mut linker))?;
        wt(wasmtime_wasi_http::p2::add_only_http_to_linker_async(
            &mut linker,
        ))?;
        wt(outbound::add_to_linker::<ClientState, HasSelf<ClientState>>(&mut linker, |s| s))?;
        let (component, sha256, _) = engine.cache.load(CLIENT_COMPONENT, CLIENT_WASM)?;
        let pre = wt(OutboundClientPre::new(wt(
            linker.instantiate_pre(&component)
        )?))?;
        Ok(ClientHost {
            engine,
            pre,
            exit,
            sha256,
        })
    }

    async fn instance(
        &self,
        target: Target,
        abort: CancellationToken,
    ) -> wasmtime::Result<(Store<ClientState>, OutboundClient)> {
        let mut trace = http::HeaderMap::new();
        crate::telemetry::trace::inject(&tracing::Span::current(), &mut trace);
        let rules = Rules {
            trace,
            bearer: target.bearer,
            origins: target.origins,
            timeout: Duration::from_millis(target.info.timeout_ms.max(1)),
            max_response_bytes: MAX_RESPONSE_BYTES,
            reach: target.reach,
            exit: self.exit.clone(),
        };
        let state = ClientState {
            table: ResourceTable::new(),
            wasi: WasiCtx::builder().build(),
            http: WasiHttpCtx::new(),
            hooks: Policy(rules),
            limits: self.engine.limits(),
            burst: Burst::default(),
            info: target.info,
            abort,
        };
        let mut store = self.engine.store(state);
        let client = self.pre.instantiate_async(&mut store).await?;
        Ok((store, client))
    }

    /// Fetches and validates the remote card; the card JSON.
    pub async fn discover(&self, target: Target) -> Result<serde_json::Value, String> {
        let span = call_span(&target.info, "discover", None);
        async move {
            let (mut store, client) = self
                .instance(target, CancellationToken::new())
                .await
                .map_err(trap)?;
            let card = client
                .a2a_edge_client()
                .call_discover(&mut store)
                .await
                .map_err(trap)?
                .map_err(describe)?;
            serde_json::from_str(&card).map_err(|e| format!("the remote card is not JSON: {e}"))
        }
        .instrument(span)
        .await
    }

    /// Runs one remote skill; the tool text, or the error to show.
    pub async fn call(
        &self,
        target: Target,
        req: CallRequest,
        abort: CancellationToken,
    ) -> Result<String, String> {
        let span = call_span(&target.info, "call", Some(&req.skill));
        let answer = async move {
            let (mut store, client) = self.instance(target, abort).await.map_err(trap)?;
            client
                .a2a_edge_client()
                .call_call(&mut store, &req)
                .await
                .map_err(trap)?
                .map_err(describe)
        }
        .instrument(span.clone())
        .await;
        if answer.is_err() {
            span.record("otel.status_code", "error");
        }
        answer
    }
}

/// The span of a call to a remote agent: the trace context its requests carry.
fn call_span(info: &ConnectionInfo, what: &str, skill: Option<&str>) -> tracing::Span {
    tracing::info_span!(
        "outbound",
        otel.name = %format!("{what} {}", info.id),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
        a2a_edge.connection = info.id.as_str(),
        a2a_edge.skill = crate::telemetry::trace::short(skill.unwrap_or_default()),
        server.address = %crate::egress::url_host(&info.agent_card_url).unwrap_or_default(),
    )
}

fn trap(e: wasmtime::Error) -> String {
    format!(
        "the outbound client component failed: {}",
        format!("{e:#}").lines().next().unwrap_or("trap")
    )
}

/// A call error as the message a user or a model reads.
pub fn describe(e: CallError) -> String {
    match e {
        CallError::Transport(m) => format!("the remote agent is unreachable: {m}"),
        CallError::Http((401 | 403, _)) => "the remote agent refused the credentials (HTTP 401/403): set the connection's token (`a2a-edge outbound auth ID`, or the panel's connection form)".into(),
        CallError::Http((status, body)) => format!("the remote agent answered HTTP {status}: {}", body.trim()),
        CallError::InvalidResponse(m) => format!("the remote agent's answer is not valid A2A: {m}"),
        CallError::RemoteFailed(m) => m,
        CallError::Aborted => "the call was aborted".into(),
    }
}
