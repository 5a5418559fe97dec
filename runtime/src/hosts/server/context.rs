//! `a2a:edge/request-context`: the instance record (never its secret), the peer, the route; and
//! what the component tells of the request (its method and outcome) for the metrics and the log.

use std::sync::Arc;
use std::time::Instant;

use super::bindings::request_context::{
    Host, InstanceInfo, Limits, OidcScheme, PeerInfo, RouteKind, SecurityScheme, Skill,
};
use super::services::{Books, CallNote, Invocation, Route, Services};
use crate::identity::{API_KEY_HEADER_NAME, Caller, Scheme, schemes};
use crate::instances::{Instance, RouteKind as Kind};
use crate::records::InstanceRecord;
use crate::telemetry::Metrics;

/// The request-context capability.
pub struct ContextCtx {
    info: Arc<InstanceInfo>,
    /// Changes with what `info` holds ([`stamp`]).
    stamp: u64,
    peer: PeerInfo,
    route: RouteKind,
    recorder: Recorder,
}

/// Where the component's account of its request goes: the metrics and the request's log line.
#[derive(Clone)]
pub struct Recorder {
    instance_id: String,
    metrics: Arc<Metrics>,
    note: CallNote,
    started: Instant,
}

impl Recorder {
    /// The request was `method` and ended `outcome`.
    pub fn call(&self, method: &str, outcome: &str) {
        self.metrics.request(&self.instance_id, method, outcome);
        self.metrics.latency(method, self.started.elapsed());
        self.note.call(method, outcome);
    }
}

/// The skills a named client with skills of its own is limited to (docs/auth.md
/// "Authentication"); empty: every skill.
fn allowed(caller: Option<&Caller>) -> &[String] {
    caller
        .and_then(|c| c.key.as_ref())
        .map(|k| k.skills.as_slice())
        .unwrap_or_default()
}

/// What [`info`] is made of, as a number: the instance's build and the caller's skills (the
/// services it reads are the process's).
fn stamp(instance: &Instance, caller: Option<&Caller>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (instance.generation, allowed(caller)).hash(&mut h);
    h.finish()
}

/// The instance record as the card builder reads it, for `caller`: a named client with skills
/// of its own sees only those (docs/auth.md "Authentication").
fn info(instance: &Instance, s: &Services, caller: Option<&Caller>) -> InstanceInfo {
    let r = &instance.record;
    let allowed = allowed(caller);
    InstanceInfo {
        id: r.id.clone(),
        name: r.name.clone(),
        description: r.description.clone(),
        version: r.version.clone(),
        endpoint_url: instance.endpoint_url.clone(),
        grpc_url: instance.grpc_url.clone(),
        preset: r.preset.clone(),
        skills: instance
            .preset
            .skills
            .iter()
            .filter(|s| allowed.is_empty() || allowed.contains(&s.id))
            .map(|s| Skill {
                id: s.id.clone(),
                name: s.name.clone().unwrap_or_else(|| s.id.clone()),
                description: s.description.clone(),
                tags: s.tags.clone(),
            })
            .collect(),
        security: security(r),
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
        compat03: r.compat03,
        updated_at: r.updated_at,
    }
}

/// The schemes `r` takes, as its card announces them.
fn security(r: &InstanceRecord) -> Vec<SecurityScheme> {
    schemes(r)
        .map(|s| match s {
            Scheme::Bearer => SecurityScheme::Bearer,
            Scheme::ApiKey => SecurityScheme::ApiKey(API_KEY_HEADER_NAME.into()),
            Scheme::Oidc(o) => SecurityScheme::OpenidConnect(OidcScheme {
                discovery_url: crate::identity::oidc::discovery_url(&o.issuer),
                scopes: o.scopes.clone(),
            }),
            Scheme::Mtls => SecurityScheme::MutualTls,
        })
        .collect()
}

impl ContextCtx {
    /// The context of `call`, which started at `started`.
    pub fn prepare(s: &Services, call: &Invocation, books: &Books, started: Instant) -> ContextCtx {
        let route = match call.route {
            Route::Http(Kind::Card) => RouteKind::Card,
            Route::Http(Kind::Rpc) => RouteKind::Rpc,
            Route::Http(Kind::Rest) => RouteKind::Rest,
            Route::Internal => RouteKind::Internal,
        };
        let peer = PeerInfo {
            id: books.peer_id.clone(),
            source: call.peer.to_string(),
        };
        ContextCtx {
            info: Arc::new(info(&call.instance, s, call.caller.as_ref())),
            stamp: stamp(&call.instance, call.caller.as_ref()),
            peer,
            route,
            recorder: Recorder {
                instance_id: call.instance.record.id.clone(),
                metrics: s.metrics.clone(),
                note: call.note.clone(),
                started,
            },
        }
    }

    /// The instance's info and its stamp.
    pub fn info(&self) -> (&Arc<InstanceInfo>, u64) {
        (&self.info, self.stamp)
    }

    /// The route the request hit.
    pub fn route_kind(&self) -> RouteKind {
        self.route
    }

    /// Where the component's account of the request goes.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }
}

impl Host for ContextCtx {
    fn instance(&mut self) -> wasmtime::Result<InstanceInfo> {
        Ok((*self.info).clone())
    }

    fn peer(&mut self) -> wasmtime::Result<PeerInfo> {
        Ok(self.peer.clone())
    }

    fn route(&mut self) -> wasmtime::Result<RouteKind> {
        Ok(self.route)
    }

    fn record_call(&mut self, method: String, outcome: String) -> wasmtime::Result<()> {
        self.recorder.call(&method, &outcome);
        Ok(())
    }

    fn record_rejection(&mut self, reason: String) -> wasmtime::Result<()> {
        self.recorder.metrics.rejection(&reason);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Gauges;

    /// A component keeps the info while its stamp stays: the stamp changes with every build of
    /// the instance (a changed record, preset or reload), never between two requests of one.
    #[test]
    fn the_info_stamp_changes_with_the_instance_build() {
        let first = super::super::services::test_instance("x", None);
        let rebuilt = super::super::services::test_instance("x", None);
        assert_eq!(stamp(&first, None), stamp(&first, None));
        assert_ne!(stamp(&first, None), stamp(&rebuilt, None));
    }

    #[test]
    fn the_guest_reads_the_record_never_its_secret_and_its_calls_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        let services = super::super::services::test_services(dir.path());
        let instance = super::super::services::test_instance("x", Some("s3cret-token-value"));
        let note = CallNote::default();
        let call = Invocation {
            instance: instance.clone(),
            route: Route::Http(Kind::Rpc),
            peer: "10.0.0.9:5000".parse().unwrap(),
            caller: None,
            note: note.clone(),
        };
        let books = Books {
            peer_id: "10.0.0.9@x".into(),
            ..Books::default()
        };
        let mut ctx = ContextCtx::prepare(&services, &call, &books, Instant::now());
        let info = ctx.instance().unwrap();
        assert!(matches!(info.security.as_slice(), [SecurityScheme::Bearer]) && info.attachments);
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
