//! The runtime's shared state, and how it starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use anyhow::Context;

use crate::admission::Admission;
use crate::config::Config;
use crate::events::EventHub;
use crate::host::Host;
use crate::instances::{self, Instance, Routes};
use crate::sessions::Sessions;
use crate::store::{InstanceRecord, SqliteStore, Store, settled};
use crate::tasks::now_ms;

/// Everything requests share.
pub struct App {
    /// The configuration.
    pub config: Config,
    /// Where data lives.
    pub data_dir: PathBuf,
    /// Public base URL (no trailing `/`).
    pub base_url: String,
    /// Durable state.
    pub store: Arc<SqliteStore>,
    /// Frame logs.
    pub events: EventHub,
    /// Live sessions.
    pub sessions: Sessions,
    /// Rate limits and slots.
    pub admission: Admission,
    /// Stored attachments.
    pub attachments: crate::attachments::Attachments,
    /// The wasmtime host.
    pub host: Host,
    /// Secrets by name (file layer, then environment).
    pub credentials: crate::credentials::Credentials,
    /// Peers and open streams.
    pub activity: crate::activity::Activity,
    /// Counters.
    pub metrics: crate::metrics::Metrics,
    /// The update check.
    pub update: crate::update::UpdateCheck,
    /// Outbound connections' live state.
    pub outbound: crate::outbound::Outbound,
    instances: RwLock<Vec<Arc<Instance>>>,
    routes: RwLock<Arc<Routes>>,
}

impl App {
    /// Opens the data directory, recovers interrupted tasks, loads components and instances.
    pub fn start(config: Config, data_dir: PathBuf, listen: SocketAddr) -> anyhow::Result<Arc<App>> {
        std::fs::create_dir_all(&data_dir).with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
        let store = Arc::new(SqliteStore::open(&data_dir.join("a2a-edge.db"), config.storage.fsync)?);
        let recovered = wait_write(store.fail_unsettled(now_ms(), "interrupted by runtime restart".into()))?;
        if recovered > 0 {
            tracing::warn!(tasks = recovered, "settled tasks left running by a previous process as FAILED");
        }
        let host = Host::new(&config.runtime, &data_dir)?;
        let base_url = config.public_base_url.clone().unwrap_or_else(|| format!("http://{listen}")).trim_end_matches('/').to_owned();
        let attachments = crate::attachments::Attachments::new(&data_dir, config.attachments.clone());
        let credentials = crate::credentials::Credentials::open(&data_dir)?;
        let update = crate::update::UpdateCheck::new(config.update.clone());
        let app = Arc::new(App {
            sessions: Sessions::new(&config.all_presets()),
            config,
            data_dir,
            base_url,
            store,
            events: EventHub::default(),
            admission: Admission::default(),
            attachments,
            host,
            credentials,
            activity: Default::default(),
            metrics: Default::default(),
            update,
            outbound: Default::default(),
            instances: RwLock::default(),
            routes: RwLock::default(),
        });
        app.seed_instances()?;
        app.seed_connections()?;
        app.reassemble()?;
        Ok(app)
    }

    /// Creates declared instances that are missing; on a first start without any, `demo`.
    fn seed_instances(&self) -> anyhow::Result<()> {
        let existing = self.store.instances()?;
        let now = now_ms();
        let mut new = Vec::new();
        for decl in &self.config.instances {
            if decl.id.as_ref().is_some_and(|id| existing.iter().any(|r| &r.id == id)) {
                continue;
            }
            if decl.id.is_none() && existing.iter().any(|r| r.name == decl.name) {
                continue;
            }
            new.push(instances::record_from_decl(decl, &self.config, now).map_err(|e| anyhow::anyhow!("instance {:?} in the config: {e}", decl.name))?);
        }
        if existing.is_empty() && self.config.instances.is_empty() {
            new.push(instances::demo(&self.config, now));
        }
        for record in new {
            tracing::info!(id = %record.id, "created inbound instance");
            wait_write(self.store.put_instance(record))?;
        }
        Ok(())
    }

    /// Creates declared outbound connections that are missing (by id, else by name).
    fn seed_connections(&self) -> anyhow::Result<()> {
        let existing = self.store.connections()?;
        let now = now_ms();
        for d in &self.config.connections {
            let known = match &d.id {
                Some(id) => existing.iter().any(|r| &r.id == id),
                None => existing.iter().any(|r| r.name == d.name),
            };
            if known {
                continue;
            }
            let record = crate::store::ConnectionRecord {
                id: d.id.clone().unwrap_or_else(|| instances::new_id(&d.name)),
                name: d.name.clone(),
                agent_card_url: d.agent_card_url.clone(),
                bearer_token_env: d.bearer_token_env.clone(),
                preset: d.preset.clone(),
                enabled: d.enabled,
                timeout_ms: d.timeout_ms.unwrap_or(crate::outbound::DEFAULT_TIMEOUT_MS),
                disabled_skills: d.disabled_skills.clone(),
                skill_overrides: d.skill_overrides.clone(),
                created_at: now,
                updated_at: now,
            };
            tracing::info!(id = %record.id, "created outbound connection");
            wait_write(self.store.put_connection(record))?;
        }
        Ok(())
    }

    /// Rebuilds every instance from the store and swaps the route table.
    pub fn reassemble(&self) -> anyhow::Result<()> {
        let presets = self.config.all_presets();
        let mut built = Vec::new();
        for record in self.store.instances()? {
            let Some(preset) = presets.iter().find(|p| p.id == record.preset).cloned() else {
                tracing::error!(id = %record.id, preset = %record.preset, "instance names an unknown preset; it is not served");
                continue;
            };
            if self.host.registry.get(&record.component).is_none() {
                tracing::error!(id = %record.id, component = %record.component, "instance names an unknown component; it is not served");
                continue;
            }
            let token = record.auth_token_env.as_deref().and_then(|name| self.credentials.resolve(name));
            if record.auth_token_env.is_some() && token.is_none() {
                tracing::warn!(id = %record.id, secret = ?record.auth_token_env, "the instance's token secret is not set; its endpoint refuses every call until it is set");
            }
            let endpoint_url = format!("{}{}", self.base_url, record.endpoint_path);
            built.push(Arc::new(Instance { record, preset, token, endpoint_url }));
        }
        let routes = Arc::new(Routes::new(&built, self.config.well_known_instance.as_deref()));
        *self.instances.write().unwrap() = built;
        *self.routes.write().unwrap() = routes;
        Ok(())
    }

    /// The current route table.
    pub fn routes(&self) -> Arc<Routes> {
        self.routes.read().unwrap().clone()
    }

    /// Every assembled instance.
    pub fn instances(&self) -> Vec<Arc<Instance>> {
        self.instances.read().unwrap().clone()
    }

    /// The stored record of an instance.
    pub fn store_instance(&self, id: &str) -> Option<InstanceRecord> {
        self.store.instances().ok()?.into_iter().find(|r| r.id == id)
    }

    /// Stores a changed record and reassembles.
    pub async fn save_instance(&self, record: InstanceRecord) -> anyhow::Result<()> {
        settled(self.store.put_instance(record)).await?;
        self.reassemble()
    }
}

/// Waits for a store write from synchronous start-up code.
fn wait_write<T>(p: crate::store::Pending<T>) -> anyhow::Result<T> {
    Ok(p.blocking_recv().map_err(|_| anyhow::anyhow!("the store stopped"))??)
}
