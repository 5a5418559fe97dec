//! Inbound instances: records assembled with their preset and resolved token into the runtime
//! form requests use, and the route table over them.

use std::collections::HashMap;
use std::sync::Arc;

pub use crate::engine::registry::DEFAULT_COMPONENT;
use crate::records::InstanceRecord;
use crate::sessions::preset::Preset;

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
    /// The gRPC interface URL cards announce, if any (`[grpc]`).
    pub grpc_url: Option<String>,
    /// This build's number, never another's in this process ([`next_generation`]): what
    /// components see of it changes only with it.
    pub generation: u64,
}

/// A number no [`Instance`] built before had.
pub fn next_generation() -> u64 {
    static BUILT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Instance {
    /// The ids of the skills its card announces.
    pub fn announced_skills(&self) -> Vec<String> {
        if self.preset.skills.is_empty() {
            return vec![a2a_protocol::card::DEFAULT_SKILL.to_owned()];
        }
        self.preset.skills.iter().map(|s| s.id.clone()).collect()
    }
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("id", &self.record.id)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// Which route of an instance a path hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// The AgentCard.
    Card,
    /// The JSON-RPC endpoint.
    Rpc,
    /// The HTTP+JSON binding: any other path below the endpoint.
    Rest,
}

/// Enabled instances by endpoint path.
#[derive(Default)]
pub struct Routes {
    by_path: HashMap<String, Arc<Instance>>,
    by_id: HashMap<String, Arc<Instance>>,
    well_known: Option<Arc<Instance>>,
    /// The largest body limit of any routed instance.
    max_body_bytes: u64,
}

impl Routes {
    /// The table over `instances` (disabled ones get no routes).
    pub fn new(instances: &[Arc<Instance>], well_known: Option<&str>) -> Routes {
        let enabled = instances.iter().filter(|i| i.record.enabled);
        Routes {
            by_path: enabled
                .clone()
                .map(|i| (i.record.endpoint_path.clone(), i.clone()))
                .collect(),
            by_id: enabled
                .clone()
                .map(|i| (i.record.id.clone(), i.clone()))
                .collect(),
            max_body_bytes: enabled
                .clone()
                .map(|i| i.record.limits.max_body_bytes)
                .max()
                .unwrap_or(0),
            well_known: well_known
                .and_then(|id| enabled.clone().find(|i| i.record.id == id).cloned()),
        }
    }

    /// The instance a gRPC request's `tenant` names; the well-known instance when it names none.
    pub fn tenant(&self, tenant: &str) -> Option<Arc<Instance>> {
        match tenant {
            "" => self.well_known.clone(),
            id => self.by_id.get(id).cloned(),
        }
    }

    /// The largest body any routed instance takes (what a request is read up to before its
    /// instance is known).
    pub fn max_body_bytes(&self) -> u64 {
        self.max_body_bytes
    }

    /// The instance and route a path hits: `<endpoint>` or `<endpoint>/` is the JSON-RPC endpoint,
    /// `<endpoint>/agent-card.json` the card, any other path below `<endpoint>` the HTTP+JSON
    /// binding; the well-known instance also answers
    /// `/.well-known/agent-card.json` (and `/.well-known/agent.json`) and `/`.
    pub fn resolve(&self, path: &str) -> Option<(Arc<Instance>, RouteKind)> {
        if let Some(wk) = &self.well_known {
            match path {
                p if WELL_KNOWN_CARDS.contains(&p) => return Some((wk.clone(), RouteKind::Card)),
                "/" => return Some((wk.clone(), RouteKind::Rpc)),
                _ => {}
            }
        }
        if let Some(base) = path.strip_suffix(CARD) {
            return self.by_path.get(base).map(|i| (i.clone(), RouteKind::Card));
        }
        let trimmed = if path.len() > 1 {
            path.strip_suffix('/').unwrap_or(path)
        } else {
            path
        };
        if let Some(i) = self.by_path.get(trimmed) {
            return Some((i.clone(), RouteKind::Rpc));
        }
        // Endpoints never nest, so the first endpoint above the path is the only one.
        let mut base = trimmed;
        while let Some((up, _)) = base.rsplit_once('/') {
            if let Some(i) = self.by_path.get(up) {
                return Some((i.clone(), RouteKind::Rest));
            }
            base = up;
        }
        None
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

/// Checks an id an operator chose: 1-64 letters, digits, `-` or `_`.
pub fn check_id(id: &str) -> Result<(), String> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"-_".contains(&b);
    if id.is_empty() || id.len() > 64 || !id.bytes().all(allowed) {
        return Err(format!("{id:?} must be 1-64 letters, digits, - or _"));
    }
    Ok(())
}

/// A new id `<slug(name)>-<8 hex>`.
pub fn new_id(name: &str) -> String {
    format!(
        "{}-{}",
        slug(name),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// Normalises an endpoint path: only `/segment/…` of `[A-Za-z0-9._~-]` segments (none `.` or
/// `..`, none empty, so nothing a client or proxy could decode or collapse into another path),
/// at most 256 characters, one trailing `/` dropped, never `/`, `/.well-known` or under the
/// control surface.
pub fn normalize_endpoint(path: &str) -> Result<String, String> {
    let shown: String = path.chars().take(80).collect();
    let p = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    let Some(rest) = p.strip_prefix('/') else {
        return Err(format!("endpointPath {shown:?} must start with /"));
    };
    if p.len() > 256 {
        return Err("endpointPath must be at most 256 characters".into());
    }
    for segment in rest.split('/') {
        if segment.is_empty()
            || segment == "."
            || segment == ".."
            || !segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._~-".contains(&b))
        {
            return Err(format!(
                "endpointPath {shown:?} must be /segment/… where each segment is letters, digits, '.', '_', '~' or '-' (not empty, '.' or '..')"
            ));
        }
    }
    if let Some(reserved) = control_surface(p) {
        return Err(format!(
            "endpointPath {p:?} collides with the control surface {reserved}"
        ));
    }
    if p == "/.well-known" || p.starts_with("/.well-known/") || PROBES.contains(&p) {
        return Err(format!("endpointPath {p:?} is reserved"));
    }
    Ok(p.to_owned())
}

/// The probes' paths on the public listener, liveness then readiness (no instance may take
/// them).
pub const PROBES: [&str; 2] = ["/healthz", "/readyz"];

/// The card's name below an endpoint path.
const CARD: &str = "/agent-card.json";

/// The well-known instance's card paths (`agent.json`: the 0.2-era name 0.3 clients may still
/// ask for).
const WELL_KNOWN_CARDS: [&str; 2] = ["/.well-known/agent-card.json", "/.well-known/agent.json"];

/// Whether `path` names a card, whichever instance (if any) it reaches.
pub fn is_card_path(path: &str) -> bool {
    path.ends_with(CARD) || WELL_KNOWN_CARDS.contains(&path)
}

/// The control surface's path (`/a2a/api` or `/a2a/ui`) that `path` is or lies under.
pub fn control_surface(path: &str) -> Option<&'static str> {
    ["/a2a/api", "/a2a/ui"].into_iter().find(|p| {
        path.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// Refuses an endpoint path equal to, or nested in (or around), another instance's endpoint or
/// card path: `others` are (id, endpoint path) of the other instances.
pub fn check_endpoint_free<'a>(
    path: &str,
    others: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), String> {
    let nested = |a: &str, b: &str| a.strip_prefix(b).is_some_and(|rest| rest.starts_with('/'));
    for (id, other) in others {
        if path == other || nested(path, other) || nested(other, path) {
            return Err(format!(
                "endpointPath {path:?} overlaps {other:?}, served by inbound {id:?}: choose a path that is not inside another instance's path"
            ));
        }
    }
    Ok(())
}

/// The id of the default one of `presets`.
pub fn default_preset(presets: &[Preset]) -> String {
    presets
        .iter()
        .find(|p| p.default)
        .map_or_else(|| "echo".into(), |p| p.id.clone())
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
        assert!(
            id.starts_with("my-bot-") && id.len() == "my-bot-".len() + 8,
            "{id}"
        );
    }

    #[test]
    fn endpoint_paths() {
        assert_eq!(normalize_endpoint("/a2a/x/").unwrap(), "/a2a/x");
        assert_eq!(
            normalize_endpoint("/agents/v1.2/a_b~c-d").unwrap(),
            "/agents/v1.2/a_b~c-d"
        );
        for bad in [
            "a2a/x",
            "/a2a/api",
            "/a2a/api/x",
            "/a2a/ui",
            "/",
            "//",
            "/a2a/../api",
            "/a2a//api",
            "/a2a/%61pi",
            "/a2a/x;y",
            "/a2a/x\0",
            "/a2a/\u{202e}x",
            "/a2a/./x",
            "/a2a/x//",
            "/.well-known/x",
            "/a b",
        ] {
            assert!(normalize_endpoint(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(normalize_endpoint("/a2a/apix").is_ok());
        assert!(normalize_endpoint(&format!("/{}", "a".repeat(300))).is_err());
    }

    #[test]
    fn endpoint_paths_do_not_overlap() {
        let others = [("one", "/a2a/one")];
        assert!(check_endpoint_free("/a2a/two", others).is_ok());
        assert!(check_endpoint_free("/a2a/onex", others).is_ok());
        for bad in ["/a2a/one", "/a2a/one/agent-card.json", "/a2a/one/x", "/a2a"] {
            assert!(
                check_endpoint_free(bad, others)
                    .unwrap_err()
                    .contains("\"one\""),
                "{bad}"
            );
        }
    }
}
