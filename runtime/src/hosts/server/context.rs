//! `a2a:edge/request-context`: the instance record (never its secret), the peer, the route; and
//! what the component tells of the request (its method and outcome) for the metrics and the log.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::bindings::request_context::{Host, InstanceInfo, Limits, PeerInfo, RouteKind, Skill};
use super::{Invocation, Route, Services};
use crate::instances::{Instance, RouteKind as Kind};
use crate::telemetry::Metrics;

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
}

impl CallNote {
    /// What was noted so far.
    pub fn take(&self) -> Call {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// Notes the first task the request read or wrote.
    pub fn task(&self, id: &str) {
        self.0
            .lock()
            .unwrap()
            .task_id
            .get_or_insert_with(|| id.to_owned());
    }

    /// Notes why the request was refused before any component ran (the outcome).
    pub fn refused(&self, outcome: &str) {
        self.0.lock().unwrap().outcome = Some(outcome.to_owned());
    }

    /// Notes the method and its outcome.
    pub fn call(&self, method: &str, outcome: &str) {
        let mut c = self.0.lock().unwrap();
        (c.method, c.outcome) = (Some(method.to_owned()), Some(outcome.to_owned()));
    }
}

/// The request-context capability.
pub struct ContextCtx {
    info: InstanceInfo,
    peer: PeerInfo,
    route: RouteKind,
    metrics: Arc<Metrics>,
    note: CallNote,
    started: Instant,
}

/// The instance record as the card builder reads it.
fn info(instance: &Instance, s: &Services) -> InstanceInfo {
    let r = &instance.record;
    InstanceInfo {
        id: r.id.clone(),
        name: r.name.clone(),
        description: r.description.clone(),
        version: r.version.clone(),
        endpoint_url: instance.endpoint_url.clone(),
        preset: r.preset.clone(),
        skills: instance
            .preset
            .skills
            .iter()
            .map(|s| Skill {
                id: s.id.clone(),
                name: s.name.clone().unwrap_or_else(|| s.id.clone()),
                description: s.description.clone(),
                tags: s.tags.clone(),
            })
            .collect(),
        auth_required: r.auth_token_env.is_some(),
        attachments: s.attachments.enabled(),
        push_notifications: r.push_notifications,
        provider_organization: s.provider.as_ref().map(|p| p.organization.clone()),
        provider_url: s.provider.as_ref().map(|p| p.url.clone()),
        limits: Limits {
            max_body_bytes: r.limits.max_body_bytes,
            execution_timeout_ms: r.limits.execution_timeout_ms,
            max_concurrent_tasks: r.limits.max_concurrent_tasks,
            keep_alive_ms: r.limits.keep_alive_ms.max(100),
            max_parts: r.limits.max_parts,
        },
        legacy_error_codes: s.legacy_error_codes,
        updated_at: r.updated_at,
    }
}

impl ContextCtx {
    /// The context of one call of `instance`.
    pub fn new(
        instance: Arc<Instance>,
        s: &Services,
        call: &Invocation,
        peer_id: String,
        started: Instant,
    ) -> ContextCtx {
        let route = match call.route {
            Route::Http(Kind::Card) => RouteKind::Card,
            Route::Http(Kind::Rpc) => RouteKind::Rpc,
            Route::Http(Kind::Rest) => RouteKind::Rest,
            Route::Internal => RouteKind::Internal,
        };
        let peer = PeerInfo {
            id: peer_id,
            source: call.peer.to_string(),
        };
        ContextCtx {
            info: info(&instance, s),
            peer,
            route,
            metrics: s.metrics.clone(),
            note: call.note.clone(),
            started,
        }
    }
}

impl Host for ContextCtx {
    fn instance(&mut self) -> wasmtime::Result<InstanceInfo> {
        Ok(self.info.clone())
    }

    fn peer(&mut self) -> wasmtime::Result<PeerInfo> {
        Ok(self.peer.clone())
    }

    fn route(&mut self) -> wasmtime::Result<RouteKind> {
        Ok(self.route)
    }

    fn record_call(&mut self, method: String, outcome: String) -> wasmtime::Result<()> {
        self.metrics.request(&self.info.id, &method, &outcome);
        self.metrics.latency(&method, self.started.elapsed());
        self.note.call(&method, &outcome);
        Ok(())
    }

    fn record_rejection(&mut self, reason: String) -> wasmtime::Result<()> {
        self.metrics.rejection(&reason);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{InstanceRecord, Limits};
    use crate::sessions::preset::{Backend, Preset};
    use crate::telemetry::Gauges;

    #[test]
    fn the_guest_reads_the_record_never_its_secret_and_its_calls_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let services = super::super::services::test_services(dir.path());
        let record = InstanceRecord {
            id: "x".into(),
            name: "X".into(),
            description: String::new(),
            version: "1".into(),
            endpoint_path: "/a2a/x".into(),
            preset: "echo".into(),
            auth_token_env: Some("A2A_INBOUND_X".into()),
            enabled: true,
            push_notifications: true,
            component: "a2a-server".into(),
            limits: Limits::default(),
            created_at: 1,
            updated_at: 2,
        };
        let preset = Preset::builtin("echo", "Echo", "", Backend::Echo);
        let token = Some("s3cret-token-value".into());
        let instance = Arc::new(Instance {
            record,
            preset,
            token,
            endpoint_url: "http://h/a2a/x".into(),
        });
        let note = CallNote::default();
        let call = Invocation {
            instance: instance.clone(),
            route: Route::Http(Kind::Rpc),
            peer: "10.0.0.9:5000".parse().unwrap(),
            note: note.clone(),
        };
        let mut ctx = ContextCtx::new(
            instance,
            &services,
            &call,
            "10.0.0.9@x".into(),
            Instant::now(),
        );
        let info = ctx.instance().unwrap();
        assert!(info.auth_required && info.attachments);
        assert_eq!(
            (info.endpoint_url.as_str(), info.updated_at),
            ("http://h/a2a/x", 2)
        );
        assert!(
            !format!("{info:?}").contains("s3cret"),
            "the token never reaches the guest"
        );
        assert!(matches!(ctx.route().unwrap(), RouteKind::Rpc));
        assert_eq!(ctx.peer().unwrap().source, "10.0.0.9:5000");
        ctx.record_call("SendMessage".into(), "ok".into()).unwrap();
        ctx.record_rejection("skill".into()).unwrap();
        let noted = note.take();
        assert_eq!(
            (noted.method.as_deref(), noted.outcome.as_deref()),
            (Some("SendMessage"), Some("ok"))
        );
        let m = services.metrics.json(&Gauges::default());
        assert_eq!(
            (
                m["sendMessageLatency"]["count"].as_u64(),
                m["gateRejections"]["skill"].as_u64()
            ),
            (Some(1), Some(1))
        );
    }
}
