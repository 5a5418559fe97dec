//! Outbound connections (docs/outbound.md "Outbound connections"): remote A2A agents whose skills become tools. Records
//! live in the store (and a copy here); the connection state (connected, failed with the last
//! error, the remote card) lives here. Every remote exchange goes through the outbound client
//! component ([`client`]), whose requests pass its outbound policy and the SSRF
//! guard ([`crate::egress`]).

pub mod client;
mod oauth;
mod tools;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use a2a_protocol::client_auth::{self, Held};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use self::client::{CallRequest, ClientHost, ConnectionInfo, Target, origin};
use crate::credentials::{Credentials, outbound_name};
use crate::records::ConnectionRecord;
use crate::store::{Records, StoreError};
pub use tools::{SessionToolbox, Tool, context_for, tools};

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

/// The outbound connections: their records (as stored), their live state, and the client
/// component that talks to them.
pub struct Outbound {
    store: Arc<dyn Records>,
    credentials: Arc<Credentials>,
    /// The client component the calls run on.
    pub client: ClientHost,
    tokens: oauth::Tokens,
    records: RwLock<Vec<ConnectionRecord>>,
    live: RwLock<HashMap<String, Live>>,
    /// Whether every connection enabled at start has been tried once (readiness waits for it).
    tried: std::sync::atomic::AtomicBool,
}

/// The SSRF guard of a connection: its card URL's host is trusted as the operator gave it.
fn reach(card_url: &str, allow_private: bool) -> crate::egress::Reach {
    crate::egress::Reach {
        trusted_host: crate::egress::url_host(card_url),
        allow_private,
        allow_with: "only the card URL's own host may be internal (set allowPrivate on the connection to allow it)",
    }
}

/// The secret holding a connection's bearer token.
pub fn secret_name(r: &ConnectionRecord) -> String {
    r.bearer_token_env
        .clone()
        .unwrap_or_else(|| outbound_name(&r.id))
}

impl Outbound {
    /// The connections the store holds, served by `client`; OAuth tokens are got through
    /// `exit`.
    pub async fn new(
        store: Arc<dyn Records>,
        credentials: Arc<Credentials>,
        client: ClientHost,
        exit: crate::egress::Exit,
    ) -> Result<Outbound, StoreError> {
        let records = RwLock::new(store.connections().await?);
        Ok(Outbound {
            store,
            credentials,
            client,
            tokens: oauth::Tokens::new(exit),
            records,
            live: RwLock::default(),
            tried: Default::default(),
        })
    }

    /// Every connection record, by id.
    pub fn records(&self) -> Vec<ConnectionRecord> {
        self.records.read().unwrap().clone()
    }

    /// A connection record by id; the error says where the ids are listed.
    pub fn record(&self, id: &str) -> Result<ConnectionRecord, String> {
        self.records
            .read()
            .unwrap()
            .iter()
            .find(|r| r.id == id)
            .cloned()
            .ok_or_else(|| {
                format!("unknown outbound id {id:?}; GET /a2a/api lists the connections")
            })
    }

    /// Stores a record (new or changed).
    pub async fn save(&self, r: ConnectionRecord) -> Result<(), StoreError> {
        self.store.put_connection(r.clone()).await?;
        let mut records = self.records.write().unwrap();
        match records.iter_mut().find(|x| x.id == r.id) {
            Some(x) => *x = r,
            None => {
                records.push(r);
                records.sort_by(|a, b| a.id.cmp(&b.id));
            }
        }
        Ok(())
    }

    /// Takes up the connection records other nodes changed: a new or changed enabled one is
    /// connected, a disabled one disconnected, a removed one forgotten.
    pub async fn follow(&self) -> Result<(), StoreError> {
        let stored = self.store.connections().await?;
        let before = self.records();
        if stored == before {
            return Ok(());
        }
        *self.records.write().unwrap() = stored.clone();
        self.live
            .write()
            .unwrap()
            .retain(|id, _| stored.iter().any(|r| &r.id == id));
        for r in stored.iter().filter(|r| !before.contains(r)) {
            if r.enabled {
                let _ = self.connect(r).await;
            } else {
                self.disconnect(&r.id);
            }
        }
        Ok(())
    }

    /// Deletes a record and forgets its live state.
    pub async fn remove(&self, id: &str) -> Result<(), StoreError> {
        self.store.delete_connection(id.to_owned()).await?;
        self.records.write().unwrap().retain(|r| r.id != id);
        self.live.write().unwrap().remove(id);
        Ok(())
    }

    /// A connection's live state.
    pub fn live(&self, id: &str) -> Live {
        self.live
            .read()
            .unwrap()
            .get(id)
            .cloned()
            .unwrap_or_default()
    }

    fn set(&self, id: &str, live: Live) {
        self.live.write().unwrap().insert(id.to_owned(), live);
    }

    /// Marks a connection disconnected (disabled).
    pub fn disconnect(&self, id: &str) {
        self.set(id, Live::default());
    }

    /// The bearer token a connection sends: its OAuth client's current token, else its static
    /// token if it has one.
    async fn bearer(&self, r: &ConnectionRecord) -> Result<Option<String>, String> {
        let Some(c) = &r.oauth else {
            return Ok(self.credentials.resolve(&secret_name(r)));
        };
        let secret = self.credentials.resolve(&c.client_secret_env).ok_or_else(|| {
            format!(
                "the OAuth client secret {} is not set (put it in the credentials file or the environment)",
                c.client_secret_env
            )
        })?;
        self.tokens
            .bearer(c, &secret, r.allow_private)
            .await
            .map(Some)
    }

    /// What the client component needs for a connection: its info, the token, the origins.
    async fn target(&self, r: &ConnectionRecord, card: Option<&Value>) -> Result<Target, String> {
        let bearer = self.bearer(r).await?;
        let mut origins: Vec<String> = r
            .agent_card_url
            .parse::<http::Uri>()
            .ok()
            .as_ref()
            .and_then(origin)
            .into_iter()
            .collect();
        if let Some(ep) = card.and_then(|c| a2a_protocol::client::endpoint(c).ok()) {
            origins.extend(ep.url.parse::<http::Uri>().ok().as_ref().and_then(origin));
        }
        Ok(Target {
            info: ConnectionInfo {
                id: r.id.clone(),
                name: r.name.clone(),
                agent_card_url: r.agent_card_url.clone(),
                timeout_ms: r.timeout_ms,
                has_credential: bearer.is_some(),
            },
            bearer,
            origins,
            reach: reach(&r.agent_card_url, r.allow_private),
        })
    }

    /// Reads the remote card and records the outcome; the error says why it failed.
    pub async fn connect(&self, r: &ConnectionRecord) -> Result<(), String> {
        let result = match self.target(r, None).await {
            Ok(target) => self.client.discover(target).await,
            Err(e) => Err(e),
        };
        let live = match &result {
            Ok(card) => Live {
                status: Status::Connected,
                last_error: None,
                card: Some(Arc::new(card.clone())),
            },
            Err(e) => Live {
                status: Status::Failed,
                last_error: Some(e.clone()),
                card: self.live(&r.id).card,
            },
        };
        match &result {
            Ok(_) => tracing::info!(connection = %r.id, "outbound connection connected"),
            Err(e) => tracing::warn!(connection = %r.id, error = %e, "outbound connection failed"),
        }
        self.set(&r.id, live);
        result.map(|_| ())
    }

    /// Connects every enabled connection (on start).
    pub async fn connect_all(self: Arc<Self>) {
        for r in self.records().into_iter().filter(|r| r.enabled) {
            let _ = self.connect(&r).await;
        }
        self.tried.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether the start's connects are done, each connected or failed: until then a turn may
    /// find a remote agent's tools missing that a moment later are there.
    pub fn tried(&self) -> bool {
        self.tried.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many enabled connections stand `status` now.
    pub fn count(&self, status: Status) -> usize {
        self.records()
            .iter()
            .filter(|r| r.enabled && self.live(&r.id).status == status)
            .count()
    }

    /// A connection as the snapshot shows it.
    pub fn view(&self, r: &ConnectionRecord) -> Value {
        let live = self.live(&r.id);
        let tools = tools(r, &live);
        let card = live.card.as_deref();
        let held = Held {
            token: r.oauth.is_none() && self.credentials.resolve(&secret_name(r)).is_some(),
            oauth: r.oauth.is_some(),
        };
        json!({
            "id": r.id, "name": r.name, "agentCardUrl": r.agent_card_url, "preset": r.preset, "enabled": r.enabled,
            "timeoutMs": r.timeout_ms, "state": live.status.as_str(), "bearerTokenEnv": r.bearer_token_env, "oauth": r.oauth,
            "skillCount": card.map_or(0, |c| a2a_protocol::client::skill_ids(c).len()), "toolCount": tools.len(),
            "tools": tools.iter().map(|t| json!({ "name": t.name, "skill": t.skill, "title": t.title, "description": t.description })).collect::<Vec<_>>(),
            "disabledSkills": r.disabled_skills, "skillOverrides": r.skill_overrides,
            "lastError": live.last_error, "agentVersion": card.and_then(|c| c["version"].as_str()),
            "security": card.map(|c| client_auth::report(c, held)),
            "createdAt": r.created_at, "updatedAt": r.updated_at,
        })
    }

    /// Fetches a remote card without creating anything: its preview.
    pub async fn discover(
        &self,
        url: &str,
        token: Option<String>,
        allow_private: bool,
    ) -> Result<Value, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("agentCardUrl {url:?} is not a URL: {e}"))?;
        let Some(o) =
            origin(&uri).filter(|o| o.starts_with("http://") || o.starts_with("https://"))
        else {
            return Err(format!("agentCardUrl {url:?} must be an http(s) URL"));
        };
        let has_token = token.is_some();
        let target = Target {
            info: ConnectionInfo {
                id: "discover".into(),
                name: "discover".into(),
                agent_card_url: url.to_owned(),
                timeout_ms: 10_000,
                has_credential: token.is_some(),
            },
            bearer: token,
            origins: vec![o],
            reach: reach(url, allow_private),
        };
        let card = self.client.discover(target).await?;
        let mut preview = a2a_protocol::client::preview(&card)?;
        preview["security"] = client_auth::report(
            &card,
            Held {
                token: has_token,
                oauth: false,
            },
        );
        Ok(preview)
    }

    /// Runs a remote skill as a tool would; the tool text. `context_id` is the caller's stable
    /// conversation with that agent.
    pub async fn call(
        &self,
        id: &str,
        skill: &str,
        prompt: &str,
        task_id: Option<String>,
        context_id: String,
        abort: CancellationToken,
    ) -> Result<String, String> {
        let r = self.record(id)?;
        if !r.enabled {
            return Err(format!("outbound {id:?} is disabled; enable it first"));
        }
        if self.live(id).status != Status::Connected {
            self.connect(&r)
                .await
                .map_err(|e| format!("outbound {id:?} is not connected: {e}"))?;
        }
        let live = self.live(id);
        let offered = tools(&r, &live);
        if !offered.iter().any(|t| t.skill == skill) {
            let offered: Vec<String> = offered.into_iter().map(|t| t.skill).collect();
            return Err(format!(
                "outbound {id:?} offers no skill {skill:?} (offered: {})",
                offered.join(", ")
            ));
        }
        let req = CallRequest {
            skill: skill.to_owned(),
            prompt: prompt.to_owned(),
            context_id,
            task_id,
        };
        let target = self.target(&r, live.card.as_deref()).await?;
        self.client.call(target, req, abort).await
    }

    /// A secret by name (credentials file, then environment).
    pub fn secret(&self, name: &str) -> Option<String> {
        self.credentials.resolve(name)
    }
}
