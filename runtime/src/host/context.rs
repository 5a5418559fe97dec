//! `a2a:edge/request-context`: the instance record (never its secret), the peer, the route.

use super::bindings::request_context::{self as rc, Host, InstanceInfo, Limits, PeerInfo, RouteKind, Skill};
use super::{EdgeView, Route};
use crate::instances::RouteKind as Kind;

impl Host for EdgeView<'_> {
    fn instance(&mut self) -> wasmtime::Result<InstanceInfo> {
        let i = &self.req.instance;
        let app = &self.req.app;
        let r = &i.record;
        Ok(InstanceInfo {
            id: r.id.clone(),
            name: r.name.clone(),
            description: r.description.clone(),
            version: r.version.clone(),
            endpoint_url: i.endpoint_url.clone(),
            preset: r.preset.clone(),
            skills: i
                .preset
                .skills
                .iter()
                .map(|s| Skill { id: s.id.clone(), name: s.name.clone().unwrap_or_else(|| s.id.clone()), description: s.description.clone(), tags: s.tags.clone() })
                .collect(),
            auth_required: r.auth_token_env.is_some(),
            attachments: app.attachments.enabled(),
            provider_organization: app.config.provider.as_ref().map(|p| p.organization.clone()),
            provider_url: app.config.provider.as_ref().map(|p| p.url.clone()),
            limits: Limits {
                max_body_bytes: r.limits.max_body_bytes,
                execution_timeout_ms: r.limits.execution_timeout_ms,
                max_concurrent_tasks: r.limits.max_concurrent_tasks,
                keep_alive_ms: r.limits.keep_alive_ms.max(100),
                max_parts: r.limits.max_parts,
            },
            legacy_error_codes: app.config.protocol.legacy_error_codes,
            updated_at: r.updated_at,
        })
    }

    fn peer(&mut self) -> wasmtime::Result<PeerInfo> {
        Ok(PeerInfo { id: self.req.peer_id.clone(), source: self.req.peer.to_string() })
    }

    fn record_call(&mut self, method: String, outcome: String) -> wasmtime::Result<()> {
        let metrics = &self.req.app.metrics;
        metrics.request(&self.req.instance.record.id, &method, &outcome);
        self.req.note.with(|c| {
            c.outcome = Some(outcome.clone());
            c.method = Some(method.clone());
        });
        if method == "SendMessage" {
            metrics.send_latency(self.req.started.elapsed());
        }
        Ok(())
    }

    fn record_rejection(&mut self, reason: String) -> wasmtime::Result<()> {
        self.req.app.metrics.rejection(&reason);
        Ok(())
    }

    fn route(&mut self) -> wasmtime::Result<RouteKind> {
        Ok(match self.req.route {
            Route::Http(Kind::Card) => rc::RouteKind::Card,
            Route::Http(Kind::Rpc) => rc::RouteKind::Rpc,
            Route::Internal => rc::RouteKind::Internal,
        })
    }
}
