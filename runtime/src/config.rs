//! The TOML configuration (docs/serving.md "Configuration"): presets, defaults, runtime limits, and instances as code.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::records::{Limits, SkillOverride};
use crate::sessions::SessionSettings;
use crate::sessions::preset::{Backend, Preset};

/// The whole configuration file. Every field has a default, so no file is needed.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
#[derive(Default)]
pub struct Config {
    /// The URL remote clients reach this server at; cards announce endpoints under it.
    /// Default: `http://<listen address>` (`https://` with `[tls]`).
    pub public_base_url: Option<String>,
    /// Provider shown on every card.
    pub provider: Option<Provider>,
    /// Default limits of inbound instances.
    pub limits: Limits,
    /// Engine settings.
    pub runtime: RuntimeSettings,
    /// Storage settings.
    pub storage: StorageSettings,
    /// Protocol switches.
    pub protocol: ProtocolSettings,
    /// How callers' credentials are checked.
    pub identity: IdentitySettings,
    /// The attachments service.
    pub attachments: AttachmentSettings,
    /// Push-notification delivery.
    pub push: PushSettings,
    /// Several nodes on one PostgreSQL database.
    pub cluster: ClusterSettings,
    /// Live agent sessions.
    pub sessions: SessionSettings,
    /// Session presets; `echo` is built in.
    pub presets: Vec<Preset>,
    /// Inbound instances declared as code: created on start when missing.
    pub instances: Vec<InstanceDecl>,
    /// Outbound connections declared as code: created on start when missing.
    pub connections: Vec<ConnectionDecl>,
    /// The instance also served at `/.well-known/agent-card.json` (and `/` for JSON-RPC).
    pub well_known_instance: Option<String>,
    /// Where the update check looks.
    pub update: UpdateSettings,
    /// What the runtime's own requests trust and go through (CA file, proxy).
    pub egress: crate::egress::EgressSettings,
    /// TLS on the public listener (and mutual TLS with `clientCaFile`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::tls::TlsSettings>,
    /// What cards say of the gRPC binding.
    pub grpc: GrpcSettings,
    /// Where traces are exported (docs/operating.md "Traces"); read at start.
    pub telemetry: crate::telemetry::trace::TelemetrySettings,
    /// The file this was read from (named in errors about its declarations).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// Sources of the update check (`GET /a2a/api/update`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct UpdateSettings {
    /// Check at all (`false` for air-gapped sites: nothing is contacted, the panel shows nothing).
    pub enabled: bool,
    /// The registry's crate document (JSON with `crate.max_version`).
    pub registry_url: String,
    /// The repository's `Cargo.toml` (its `[workspace.package]` or `[package]` version).
    pub manifest_url: String,
    /// The repository shown to operators.
    pub repo_url: String,
    /// Per-source timeout, ms.
    pub timeout_ms: u64,
}

/// The package users install (`cargo install a2a-edge`): the binary's, whose releases the update
/// check looks for. The library is `a2a-edge-runtime`.
pub const PACKAGE: &str = "a2a-edge";

impl Default for UpdateSettings {
    fn default() -> Self {
        let repo = env!("CARGO_PKG_REPOSITORY");
        UpdateSettings {
            enabled: true,
            registry_url: format!("https://crates.io/api/v1/crates/{PACKAGE}"),
            manifest_url: format!(
                "{}/main/Cargo.toml",
                repo.replace("https://github.com/", "https://raw.githubusercontent.com/")
            ),
            repo_url: repo.into(),
            timeout_ms: 3000,
        }
    }
}

/// The organisation behind the agents.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Provider {
    /// Organisation name.
    #[serde(default)]
    pub organization: String,
    /// Organisation URL.
    #[serde(default)]
    pub url: String,
}

/// Engine settings.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RuntimeSettings {
    /// Linear memory cap of one component instance, MiB.
    pub memory_mib: u64,
    /// Longest a guest may compute without returning to the host, ms.
    pub cpu_burst_ms: u64,
    /// Component instances alive at once (requests plus open streams).
    pub max_instances: u32,
    /// Where compiled components are cached (default `<data-dir>/cache`).
    pub cache_dir: Option<PathBuf>,
    /// How long shutdown waits for in-flight requests, ms.
    pub shutdown_grace_ms: u64,
    /// A connection that sends no complete request head for this long (idle keep-alive or a
    /// slow header) is closed, ms.
    pub idle_timeout_ms: u64,
    /// Most open client connections; at the cap new ones wait in the listen backlog.
    pub max_connections: u32,
    /// Most open connections from one client address; past it a new one is closed at once
    /// (default: a quarter of `maxConnections`, so one client never holds every slot).
    pub max_connections_per_peer: Option<u32>,
    /// A request body may take this long, ms, plus one second per `minBodyBytesPerSec` bytes.
    pub body_timeout_ms: u64,
    /// The slowest body rate accepted beyond `bodyTimeoutMs`, bytes per second.
    pub min_body_bytes_per_sec: u64,
    /// Most open SSE streams of all instances together.
    pub max_streams: u32,
    /// How long a request waits for a free component instance when all `maxInstances` are in
    /// use, ms (then it is refused with 503).
    pub instance_wait_ms: u64,
    /// Idle instances of the built-in server component kept for their instance's next request
    /// (at most `maxInstances`); 0 gives every request a fresh instance.
    pub warm_instances: u32,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            memory_mib: 64,
            cpu_burst_ms: 1000,
            max_instances: 1000,
            cache_dir: None,
            shutdown_grace_ms: 10_000,
            idle_timeout_ms: 30_000,
            max_connections: 16_384,
            max_connections_per_peer: None,
            body_timeout_ms: 10_000,
            min_body_bytes_per_sec: 1024,
            max_streams: 10_000,
            instance_wait_ms: 2000,
            warm_instances: 64,
        }
    }
}

impl RuntimeSettings {
    /// Open connections one client address may hold.
    pub fn connections_per_peer(&self) -> u32 {
        self.max_connections_per_peer
            .unwrap_or(self.max_connections / 4)
            .max(1)
    }

    /// How long a body of `received` bytes so far may have taken.
    pub fn body_allowance(&self, received: u64) -> std::time::Duration {
        let rate = self.min_body_bytes_per_sec.max(1);
        std::time::Duration::from_millis(self.body_timeout_ms)
            + std::time::Duration::from_secs_f64(received as f64 / rate as f64)
    }
}

/// Storage settings.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct StorageSettings {
    /// Where state lives: `sqlite` (the data directory, one node) or `postgres` (a shared
    /// database, several nodes).
    pub backend: StorageBackend,
    /// fsync every commit (`true`, durable against power loss) or leave it to WAL
    /// checkpoints (`false`, durable against process crashes only). SQLite only.
    pub fsync: bool,
    /// The PostgreSQL URL (`postgres://user:password@host:port/db`); better given through
    /// `urlEnv`, so the password is not in the file.
    pub url: Option<String>,
    /// The environment variable holding the PostgreSQL URL when `url` is not set.
    pub url_env: String,
    /// How long the frame log of a settled task is kept after its last change, in seconds
    /// (each task also keeps at most its latest 1000 frames).
    pub frame_retention_secs: u64,
    /// The longest a PostgreSQL call may take, waiting for a connection included, ms: past it
    /// the call fails as unavailable (the A2A surface answers 503 with `Retry-After`).
    pub timeout_ms: u64,
}

/// Several nodes on one PostgreSQL database (`[storage] backend = "postgres"`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ClusterSettings {
    /// This node's name in leases and logs (default: the host name); a random suffix per
    /// process start makes the id unique.
    pub node: Option<String>,
    /// How long a running task's lease lasts unless its node renews it (every third of it);
    /// a task whose lease ran out is settled FAILED ("node lost") by another node.
    pub lease_ms: u64,
    /// A file holding the 32-byte key (base64) that seals the secrets the nodes share.
    pub secret_key_file: Option<std::path::PathBuf>,
    /// The environment variable holding that key when `secretKeyFile` is not set.
    pub secret_key_env: String,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            node: None,
            lease_ms: 15_000,
            secret_key_file: None,
            secret_key_env: "A2A_EDGE_SECRET_KEY".into(),
        }
    }
}

/// The store implementation.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StorageBackend {
    /// `<data-dir>/a2a-edge.db`.
    #[default]
    Sqlite,
    /// A PostgreSQL database.
    Postgres,
}

impl Default for StorageSettings {
    fn default() -> Self {
        StorageSettings {
            backend: StorageBackend::Sqlite,
            fsync: true,
            url: None,
            url_env: "A2A_EDGE_DATABASE_URL".into(),
            frame_retention_secs: 7 * 24 * 3600,
            timeout_ms: 5000,
        }
    }
}

impl StorageSettings {
    /// The PostgreSQL URL: `url`, else the variable `urlEnv` names.
    pub fn postgres_url(&self) -> anyhow::Result<String> {
        if let Some(url) = &self.url {
            return Ok(url.clone());
        }
        std::env::var(&self.url_env).map_err(|_| {
            anyhow::anyhow!(
                "[storage] backend = \"postgres\" needs the database URL: set {} (or url in the file)",
                self.url_env
            )
        })
    }
}

/// Protocol switches.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ProtocolSettings {
    /// Emit the seed's error numbers (docs/serving.md "Configuration",
    /// `[protocol] legacyErrorCodes`).
    pub legacy_error_codes: bool,
}

/// How callers' credentials are checked (docs/auth.md "Authentication").
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct IdentitySettings {
    /// The shortest time between two fetches of an OpenID Connect issuer's keys on an unknown
    /// `kid`, ms (keys are also refetched once they are 15 minutes old).
    pub jwks_min_refresh_ms: u64,
}

impl Default for IdentitySettings {
    fn default() -> Self {
        IdentitySettings {
            jwks_min_refresh_ms: 60_000,
        }
    }
}

/// Push-notification delivery: every task write is queued (durably, with the write) for each of
/// the task's webhooks and POSTed by the runtime, retried with exponential backoff and jitter.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PushSettings {
    /// Let webhooks reach loopback, private, shared and other internal addresses (tests and
    /// private deployments). Link-local addresses (cloud metadata) stay refused.
    pub allow_private_targets: bool,
    /// One delivery's time limit (connect, TLS, request and response head), ms.
    pub timeout_ms: u64,
    /// Attempts per notification before it is given up.
    pub max_attempts: u32,
    /// A notification older than this is given up instead of retried, seconds.
    pub max_age_secs: u64,
    /// The first retry's delay; each next one doubles it (with jitter), ms.
    pub retry_base_ms: u64,
    /// The longest delay between two attempts, ms.
    pub retry_max_ms: u64,
    /// Deliveries in flight at once (to different configs; one config's go one at a time).
    pub concurrency: u32,
    /// Deliveries in flight at once for the tasks of one instance.
    pub per_instance: u32,
    /// Deliveries in flight at once to one webhook host.
    pub per_host: u32,
}

impl Default for PushSettings {
    fn default() -> Self {
        PushSettings {
            allow_private_targets: false,
            timeout_ms: 10_000,
            max_attempts: 8,
            max_age_secs: 24 * 3600,
            retry_base_ms: 1000,
            retry_max_ms: 10 * 60_000,
            concurrency: 16,
            per_instance: 4,
            per_host: 4,
        }
    }
}

/// What cards say of the gRPC binding (served on the public listener either way).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct GrpcSettings {
    /// Cards list a GRPC interface.
    pub announce: bool,
    /// The URL they list, as written (default: the endpoint's scheme, host and port, e.g.
    /// `https://agents.example.com:443`).
    pub url: Option<String>,
}

impl Default for GrpcSettings {
    fn default() -> Self {
        GrpcSettings {
            announce: true,
            url: None,
        }
    }
}

impl GrpcSettings {
    /// The gRPC URL the card of the endpoint at `endpoint_url` announces, if any.
    pub fn announced(&self, endpoint_url: &str) -> Option<String> {
        if !self.announce {
            return None;
        }
        self.url
            .clone()
            .or_else(|| a2a_protocol::grpc::url(endpoint_url))
    }
}

/// The attachments service: `raw` parts stored under `<data-dir>/attachments/`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AttachmentSettings {
    /// Admit `raw` parts (off: they stay inline and the prompt shows a placeholder).
    pub enabled: bool,
    /// Largest attachment, bytes (decoded).
    pub max_bytes: u64,
    /// Media types admitted.
    pub media_types: Vec<String>,
}

impl Default for AttachmentSettings {
    fn default() -> Self {
        AttachmentSettings {
            enabled: false,
            max_bytes: 10 << 20,
            media_types: a2a_protocol::card::ATTACHMENT_MODES
                .iter()
                .chain(["text/plain", "application/pdf"].iter())
                .map(|m| (*m).to_owned())
                .collect(),
        }
    }
}

/// An inbound instance declared in the config. On every start it is created when missing and
/// otherwise reconciled: each field it declares wins over what the control API set; a field it
/// leaves out keeps the stored value.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceDecl {
    /// Explicit id (default: `<slug(name)>-<8 hex>`, and the entry is matched by name).
    #[serde(default)]
    pub id: Option<String>,
    /// Agent name.
    pub name: String,
    /// Agent description (default empty).
    #[serde(default)]
    pub description: Option<String>,
    /// Agent version (default `0.1.0`).
    #[serde(default)]
    pub version: Option<String>,
    /// Endpoint path (default `/a2a/<id>`).
    #[serde(default)]
    pub endpoint_path: Option<String>,
    /// Preset id (default: the default preset).
    #[serde(default)]
    pub preset: Option<String>,
    /// Environment variable holding the bearer token.
    #[serde(default)]
    pub auth_token_env: Option<String>,
    /// OpenID Connect bearer tokens (docs/auth.md "Authentication").
    #[serde(default)]
    pub oidc: Option<crate::records::OidcSettings>,
    /// Client certificates (mutual TLS; needs `[tls] clientCaFile`).
    #[serde(default)]
    pub mtls: Option<crate::records::MtlsSettings>,
    /// Serve it (default true).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Serve push notifications.
    #[serde(default)]
    pub push_notifications: Option<bool>,
    /// Serve A2A 0.3 callers too (default true).
    #[serde(default)]
    pub compat03: Option<bool>,
    /// Run requests on kept instances of a third-party component (default false).
    #[serde(default)]
    pub reuse_instances: Option<bool>,
    /// Component name (default `a2a-server`).
    #[serde(default)]
    pub component: Option<String>,
    /// Limits overriding the defaults.
    #[serde(default)]
    pub limits: Option<Limits>,
}

/// An outbound connection declared in the config; reconciled on every start like
/// [`InstanceDecl`] (declared fields win; the file may also move `agentCardUrl`).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionDecl {
    /// Explicit id (default: `<slug(name)>-<8 hex>`).
    #[serde(default)]
    pub id: Option<String>,
    /// Name (tools are named after it).
    pub name: String,
    /// The remote AgentCard URL.
    pub agent_card_url: String,
    /// Secret holding the bearer token sent to the remote.
    #[serde(default)]
    pub bearer_token_env: Option<String>,
    /// OAuth 2.0 client credentials instead of `bearerTokenEnv`.
    #[serde(default)]
    pub oauth: Option<crate::records::OAuthClient>,
    /// Only sessions of this preset see its tools.
    #[serde(default)]
    pub preset: Option<String>,
    /// Connected on start (default true).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Longest a remote call may take, ms (default 60000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Skills that register no tool.
    #[serde(default)]
    pub disabled_skills: Option<Vec<String>>,
    /// Tool name/description overrides by skill id.
    #[serde(default)]
    pub skill_overrides: Option<std::collections::BTreeMap<String, SkillOverride>>,
    /// Let endpoints the remote card announces (and redirects) reach internal addresses.
    #[serde(default)]
    pub allow_private: Option<bool>,
}

impl Config {
    /// `Ok` when instances may take client certificates: the listener asks for them.
    pub fn client_certificates(&self) -> Result<(), String> {
        match &self.tls {
            Some(t) if t.client_ca_file.is_some() => Ok(()),
            _ => Err("mutual TLS needs the listener to ask for client certificates: set [tls] certFile, keyFile and clientCaFile in the config file".into()),
        }
    }

    /// Reads a config file; errors name the file and the problem.
    pub fn load(path: &Path) -> anyhow::Result<Config> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read config {}: {e}", path.display()))?;
        let mut config: Config = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("config {} is invalid: {e}", path.display()))?;
        config.source = Some(path.to_owned());
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        config.resolve_paths(&dir);
        config
            .validate()
            .and_then(|()| config.check_commands(&dir))
            .map_err(|e| anyhow::anyhow!("config {}: {e}", path.display()))?;
        Ok(config)
    }

    /// Makes the relative paths of command presets relative to `dir`, the config file's
    /// directory, not to where `serve` was started: `workingDir`, and a program named with a `/`
    /// (relative to its `workingDir` when one is set, where a shell running it would look).
    fn resolve_paths(&mut self, dir: &Path) {
        if let Some(t) = self.tls.as_mut() {
            for file in [
                Some(&mut t.cert_file),
                Some(&mut t.key_file),
                t.client_ca_file.as_mut(),
            ]
            .into_iter()
            .flatten()
            .filter(|f| f.is_relative())
            {
                *file = dir.join(&*file);
            }
        }
        if let Some(ca) = self.egress.ca_file.as_mut().filter(|f| f.is_relative()) {
            *ca = dir.join(&*ca);
        }
        for p in &mut self.presets {
            let Backend::Command(c) = &mut p.backend else {
                continue;
            };
            if let Some(wd) = c.working_dir.as_mut().filter(|w| w.is_relative()) {
                *wd = dir.join(&*wd);
            }
            let base = c.working_dir.clone().unwrap_or_else(|| dir.to_owned());
            if let Some(program) = c.command.first_mut()
                && program.contains('/')
                && Path::new(program.as_str()).is_relative()
            {
                let relative: PathBuf = Path::new(program.as_str())
                    .components()
                    .filter(|c| !matches!(c, std::path::Component::CurDir))
                    .collect();
                *program = base.join(relative).display().to_string();
            }
        }
    }

    /// Checks that every command preset's program exists and is executable (a program named
    /// without a `/` is looked up on `PATH`) and that its working directory exists: a preset
    /// that cannot run would fail every turn.
    fn check_commands(&self, dir: &Path) -> anyhow::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        let runnable = |p: &Path| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        };
        let relative = format!(
            "relative paths are taken from the config file's directory {}",
            dir.display()
        );
        for p in &self.presets {
            let Backend::Command(c) = &p.backend else {
                continue;
            };
            let from = match &c.working_dir {
                Some(wd) => format!(
                    "a relative command is taken from the preset's workingDir {}",
                    wd.display()
                ),
                None => relative.clone(),
            };
            let Some(program) = c.command.first() else {
                continue;
            };
            if program.contains('/') {
                if !runnable(Path::new(program)) {
                    anyhow::bail!(
                        "preset {:?}: the command {program} does not exist or is not executable ({from})",
                        p.id
                    );
                }
            } else {
                let path = std::env::var_os("PATH").unwrap_or_default();
                if !std::env::split_paths(&path).any(|d| runnable(&d.join(program))) {
                    anyhow::bail!(
                        "preset {:?}: the command {program:?} is not an executable on PATH; name it by its path",
                        p.id
                    );
                }
            }
            if let Some(wd) = &c.working_dir
                && !wd.is_dir()
            {
                anyhow::bail!(
                    "preset {:?}: the working directory {} does not exist ({relative})",
                    p.id,
                    wd.display()
                );
            }
        }
        Ok(())
    }

    /// Checks cross-field rules.
    pub fn validate(&self) -> anyhow::Result<()> {
        crate::telemetry::trace::check(&self.telemetry)?;
        if self.sessions.max_live == 0 || self.sessions.idle_secs == 0 {
            anyhow::bail!(
                "[sessions] maxLive and idleSecs must be at least 1 (defaults 10000 and 600)"
            );
        }
        for p in &self.presets {
            if p.skills.len() > a2a_protocol::bounds::MAX_SKILLS {
                anyhow::bail!(
                    "preset {:?}: {} skills; the most is {}",
                    p.id,
                    p.skills.len(),
                    a2a_protocol::bounds::MAX_SKILLS
                );
            }
            for skill in &p.skills {
                use a2a_protocol::bounds::{
                    MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, check, check_id,
                };
                let bounded = check_id("skill id", &skill.id)
                    .and(check(
                        "skill name",
                        skill.name.as_deref().unwrap_or(""),
                        MAX_NAME_CHARS,
                    ))
                    .and(check(
                        "skill description",
                        &skill.description,
                        MAX_DESCRIPTION_CHARS,
                    ));
                if let Err(e) = bounded {
                    anyhow::bail!("preset {:?}: {e}", p.id);
                }
            }
        }
        if self.presets.iter().filter(|p| p.default).count() > 1 {
            anyhow::bail!("more than one preset has default = true");
        }
        self.limits
            .check()
            .map_err(|e| anyhow::anyhow!("[limits]: {e}"))?;
        let p = &self.push;
        if p.timeout_ms == 0 || p.max_attempts == 0 || p.concurrency == 0 || p.retry_base_ms == 0 {
            anyhow::bail!(
                "[push]: timeoutMs, maxAttempts, concurrency and retryBaseMs must be at least 1"
            );
        }
        if p.retry_max_ms < p.retry_base_ms {
            anyhow::bail!("[push]: retryMaxMs must be at least retryBaseMs");
        }
        Ok(())
    }

    /// Every preset: the configured ones, plus the built-in `echo` and `scripted` unless configured.
    pub fn all_presets(&self) -> Vec<Preset> {
        let mut presets = self.presets.clone();
        if !presets.iter().any(|p| p.id == "echo") {
            presets.insert(
                0,
                Preset::builtin(
                    "echo",
                    "Echo",
                    "Replies with the prompt, word by word.",
                    Backend::Echo,
                ),
            );
        }
        if !presets.iter().any(|p| p.id == "scripted") {
            presets.push(Preset::builtin("scripted", "Scripted", "Deterministic conformance behaviours (A2A TCK tck-* prefixes); echoes anything else.", Backend::Scripted));
        }
        if !presets.iter().any(|p| p.default)
            && let Some(echo) = presets.iter_mut().find(|p| p.id == "echo")
        {
            echo.default = true;
        }
        presets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_has_working_defaults() {
        let c: Config = toml::from_str("").unwrap();
        let presets = c.all_presets();
        assert_eq!(
            presets.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            ["echo", "scripted"]
        );
        assert!(presets[0].default && !presets[1].default);
        assert_eq!(c.limits.max_body_bytes, 1 << 20);
    }

    #[test]
    fn unknown_keys_and_backends_are_refused() {
        assert!(toml::from_str::<Config>("nope = 1").is_err());
        let e = toml::from_str::<Config>("[[presets]]\nid = \"x\"\nbackend = \"telepathy\"")
            .unwrap_err();
        assert!(e.to_string().contains("unknown backend"), "{e}");
        let e =
            toml::from_str::<Config>("[[presets]]\nid = \"x\"\nbackend = \"command\"").unwrap_err();
        assert!(e.to_string().contains("needs `command"), "{e}");
    }

    #[test]
    fn instances_as_code() {
        let c: Config = toml::from_str(
            "[[instances]]\nid = \"bot\"\nname = \"Bot\"\n[instances.limits]\nmaxBodyBytes = 10",
        )
        .unwrap();
        let i = &c.instances[0];
        assert_eq!(
            (i.id.as_deref(), i.enabled, i.version.as_deref()),
            (Some("bot"), None, None)
        );
        assert_eq!(i.limits.unwrap().max_body_bytes, 10);
    }
}
