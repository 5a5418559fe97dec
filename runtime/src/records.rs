//! The records the runtime keeps about its agents: inbound instances and their limits, outbound
//! connections and their skill overrides. Plain data: the config declares them, the store keeps
//! them, the control API edits them.

use serde::{Deserialize, Serialize};

/// The key of a task of an instance (`<instance>/<task>`), for what is kept per task in memory
/// (frame logs, running turns): an instance never reaches another's.
pub fn task_key(instance_id: &str, task_id: &str) -> String {
    format!("{instance_id}/{task_id}")
}

/// The principal of an instance's shared credential (its bearer token), and of every caller of
/// an instance that takes none; the tasks kept before principals existed are its own.
pub const SHARED_PRINCIPAL: &str = "token";

/// A named client of an instance with its own API key (docs/auth.md "Authentication"): only the
/// key's hash is kept.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    /// The client's name (its principal is `key:<name>`).
    pub name: String,
    /// SHA-256 of the key, hex.
    pub hash: String,
    /// The skills it may call (empty: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// Its own sustained requests per second (instead of the instance's `ratePerSecond`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_second: Option<f64>,
    /// Creation time, ms.
    pub created_at: u64,
    /// When it was revoked (its hash is then gone); the name stays taken, so a new client never
    /// inherits the revoked one's tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<u64>,
}

/// The algorithms an OpenID Connect scheme may accept: the asymmetric ones, which a published
/// key verifies (never `none`, never HMAC).
pub const OIDC_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// An instance's OpenID Connect scheme (docs/auth.md "Authentication"): bearer JWTs its issuer
/// signed for its audience.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcSettings {
    /// The issuer (`iss`), whose discovery document names its keys.
    pub issuer: String,
    /// The audience tokens must name (`aud`).
    pub audience: String,
    /// The key set's URL (default: the discovery document's `jwks_uri`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<String>,
    /// The algorithms accepted (default `RS256`, `ES256`).
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// The scopes every token must grant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// The claim naming the principal (default `sub`).
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
}

fn default_algorithms() -> Vec<String> {
    vec!["RS256".into(), "ES256".into()]
}

fn default_principal_claim() -> String {
    "sub".into()
}

impl OidcSettings {
    /// Settings for `issuer` and `audience`, with the defaults.
    pub fn new(issuer: &str, audience: &str) -> OidcSettings {
        OidcSettings {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks_url: None,
            algorithms: default_algorithms(),
            scopes: Vec::new(),
            principal_claim: default_principal_claim(),
        }
    }

    /// `Err` says which field is wrong and how to fix it.
    pub fn check(&self) -> Result<(), String> {
        check_card_url(&self.issuer).map_err(|e| format!("issuer {e}"))?;
        if let Some(u) = &self.jwks_url {
            check_card_url(u).map_err(|e| format!("jwksUrl {e}"))?;
        }
        let short = printable;
        short("audience", &self.audience, 512)?;
        short("principalClaim", &self.principal_claim, 64)?;
        if self.algorithms.is_empty() || self.algorithms.len() > OIDC_ALGORITHMS.len() {
            return Err(format!(
                "algorithms must name 1 to {} of {}",
                OIDC_ALGORITHMS.len(),
                OIDC_ALGORITHMS.join(", ")
            ));
        }
        if let Some(a) = self
            .algorithms
            .iter()
            .find(|a| !OIDC_ALGORITHMS.contains(&a.as_str()))
        {
            return Err(format!(
                "algorithm {a:?} is not accepted: only asymmetric ones are ({}); never none or HMAC",
                OIDC_ALGORITHMS.join(", ")
            ));
        }
        if self.scopes.len() > 32 {
            return Err("at most 32 scopes may be required".into());
        }
        self.scopes
            .iter()
            .try_for_each(|s| short("a scope", s, 128))
    }
}

/// Which name of a client certificate is the principal.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CertName {
    /// The subject's common name.
    #[default]
    Subject,
    /// The first subject alternative name (DNS, URI or e-mail).
    San,
}

/// An instance's mutual-TLS scheme (docs/auth.md "Authentication"): callers presenting a client
/// certificate the listener's `[tls] clientCaFile` verified, known as `mtls:<name>`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MtlsSettings {
    /// The certificate's name that is the principal.
    #[serde(default)]
    pub principal_from: CertName,
}

/// `Ok` when `v` is 1 to `max` printable ASCII characters without spaces, quotes or
/// backslashes (what a header parameter or a form value can carry as it is); `Err` names `what`.
fn printable(what: &str, v: &str, max: usize) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_graphic() && c != '"' && c != '\\';
    if v.is_empty() || v.len() > max || !v.chars().all(plain) {
        return Err(format!(
            "{what} must be 1 to {max} printable ASCII characters without spaces, quotes or backslashes, not {:?}",
            v.chars().take(80).collect::<String>()
        ));
    }
    Ok(())
}

/// An outbound connection's OAuth 2.0 client credentials (docs/outbound.md "Outbound connections"):
/// the runtime gets the bearer token from `tokenUrl` and renews it before it expires.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OAuthClient {
    /// The authorization server's token endpoint.
    pub token_url: String,
    /// The client's id.
    pub client_id: String,
    /// Name of the secret holding the client secret (never the secret).
    pub client_secret_env: String,
    /// The scopes asked for (none: the server's default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl OAuthClient {
    /// `Err` says which field is wrong and how to fix it.
    pub fn check(&self) -> Result<(), String> {
        check_card_url(&self.token_url).map_err(|e| format!("tokenUrl {e}"))?;
        printable("clientId", &self.client_id, 256)?;
        control_api::check_secret_name(&self.client_secret_env)
            .map_err(|e| format!("clientSecretEnv: {e}"))?;
        if self.scopes.len() > 32 {
            return Err("at most 32 scopes may be asked for".into());
        }
        self.scopes
            .iter()
            .try_for_each(|s| printable("a scope", s, 128))
    }
}

/// Per-instance limits.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Limits {
    /// Largest JSON-RPC request body (413 above).
    pub max_body_bytes: u64,
    /// Longest a task may run (it ends FAILED after).
    pub execution_timeout_ms: u64,
    /// Most tasks running at once per instance (the next ends FAILED).
    pub max_concurrent_tasks: u32,
    /// Most tasks one caller known apart (a named client, a token's subject, a certificate)
    /// may run at once on the instance; 0: only the instance's cap.
    pub max_concurrent_tasks_per_principal: u32,
    /// Sustained requests per second per source address; 0 turns the rate limit off.
    pub rate_per_second: f64,
    /// Burst size of the per-source token bucket.
    pub rate_burst: u32,
    /// Idle time after which an open stream gets a keep-alive comment.
    pub keep_alive_ms: u64,
    /// Most parts one message may carry (INVALID_PARAMS above).
    pub max_parts: u32,
    /// Most open SSE streams of the instance (the next is refused at once with HTTP 429).
    pub max_streams: u32,
}

impl Limits {
    /// Checks the ranges; the error names the field.
    pub fn check(&self) -> Result<(), String> {
        if !(1024..=64 << 20).contains(&self.max_body_bytes) {
            return Err("maxBodyBytes must be from 1024 to 67108864".into());
        }
        if self.execution_timeout_ms == 0 || self.max_concurrent_tasks == 0 {
            return Err("executionTimeoutMs and maxConcurrentTasks must be at least 1".into());
        }
        if !self.rate_per_second.is_finite() || self.rate_per_second < 0.0 {
            return Err("ratePerSecond must be 0 (off) or positive".into());
        }
        if self.keep_alive_ms < 100 {
            return Err("keepAliveMs must be at least 100".into());
        }
        if !(1..=100_000).contains(&self.max_parts) {
            return Err("maxParts must be from 1 to 100000".into());
        }
        Ok(())
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 1 << 20,
            execution_timeout_ms: 300_000,
            max_concurrent_tasks: 256,
            max_concurrent_tasks_per_principal: 0,
            rate_per_second: 0.0,
            rate_burst: 60,
            keep_alive_ms: 15_000,
            max_parts: a2a_protocol::bounds::DEFAULT_MAX_PARTS,
            max_streams: 1000,
        }
    }
}

fn yes() -> bool {
    true
}

/// A stored inbound instance.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRecord {
    /// Id (`<slug>-<8 hex>`, or explicit).
    pub id: String,
    /// Agent name.
    pub name: String,
    /// Agent description.
    pub description: String,
    /// Agent version.
    pub version: String,
    /// JSON-RPC endpoint path.
    pub endpoint_path: String,
    /// Session preset.
    pub preset: String,
    /// Name of the secret holding the bearer token (never the token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_token_env: Option<String>,
    /// Named clients with their own API keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_keys: Vec<ApiKey>,
    /// OpenID Connect bearer tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcSettings>,
    /// Client certificates (mutual TLS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtls: Option<MtlsSettings>,
    /// Routes are served.
    pub enabled: bool,
    /// Push notifications are served (the card's `capabilities.pushNotifications`).
    #[serde(default = "yes")]
    pub push_notifications: bool,
    /// A2A 0.3 callers are served too, and the card carries the 0.3 fields
    /// (docs/protocol.md "A2A 0.3").
    #[serde(default = "yes")]
    pub compat03: bool,
    /// Requests may run on a kept instance of its component, as they always do on the built-in
    /// one: for components that keep nothing between requests
    /// (docs/serving.md "Writing and swapping a component").
    #[serde(default)]
    pub reuse_instances: bool,
    /// Component name.
    pub component: String,
    /// Limits.
    pub limits: Limits,
    /// Creation time, ms.
    pub created_at: u64,
    /// Last change, ms.
    pub updated_at: u64,
}

impl InstanceRecord {
    /// A new, enabled record `id` served at `/a2a/{id}` on `preset` and `component`, every other
    /// field at its default (no name, description or version yet, no credentials).
    pub fn new(id: &str, preset: String, component: &str, limits: Limits, now: u64) -> Self {
        InstanceRecord {
            id: id.into(),
            name: String::new(),
            description: String::new(),
            version: String::new(),
            endpoint_path: format!("/a2a/{id}"),
            preset,
            auth_token_env: None,
            api_keys: Vec::new(),
            oidc: None,
            mtls: None,
            enabled: true,
            push_notifications: true,
            compat03: true,
            reuse_instances: false,
            component: component.into(),
            limits,
            created_at: now,
            updated_at: now,
        }
    }

    /// The API keys that still work.
    pub fn active_keys(&self) -> impl Iterator<Item = &ApiKey> {
        self.api_keys.iter().filter(|k| k.revoked_at.is_none())
    }
}

/// Default time a remote call may take, ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;

/// The longest `timeoutMs` a connection may set.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// Checks a card URL: http(s) with a host.
pub fn check_card_url(url: &str) -> Result<String, String> {
    let url = url.trim();
    a2a_protocol::client::split_url(url)
        .map(|_| url.to_owned())
        .map_err(|_| {
            format!(
                "must be an http(s) URL with a host, not {:?}",
                url.chars().take(200).collect::<String>()
            )
        })
}

/// A stored outbound connection (docs/control.md "Control API › Actions").
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionRecord {
    /// Id (`<slug>-<8 hex>`).
    pub id: String,
    /// Name (tools are named after it).
    pub name: String,
    /// The remote AgentCard URL (never changed by an update).
    pub agent_card_url: String,
    /// Name of the secret holding the bearer token sent to the remote (never the token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env: Option<String>,
    /// OAuth 2.0 client credentials: the bearer token comes from its token endpoint instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthClient>,
    /// The preset whose sessions may use these tools (none: every preset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Connected and offering tools.
    pub enabled: bool,
    /// Longest a remote call may take, ms.
    pub timeout_ms: u64,
    /// Skills that register no tool.
    #[serde(default)]
    pub disabled_skills: Vec<String>,
    /// What a skill's tool shows instead of the remote's name and description.
    #[serde(default)]
    pub skill_overrides: std::collections::BTreeMap<String, SkillOverride>,
    /// Endpoints the remote card announces (and redirects) may reach internal addresses
    /// (loopback, private ranges); link-local ones stay refused.
    #[serde(default)]
    pub allow_private: bool,
    /// Creation time, ms.
    pub created_at: u64,
    /// Last change, ms.
    pub updated_at: u64,
}

/// A skill's tool description override.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SkillOverride {
    /// Shown name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Shown description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}
