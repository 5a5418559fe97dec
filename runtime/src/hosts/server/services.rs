//! What the server host shares with every request: the runtime services its capabilities reach,
//! and the invocation a request makes (the instance, how it arrived, from whom).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::context::CallNote;
use super::settle;
use crate::activity::Activity;
use crate::admission::Admission;
use crate::attachments::Attachments;
use crate::config::Provider;
use crate::events::EventHub;
use crate::holds::Holds;
use crate::instances::{Instance, RouteKind};
use crate::sessions::{Sessions, Toolbox};
use crate::store::Store as TaskStore;
use crate::telemetry::Metrics;

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
    /// Settlements of abandoned tasks waiting for the store.
    pub owed: Arc<settle::Owed>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The tools and secrets of session turns.
    pub toolbox: Arc<dyn Toolbox>,
    /// Provider shown on every card.
    pub provider: Option<Provider>,
    /// Emit the seed's error numbers (README "Configuration", `[protocol] legacyErrorCodes`).
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
    }
}
