//! Inbound instances: records assembled with their preset and resolved token into the runtime
//! form requests use, and the route table over them.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::{Config, InstanceDecl, Preset};
use crate::store::InstanceRecord;

/// The name of the built-in A2A server component.
pub const DEFAULT_COMPONENT: &str = "a2a-server";

/// An instance ready to serve: immutable, swapped whole on every change.
pub struct Instance {
    /// The stored record.
    pub record: InstanceRecord,
    /// Its preset.
    pub preset: Preset,
    /// The resolved bearer token (never logged, never shown).
    pub token: Option<String>,
    /// The JSON-RPC endpoint URL cards announce.
    pub endpoint_url: String,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance").field("id", &self.record.id).field("token", &self.token.as_ref().map(|_| "<set>")).finish()
    }
}

/// Which route of an instance a path hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// The AgentCard.
    Card,
    /// The JSON-RPC endpoint.
    Rpc,
}

/// Enabled instances by endpoint path.
#[derive(Default)]
pub struct Routes {
    by_path: HashMap<String, Arc<Instance>>,
    well_known: Option<Arc<Instance>>,
}

impl Routes {
    /// The table over `instances` (disabled ones get no routes).
    pub fn new(instances: &[Arc<Instance>], well_known: Option<&str>) -> Routes {
        let enabled = instances.iter().filter(|i| i.record.enabled);
        Routes {
            by_path: enabled.clone().map(|i| (i.record.endpoint_path.clone(), i.clone())).collect(),
            well_known: well_known.and_then(|id| enabled.clone().find(|i| i.record.id == id).cloned()),
        }
    }

    /// The instance and route a path hits: `<endpoint>` or `<endpoint>/` is the JSON-RPC endpoint,
    /// `<endpoint>/agent-card.json` the card; the well-known instance also answers
    /// `/.well-known/agent-card.json` and `/`.
    pub fn resolve(&self, path: &str) -> Option<(Arc<Instance>, RouteKind)> {
        if let Some(wk) = &self.well_known {
            match path {
                "/.well-known/agent-card.json" => return Some((wk.clone(), RouteKind::Card)),
                "/" => return Some((wk.clone(), RouteKind::Rpc)),
                _ => {}
            }
        }
        if let Some(base) = path.strip_suffix("/agent-card.json") {
            return self.by_path.get(base).map(|i| (i.clone(), RouteKind::Card));
        }
        let trimmed = if path.len() > 1 { path.strip_suffix('/').unwrap_or(path) } else { path };
        self.by_path.get(trimmed).map(|i| (i.clone(), RouteKind::Rpc))
    }
}

/// `slug(name)`: lowercase, runs outside `[a-z0-9]` become `-`, trimmed, `server` when empty.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_owned();
    if out.is_empty() { "server".into() } else { out }
}

/// A new id `<slug(name)>-<8 hex>`.
pub fn new_id(name: &str) -> String {
    format!("{}-{}", slug(name), &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Normalises an endpoint path: must start with `/`, no trailing `/`, not under the control
/// surface.
pub fn normalize_endpoint(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!("endpointPath {path:?} must start with /"));
    }
    if path.chars().any(|c| c.is_whitespace() || c == '?' || c == '#') {
        return Err(format!("endpointPath {path:?} must not contain spaces, ? or #"));
    }
    let p = path.trim_end_matches('/');
    let p = if p.is_empty() { "/" } else { p };
    for reserved in ["/a2a/api", "/a2a/ui"] {
        if p == reserved || p.starts_with(&format!("{reserved}/")) {
            return Err(format!("endpointPath {p:?} collides with the control surface {reserved}"));
        }
    }
    if p == "/" || p == "/.well-known" || p.starts_with("/.well-known/") {
        return Err(format!("endpointPath {p:?} is reserved"));
    }
    Ok(p.to_owned())
}

/// The record of a declared instance.
pub fn record_from_decl(d: &InstanceDecl, config: &Config, now: u64) -> Result<InstanceRecord, String> {
    let id = d.id.clone().unwrap_or_else(|| new_id(&d.name));
    let endpoint_path = normalize_endpoint(&d.endpoint_path.clone().unwrap_or_else(|| format!("/a2a/{id}")))?;
    Ok(InstanceRecord {
        id,
        name: d.name.clone(),
        description: d.description.clone(),
        version: d.version.clone(),
        endpoint_path,
        preset: d.preset.clone().unwrap_or_else(|| default_preset(config)),
        auth_token_env: d.auth_token_env.clone(),
        enabled: d.enabled,
        component: d.component.clone().unwrap_or_else(|| DEFAULT_COMPONENT.into()),
        limits: d.limits.unwrap_or(config.limits),
        created_at: now,
        updated_at: now,
    })
}

/// The id of the default preset.
pub fn default_preset(config: &Config) -> String {
    config.all_presets().into_iter().find(|p| p.default).map_or_else(|| "echo".into(), |p| p.id)
}

/// The instance a newcomer gets on a first start without config: `demo` on the echo preset.
pub fn demo(config: &Config, now: u64) -> InstanceRecord {
    let decl = InstanceDecl {
        id: Some("demo".into()),
        name: "demo".into(),
        description: "Echo agent: replies with what you send.".into(),
        version: "0.1.0".into(),
        endpoint_path: None,
        preset: Some(default_preset(config)),
        auth_token_env: None,
        enabled: true,
        component: None,
        limits: None,
    };
    record_from_decl(&decl, config, now).expect("the demo declaration is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug("Reports Agent!"), "reports-agent");
        assert_eq!(slug("--A__b--"), "a-b");
        assert_eq!(slug("远程"), "server");
        let id = new_id("My Bot");
        assert!(id.starts_with("my-bot-") && id.len() == "my-bot-".len() + 8, "{id}");
    }

    #[test]
    fn endpoint_paths() {
        assert_eq!(normalize_endpoint("/a2a/x/").unwrap(), "/a2a/x");
        assert!(normalize_endpoint("a2a/x").is_err());
        assert!(normalize_endpoint("/a2a/api").is_err());
        assert!(normalize_endpoint("/a2a/api/x").is_err());
        assert!(normalize_endpoint("/a2a/ui").is_err());
        assert!(normalize_endpoint("/a2a/apix").is_ok());
        assert!(normalize_endpoint("/").is_err());
    }
}
