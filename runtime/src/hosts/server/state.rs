//! The data of one request's store: WASI, WASI HTTP (with every outbound request refused) and
//! one capability context per `a2a:edge` interface, prepared from the shared services; and the
//! linker that reaches each interface through its own context.

use std::time::Instant;

use wasmtime::component::{HasData, HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{
    Error as HttpError, RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks,
    WasiHttpView,
};

use super::services::{Books, Invocation, Services, View};
use super::{
    admission, attachments, bindings, context, events, exchange, handoff, push, sessions, storage,
};
use crate::engine::{Burst, Metered, wt};

/// The capabilities of one request's store, one per `a2a:edge` interface.
struct Capabilities {
    exchange: exchange::ExchangeCtx,
    context: context::ContextCtx,
    storage: storage::StorageCtx,
    events: events::EventsCtx,
    sessions: sessions::SessionsCtx,
    admission: admission::AdmissionCtx,
    attachments: attachments::AttachmentsCtx,
    push: push::PushCtx,
}

/// An instance is kept only while its memory stays this small: one that a large request grew is
/// dropped, so idle instances never hold more than `cap` times this.
pub const KEEP_MEMORY: usize = 8 << 20;

/// The data of one request's store.
pub struct State {
    table: ResourceTable,
    wasi: WasiCtx,
    http: WasiHttpCtx,
    hooks: NoOutbound,
    limits: crate::engine::Limits,
    burst: Burst,
    caps: Capabilities,
}

impl State {
    /// Whether the instance in this store may serve another request: its invocation left no
    /// resource in the table that the next request could name, and its memory stayed small.
    pub fn reusable(&self) -> bool {
        self.table.is_empty() && self.limits.grown_to() <= KEEP_MEMORY
    }

    /// Ends the request this store served, before its instance is kept: what the request
    /// claims for itself (held message ids) is released now, not when the next request renews
    /// the store or the idle instance expires.
    pub fn end(&mut self) {
        self.caps.storage.end();
    }

    /// The request's exchange capability.
    pub fn exchange(&mut self) -> &mut exchange::ExchangeCtx {
        &mut self.caps.exchange
    }

    /// This store's data for the next request on its instance: `next`'s, keeping the limits
    /// (which carry what the instance's memory grew to).
    pub fn renew(&mut self, next: State) {
        let State { limits, .. } = std::mem::replace(self, next);
        self.limits = limits;
    }
}

impl Metered for State {
    fn burst(&mut self) -> &mut Burst {
        &mut self.burst
    }
    fn limits(&mut self) -> &mut crate::engine::Limits {
        &mut self.limits
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

/// The server component may not call out: every outbound request is refused.
struct NoOutbound;

/// What a request sent through WASI HTTP resolves to.
type Sent = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

impl WasiHttpHooks for NoOutbound {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _: Option<RequestOptions>,
        _: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        tracing::warn!(uri = %request.uri(), "refused an outbound request from a component: outbound HTTP is not allowed here");
        Box::new(async { Err(ErrorCode::HttpRequestDenied.into()) })
    }
}

/// The [`HasData`] of a [`View`].
struct WithTable<C>(std::marker::PhantomData<C>);

impl<C: Send + 'static> HasData for WithTable<C> {
    type Data<'a> = View<'a, C>;
}

/// The linker of the server world: WASI, WASI HTTP (without the default outgoing handler) and
/// every `a2a:edge` interface on its capability.
pub fn link(engine: &wasmtime::Engine) -> anyhow::Result<Linker<State>> {
    let mut linker: Linker<State> = Linker::new(engine);
    wt(wasmtime_wasi::p2::add_to_linker_async(&mut linker))?;
    wt(wasmtime_wasi_http::p2::add_only_http_to_linker_async(
        &mut linker,
    ))?;
    // An interface on its capability alone, or (`table`) beside the store's resource table.
    macro_rules! link {
        ($interface:ident, $field:ident: $ctx:ty) => {
            wt(bindings::$interface::add_to_linker::<State, HasSelf<$ctx>>(
                &mut linker,
                |s| &mut s.caps.$field,
            ))?
        };
        ($interface:ident, $field:ident: $ctx:ty, table) => {
            wt(
                bindings::$interface::add_to_linker::<State, WithTable<$ctx>>(&mut linker, |s| {
                    View {
                        ctx: &mut s.caps.$field,
                        table: &mut s.table,
                    }
                }),
            )?
        };
    }
    link!(exchange, exchange: exchange::ExchangeCtx, table);
    link!(request_context, context: context::ContextCtx);
    link!(storage, storage: storage::StorageCtx);
    link!(push, push: push::PushCtx);
    link!(attachments, attachments: attachments::AttachmentsCtx);
    link!(events, events: events::EventsCtx, table);
    link!(sessions, sessions: sessions::SessionsCtx, table);
    link!(admission, admission: admission::AdmissionCtx, table);
    Ok(linker)
}

/// A request's store data and what the host keeps of it.
pub struct Prepared {
    /// The store data.
    pub state: State,
    /// The tasks the invocation writes.
    pub written: crate::settlement::Written,
    /// Where a stream is handed off.
    pub hand_off: handoff::Slot,
    /// The contexts the request works in.
    pub contexts: crate::activity::Contexts,
}

/// The store data of one request: each capability prepares itself from the services, the
/// invocation and the books.
pub fn prepare(
    s: &Services,
    call: &Invocation,
    writer: crate::store::Writer,
    started: Instant,
    limits: crate::engine::Limits,
) -> Prepared {
    let books = Books {
        peer_id: crate::activity::peer_id(call.peer.ip(), &call.instance.record.id),
        ..Books::default()
    };
    let context = context::ContextCtx::prepare(s, call, &books, started);
    let caps = Capabilities {
        exchange: exchange::ExchangeCtx::prepare(&context, started),
        context,
        storage: storage::StorageCtx::prepare(s, call, &books, writer),
        events: events::EventsCtx::prepare(s, call, &books),
        sessions: sessions::SessionsCtx::prepare(s, call),
        admission: admission::AdmissionCtx::prepare(s, call),
        attachments: attachments::AttachmentsCtx::prepare(s),
        push: push::PushCtx::prepare(s, call),
    };
    let state = State {
        table: ResourceTable::new(),
        wasi: WasiCtx::builder()
            .monotonic_clock(exchange::Since(started))
            .build(),
        http: WasiHttpCtx::new(),
        hooks: NoOutbound,
        limits,
        burst: Burst::default(),
        caps,
    };
    Prepared {
        state,
        written: books.written,
        hand_off: books.hand_off,
        contexts: books.contexts,
    }
}
