//! Outbound connections (SPEC §2.2, §7): remote A2A agents whose skills become tools. Records
//! live in the store; the connection state (connected, failed with the last error, the remote
//! card) lives here. Every remote exchange goes through the outbound client component.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::credentials::outbound_name;
use crate::host::bindings::client_world::exports::a2a::edge::client::CallRequest;
use crate::host::bindings::outbound::ConnectionInfo;
use crate::host::client::Target;
use crate::host::outbound_http::origin;
use crate::store::{ConnectionRecord, Store};

/// Default time a remote call may take, ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// Where a connection stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Status {
    /// Never connected, or disabled.
    #[default]
    Disconnected,
    /// The remote card was read and validated.
    Connected,
    /// The last connect failed (`last_error` says why).
    Failed,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Disconnected => "disconnected",
            Status::Connected => "connected",
            Status::Failed => "failed",
        }
    }
}

/// The live side of a connection.
#[derive(Clone, Debug, Default)]
pub struct Live {
    /// Where it stands.
    pub status: Status,
    /// Why the last connect failed.
    pub last_error: Option<String>,
    /// The remote card, once read.
    pub card: Option<Arc<Value>>,
}

/// One tool: a remote skill as a session sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// Its name (SPEC §7).
    pub name: String,
    /// The connection.
    pub connection_id: String,
    /// The remote skill id.
    pub skill: String,
    /// Shown name.
    pub title: String,
    /// What the model reads.
    pub description: String,
}

/// The live state of every connection.
#[derive(Default)]
pub struct Outbound {
    live: RwLock<HashMap<String, Live>>,
}

impl Outbound {
    /// A connection's live state.
    pub fn live(&self, id: &str) -> Live {
        self.live.read().unwrap().get(id).cloned().unwrap_or_default()
    }

    fn set(&self, id: &str, live: Live) {
        self.live.write().unwrap().insert(id.to_owned(), live);
    }

    /// Forgets a removed connection.
    pub fn forget(&self, id: &str) {
        self.live.write().unwrap().remove(id);
    }

    /// Marks a connection disconnected (disabled).
    pub fn disconnect(&self, id: &str) {
        self.set(id, Live::default());
    }
}

/// The longest `timeoutMs` a connection may set.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// Checks a card URL: http(s) with a host.
pub fn check_card_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    a2a_protocol::client::split_url(url).map(|_| url.to_owned()).map_err(|_| format!("must be an http(s) URL with a host, not {:?}", url.chars().take(200).collect::<String>()))
}

/// The record a declared connection should have: `stored` with every declared field applied,
/// or a new record.
pub fn reconcile(
    d: &crate::config::ConnectionDecl,
    stored: Option<&ConnectionRecord>,
    config: &crate::config::Config,
    now: u64,
) -> Result<ConnectionRecord, crate::instances::DeclError> {
    let mut r = stored.cloned().unwrap_or_else(|| ConnectionRecord {
        id: d.id.clone().unwrap_or_else(|| crate::instances::new_id(&d.name)),
        enabled: true,
        timeout_ms: DEFAULT_TIMEOUT_MS,
        created_at: now,
        updated_at: now,
        ..ConnectionRecord::default()
    });
    let before = r.clone();
    r.name = crate::instances::declared_name(&d.name)?;
    r.agent_card_url = check_card_url(&d.agent_card_url).map_err(|e| ("agentCardUrl", e))?;
    if let Some(name) = &d.bearer_token_env {
        r.bearer_token_env = Some(crate::credentials::check_secret_name(name).map_err(|e| ("bearerTokenEnv", e))?);
    }
    if let Some(p) = &d.preset {
        if !config.all_presets().iter().any(|x| &x.id == p) {
            return Err(("preset", format!("unknown preset {p:?}")));
        }
        r.preset = Some(p.clone());
    }
    if let Some(e) = d.enabled {
        r.enabled = e;
    }
    if let Some(t) = d.timeout_ms {
        if !(100..=MAX_TIMEOUT_MS).contains(&t) {
            return Err(("timeoutMs", format!("must be from 100 to {MAX_TIMEOUT_MS}")));
        }
        r.timeout_ms = t;
    }
    if let Some(list) = &d.disabled_skills {
        r.disabled_skills = list.clone();
    }
    if let Some(o) = &d.skill_overrides {
        r.skill_overrides = o.clone();
    }
    if let Some(a) = d.allow_private {
        r.allow_private = a;
    }
    if stored.is_some() && r != before {
        r.updated_at = now;
    }
    Ok(r)
}

/// The secret holding a connection's bearer token.
pub fn secret_name(r: &ConnectionRecord) -> String {
    r.bearer_token_env.clone().unwrap_or_else(|| outbound_name(&r.id))
}

/// What the client component needs for a connection: its info, the token, the origins.
fn target(app: &App, r: &ConnectionRecord, card: Option<&Value>) -> Target {
    let bearer = app.credentials.resolve(&secret_name(r));
    let mut origins: Vec<String> = r.agent_card_url.parse::<http::Uri>().ok().as_ref().and_then(origin).into_iter().collect();
    if let Some(ep) = card.and_then(|c| a2a_protocol::client::endpoint(c).ok()) {
        origins.extend(ep.url.parse::<http::Uri>().ok().as_ref().and_then(origin));
    }
    Target {
        info: ConnectionInfo { id: r.id.clone(), name: r.name.clone(), agent_card_url: r.agent_card_url.clone(), timeout_ms: r.timeout_ms, has_credential: bearer.is_some() },
        bearer,
        origins,
        reach: reach(&r.agent_card_url, r.allow_private),
    }
}

/// The SSRF guard of a connection: its card URL's host is trusted as the operator gave it.
fn reach(card_url: &str, allow_private: bool) -> crate::host::egress::Reach {
    let trusted_host = card_url.parse::<http::Uri>().ok().as_ref().and_then(crate::host::egress::host_of);
    crate::host::egress::Reach { trusted_host, allow_private }
}

/// Reads the remote card and records the outcome; the error says why it failed.
pub async fn connect(app: &Arc<App>, r: &ConnectionRecord) -> Result<(), String> {
    let result = app.host.client.discover(target(app, r, None)).await;
    let live = match &result {
        Ok(card) => Live { status: Status::Connected, last_error: None, card: Some(Arc::new(card.clone())) },
        Err(e) => Live { status: Status::Failed, last_error: Some(e.clone()), card: app.outbound.live(&r.id).card },
    };
    match &result {
        Ok(_) => tracing::info!(connection = %r.id, "outbound connection connected"),
        Err(e) => tracing::warn!(connection = %r.id, error = %e, "outbound connection failed"),
    }
    app.outbound.set(&r.id, live);
    result.map(|_| ())
}

/// Connects every enabled connection (on start).
pub async fn connect_all(app: Arc<App>) {
    for r in app.store.connections().unwrap_or_default().into_iter().filter(|r| r.enabled) {
        let _ = connect(&app, &r).await;
    }
}

/// The tools of a connected, enabled connection, with overrides applied and disabled skills left out.
pub fn tools(r: &ConnectionRecord, live: &Live) -> Vec<Tool> {
    let Some(card) = live.card.as_ref().filter(|_| r.enabled && live.status == Status::Connected) else { return Vec::new() };
    let skills: Vec<&Value> = card["skills"].as_array().map(|s| s.iter().collect()).unwrap_or_default();
    let ids: Vec<String> = a2a_protocol::client::skill_ids(card).into_iter().filter(|id| !r.disabled_skills.contains(id)).collect();
    let names = a2a_protocol::tools::names(&r.name, &ids.iter().map(String::as_str).collect::<Vec<_>>());
    ids.into_iter()
        .zip(names)
        .map(|(id, name)| {
            let skill = skills.iter().find(|s| s["id"] == id.as_str());
            let o = r.skill_overrides.get(&id);
            let title = o.and_then(|o| o.name.clone()).or_else(|| skill.and_then(|s| s["name"].as_str().map(str::to_owned))).unwrap_or_else(|| id.clone());
            let about = o.and_then(|o| o.description.clone()).or_else(|| skill.and_then(|s| s["description"].as_str().map(str::to_owned))).unwrap_or_default();
            let agent = card["name"].as_str().unwrap_or(&r.name);
            Tool { name, connection_id: r.id.clone(), skill: id, description: format!("{title} — remote A2A agent \"{agent}\". {about}").trim_end().to_owned(), title }
        })
        .collect()
}

/// A stored connection by id; the error says where the ids are listed.
pub fn record(app: &App, id: &str) -> Result<ConnectionRecord, String> {
    app.store.connections().map_err(|e| e.to_string())?.into_iter().find(|r| r.id == id).ok_or_else(|| format!("unknown outbound id {id:?}; GET /a2a/api lists the connections"))
}

/// A connection as the snapshot shows it.
pub fn view(app: &App, r: &ConnectionRecord) -> Value {
    let live = app.outbound.live(&r.id);
    let tools = tools(r, &live);
    let card = live.card.as_deref();
    json!({
        "id": r.id, "name": r.name, "agentCardUrl": r.agent_card_url, "preset": r.preset, "enabled": r.enabled,
        "timeoutMs": r.timeout_ms, "state": live.status.as_str(), "bearerTokenEnv": r.bearer_token_env,
        "skillCount": card.map_or(0, |c| a2a_protocol::client::skill_ids(c).len()), "toolCount": tools.len(),
        "tools": tools.iter().map(|t| json!({ "name": t.name, "skill": t.skill, "title": t.title, "description": t.description })).collect::<Vec<_>>(),
        "disabledSkills": r.disabled_skills, "skillOverrides": r.skill_overrides,
        "lastError": live.last_error, "agentVersion": card.and_then(|c| c["version"].as_str()),
        "createdAt": r.created_at, "updatedAt": r.updated_at,
    })
}

/// Fetches a remote card without creating anything: its preview.
pub async fn discover(app: &Arc<App>, url: &str, token: Option<String>, allow_private: bool) -> Result<Value, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("agentCardUrl {url:?} is not a URL: {e}"))?;
    let Some(o) = origin(&uri).filter(|o| o.starts_with("http://") || o.starts_with("https://")) else {
        return Err(format!("agentCardUrl {url:?} must be an http(s) URL"));
    };
    let target = Target {
        info: ConnectionInfo { id: "discover".into(), name: "discover".into(), agent_card_url: url.to_owned(), timeout_ms: 10_000, has_credential: token.is_some() },
        bearer: token,
        origins: vec![o],
        reach: reach(url, allow_private),
    };
    let card = app.host.client.discover(target).await?;
    a2a_protocol::client::preview(&card)
}

/// Runs a remote skill as a tool would; the tool text. `context_id` is the caller's stable
/// conversation with that agent.
pub async fn call(app: &Arc<App>, id: &str, skill: &str, prompt: &str, task_id: Option<String>, context_id: String, abort: CancellationToken) -> Result<String, String> {
    let r = record(app, id)?;
    if !r.enabled {
        return Err(format!("outbound {id:?} is disabled; enable it first"));
    }
    if app.outbound.live(id).status != Status::Connected {
        connect(app, &r).await.map_err(|e| format!("outbound {id:?} is not connected: {e}"))?;
    }
    let live = app.outbound.live(id);
    if !tools(&r, &live).iter().any(|t| t.skill == skill) {
        let offered: Vec<String> = tools(&r, &live).into_iter().map(|t| t.skill).collect();
        return Err(format!("outbound {id:?} offers no skill {skill:?} (offered: {})", offered.join(", ")));
    }
    let req = CallRequest { skill: skill.to_owned(), prompt: prompt.to_owned(), context_id, task_id };
    app.host.client.call(target(app, &r, live.card.as_deref()), req, abort).await
}

/// A stable, opaque remote context id for one caller conversation with one connection.
pub fn context_for(connection_id: &str, caller: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{connection_id}\u{0}{caller}").as_bytes());
    format!("a2a-edge-{}", hex::encode(&digest[..12]))
}

/// The tools and secrets a session turn sees: the outbound tools of connections open to its
/// preset, called with a remote context stable per (instance, context, connection).
pub struct SessionTools {
    /// The runtime.
    pub app: Arc<App>,
    /// The session's preset.
    pub preset: String,
    /// `<instance>/<context>`: the caller the remote context is derived from.
    pub caller: String,
}

impl SessionTools {
    fn visible(&self) -> Vec<Tool> {
        let records = self.app.store.connections().unwrap_or_default();
        records.iter().filter(|r| r.preset.as_deref().is_none_or(|p| p == self.preset)).flat_map(|r| tools(r, &self.app.outbound.live(&r.id))).collect()
    }
}

impl crate::sessions::TurnHost for SessionTools {
    fn secret(&self, name: &str) -> Option<String> {
        self.app.credentials.resolve(name)
    }

    fn tools(&self) -> Vec<crate::sessions::ToolSpec> {
        self.visible().into_iter().map(|t| crate::sessions::ToolSpec { name: t.name, description: t.description, parameters: a2a_protocol::tools::parameters() }).collect()
    }

    fn call_tool(&self, name: &str, arguments: &str, cancel: CancellationToken) -> crate::sessions::ToolResult {
        let tool = self.visible().into_iter().find(|t| t.name == name);
        let args: Result<Value, _> = serde_json::from_str(if arguments.trim().is_empty() { "{}" } else { arguments });
        let (app, caller) = (self.app.clone(), self.caller.clone());
        let name = name.to_owned();
        Box::pin(async move {
            let tool = tool.ok_or_else(|| format!("there is no tool {name:?}"))?;
            let args = args.map_err(|e| format!("the arguments of {name} are not JSON: {e}"))?;
            let prompt = args["prompt"].as_str().ok_or_else(|| format!("{name} needs a \"prompt\" string"))?;
            let task_id = args["taskId"].as_str().filter(|t| !t.is_empty()).map(str::to_owned);
            let context = context_for(&tool.connection_id, &caller);
            call(&app, &tool.connection_id, &tool.skill, prompt, task_id, context, cancel).await
        })
    }
}
