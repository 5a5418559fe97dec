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
        let run_dir = data_dir.join("run");
        let reaped = crate::sessions::groups::reap(&run_dir);
        if reaped > 0 {
            tracing::warn!(processes = reaped, "killed command processes a previous runtime left running");
        }
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
            sessions: Sessions::new(&config.all_presets(), Some(run_dir)),
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

    /// Where a declaration sits, for errors: `config <file>: [[kind]] entry <n> ("<name>")`.
    fn declared_at(&self, kind: &str, index: usize, name: &str) -> String {
        let file = self.config.source.as_ref().map_or_else(|| "the configuration".to_owned(), |p| format!("config {}", p.display()));
        format!("{file}: [[{kind}]] entry {} ({name:?})", index + 1)
    }

    /// Reconciles the declared instances with the store (created when missing; each declared
    /// field wins); on a first start without any, `demo`. An invalid declaration refuses the
    /// start, naming the file, the entry and the field.
    fn seed_instances(&self) -> anyhow::Result<()> {
        let mut all = self.store.instances()?;
        let now = now_ms();
        let mut changed = Vec::new();
        for (index, decl) in self.config.instances.iter().enumerate() {
            let at = self.declared_at("instances", index, &decl.name);
            let stored = match &decl.id {
                Some(id) => all.iter().position(|r| &r.id == id),
                None => all.iter().position(|r| r.name == decl.name),
            };
            let record = instances::reconcile(decl, stored.map(|i| &all[i]), &self.config, |c| self.host.registry.get(c).is_some(), now)
                .map_err(|(field, why)| anyhow::anyhow!("{at}: field {field:?}: {why}"))?;
            let others = all.iter().filter(|o| o.id != record.id).map(|o| (o.id.as_str(), o.endpoint_path.as_str()));
            instances::check_endpoint_free(&record.endpoint_path, others).map_err(|why| anyhow::anyhow!("{at}: field \"endpointPath\": {why}"))?;
            match stored {
                Some(i) if all[i] == record => continue,
                Some(i) => all[i] = record.clone(),
                None => all.push(record.clone()),
            }
            changed.push((stored.is_some(), record));
        }
        if all.is_empty() && self.config.instances.is_empty() {
            changed.push((false, instances::demo(&self.config, now)));
        }
        for (existed, record) in changed {
            tracing::info!(id = %record.id, "{}", if existed { "updated inbound instance from the configuration" } else { "created inbound instance" });
            wait_write(self.store.put_instance(record))?;
        }
        Ok(())
    }

    /// Reconciles the declared outbound connections with the store, like instances.
    fn seed_connections(&self) -> anyhow::Result<()> {
        let existing = self.store.connections()?;
        let now = now_ms();
        for (index, d) in self.config.connections.iter().enumerate() {
            let stored = match &d.id {
                Some(id) => existing.iter().find(|r| &r.id == id),
                None => existing.iter().find(|r| r.name == d.name),
            };
            let record = crate::outbound::reconcile(d, stored, &self.config, now)
                .map_err(|(field, why)| anyhow::anyhow!("{}: field {field:?}: {why}", self.declared_at("connections", index, &d.name)))?;
            if stored == Some(&record) {
                continue;
            }
            tracing::info!(id = %record.id, "{} outbound connection from the configuration", if stored.is_some() { "updated" } else { "created" });
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
