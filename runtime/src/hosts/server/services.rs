//! What the server host shares with every request: the runtime services its capabilities reach,
//! and the invocation a request makes (the instance, how it arrived, from whom).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use std::sync::Mutex;

use super::handoff;
use crate::activity::Activity;
use crate::admission::Admission;
use crate::admission::StreamSlot;
use crate::attachments::Attachments;
use crate::config::Provider;
use crate::events::EventHub;
use crate::holds::Holds;
use crate::instances::{Instance, RouteKind};
use crate::responses::{Body, Framing, rpc_error};
use crate::sessions::{Sessions, Toolbox};
use crate::settlement::{Owed, Settle, Written};
use crate::store::Store as TaskStore;
use crate::telemetry::{Metrics, trace};

/// What a request turned out to be, as its component told the host: for the request log line.
#[derive(Clone, Default)]
pub struct CallNote(Arc<Mutex<Call>>);

/// The contents of a [`CallNote`].
#[derive(Clone, Debug, Default)]
pub struct Call {
    /// The A2A method.
    pub method: Option<String>,
    /// `ok`, or the error's reason.
    pub outcome: Option<String>,
    /// The first task the request read, created or changed.
    pub task_id: Option<String>,
    /// The span of the component's work, once it runs: what it notes is recorded there too.
    pub span: Option<tracing::Span>,
    /// The HTTP status the answer stands for where its own says nothing (a gRPC status travels
    /// in an HTTP 200).
    pub status: Option<u16>,
}

impl CallNote {
    /// What was noted so far.
    pub fn take(&self) -> Call {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// Records what is noted from now on on `span` too.
    pub fn trace(&self, span: &tracing::Span) {
        self.0.lock().unwrap().span = Some(span.clone());
    }

    /// Notes a task the request read (or, `wrote`, wrote), in `context` of `instance`: the first
    /// one is the request's, for the log and its span; the task's traces note the span.
    pub fn task(&self, instance: &str, id: &str, context: &str, wrote: bool) {
        let mut c = self.0.lock().unwrap();
        let first = c.task_id.is_none();
        c.task_id.get_or_insert_with(|| id.to_owned());
        let Some(span) = &c.span else {
            return;
        };
        if first {
            span.record("a2a.task.id", trace::short(id));
            span.record("a2a.context.id", trace::short(context));
        }
        if let (Some(ring), Some(at)) = (trace::ring(), trace::position(span)) {
            ring.touched(instance, id, &at, wrote);
        }
    }

    /// Notes why the request was refused before any component ran (the outcome).
    pub fn refused(&self, outcome: &str) {
        self.0.lock().unwrap().outcome = Some(outcome.to_owned());
    }

    /// Notes a call of `method` that ended with an error status of `binding_status`'s HTTP
    /// meaning: its outcome, unless a refusal before it noted one (which names the check that
    /// failed) or the component noted its own.
    pub fn ended(&self, method: &str, outcome: &str, binding_status: u16) {
        let noted = self.0.lock().unwrap().outcome.clone();
        self.call(method, noted.as_deref().unwrap_or(outcome));
        self.0.lock().unwrap().status = Some(binding_status);
    }

    /// Notes the method and its outcome (the span names them as the metrics count them).
    pub fn call(&self, method: &str, outcome: &str) {
        let mut c = self.0.lock().unwrap();
        (c.method, c.outcome) = (Some(method.to_owned()), Some(outcome.to_owned()));
        if let Some(span) = &c.span {
            let (method, _) = crate::telemetry::method_label(method);
            trace::rename(span, method);
            span.record("a2a.method.name", method);
            if outcome != "ok" {
                span.record(
                    "error.type",
                    crate::telemetry::outcome_label(outcome).as_str(),
                );
            }
        }
    }
}

/// What a request's capabilities keep for the host, shared with it: the tasks it writes (settled
/// if it leaves them running), where a stream is handed off, the contexts it works in, and the
/// caller it records.
#[derive(Default)]
pub struct Books {
    /// The tasks the invocation writes.
    pub written: Written,
    /// Where a stream is handed off.
    pub hand_off: handoff::Slot,
    /// The contexts the request works in.
    pub contexts: crate::activity::Contexts,
    /// The caller (`<address>@<instance>`).
    pub peer_id: String,
}

/// A capability context next to the store's resource table (for interfaces with resources).
pub struct View<'a, C> {
    pub(super) ctx: &'a mut C,
    pub(super) table: &'a mut wasmtime::component::ResourceTable,
}

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
    /// The guard of push-notification webhooks.
    pub webhooks: Arc<crate::push::Webhooks>,
    /// Peers and open streams.
    pub activity: Arc<Activity>,
    /// Message ids reserved by the requests deciding them.
    pub holds: Holds,
    /// Settlements of tasks left running that wait for the store.
    pub owed: Arc<Owed>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The tools and secrets of session turns.
    pub toolbox: Arc<dyn Toolbox>,
    /// Provider shown on every card.
    pub provider: Option<Provider>,
    /// Emit the seed's error numbers (docs/serving.md "Configuration",
    /// `[protocol] legacyErrorCodes`).
    pub legacy_error_codes: bool,
    /// How long a request waits for a free component instance.
    pub instance_wait: Duration,
    /// Component instances alive at once.
    pub max_instances: u32,
    /// Idle instances of the built-in component kept for the next request.
    pub warm_instances: u32,
    /// Open SSE streams of all instances.
    pub max_streams: u32,
}

impl Services {
    /// Settling the tasks left running, over these services.
    pub fn settle(&self) -> Settle {
        Settle::new(
            self.store.clone(),
            self.sessions.clone(),
            self.events.clone(),
            self.activity.clone(),
            self.owed.clone(),
        )
    }

    /// The open-stream slot a request to `instance` that `streams` holds from the start: over
    /// the cap it is refused at once (429, framed as `framing`), never left to exhaust what other
    /// requests need.
    pub fn stream_slot(
        &self,
        instance: &Instance,
        streams: bool,
        framing: Framing,
    ) -> Result<Option<StreamSlot>, http::Response<Body>> {
        if !streams {
            return Ok(None);
        }
        let limits = &instance.record.limits;
        match self.admission.acquire_stream(
            &instance.record.id,
            limits.max_streams,
            self.max_streams,
        ) {
            Ok(slot) => Ok(Some(slot)),
            Err(why) => {
                self.metrics.rejection("streams");
                let e = a2a_protocol::RpcError {
                    retry_after_ms: Some(1000),
                    ..a2a_protocol::RpcError::new(a2a_protocol::ErrorKind::RateLimited, why)
                };
                Err(rpc_error(framing, 429, &e, self.legacy_error_codes))
            }
        }
    }
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
    /// Who it is (docs/auth.md "Authentication"); none for the runtime's own calls, which see every
    /// principal's tasks.
    pub caller: Option<crate::identity::Caller>,
    /// What the component tells of the request, for the log.
    pub note: CallNote,
}

#[cfg(test)]
/// Services over an in-memory store and `data_dir`, for the capabilities' unit tests.
pub fn test_services(data_dir: &std::path::Path) -> Services {
    let attachments = crate::config::AttachmentSettings {
        enabled: true,
        ..Default::default()
    };
    Services {
        store: Arc::new(crate::store::memory::MemoryStore::default()),
        events: Arc::default(),
        sessions: Arc::new(Sessions::new(&[], None, &crate::egress::Exit::direct())),
        admission: Arc::default(),
        attachments: Arc::new(Attachments::new(data_dir, attachments)),
        webhooks: Arc::new(crate::push::Webhooks::new(true, Duration::from_secs(1))),
        activity: Arc::default(),
        holds: Holds::default(),
        owed: Arc::default(),
        metrics: Arc::default(),
        toolbox: Arc::new(crate::sessions::NoHost),
        provider: None,
        legacy_error_codes: false,
        instance_wait: Duration::from_millis(10),
        max_instances: 1,
        warm_instances: 1,
        max_streams: 10,
    }
}

#[cfg(test)]
/// An instance `id` of the built-in component on the echo preset, with the bearer token `token`
/// (its secret named `A2A_INBOUND_X`), for the capabilities' unit tests.
pub fn test_instance(id: &str, token: Option<&str>) -> Arc<Instance> {
    use crate::engine::registry::DEFAULT_COMPONENT;
    use crate::records::{InstanceRecord, Limits};
    use crate::sessions::preset::{Backend, Preset};
    let record = InstanceRecord {
        name: id.to_uppercase(),
        version: "1".into(),
        auth_token_env: token.map(|_| "A2A_INBOUND_X".into()),
        updated_at: 2,
        ..InstanceRecord::new(id, "echo".into(), DEFAULT_COMPONENT, Limits::default(), 1)
    };
    Arc::new(Instance {
        record,
        preset: Preset::builtin("echo", "Echo", "", Backend::Echo),
        token: token.map(Into::into),
        endpoint_url: format!("http://h/a2a/{id}"),
        grpc_url: Some("http://h:80".into()),
        generation: crate::instances::next_generation(),
    })
}
