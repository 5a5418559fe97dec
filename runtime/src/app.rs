//! The assembly of the runtime: the store, the engine and its hosts, the services, the
//! outbound connections and the instances, wired together at start; and the instance table
//! every request reads.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context;

use crate::config::{Config, StorageBackend};
use crate::credentials::{Credentials, SecretKey};
use crate::engine::Engine;
use crate::hosts::agent::{AgentHost, Runner};
use crate::hosts::server::{Host, Services};
use crate::instances::{Instance, Routes};
use crate::outbound::client::ClientHost;
use crate::outbound::{Outbound, SessionToolbox};
use crate::records::InstanceRecord;
use crate::sessions::Sessions;
use crate::sessions::preset::{self, Preset};
use crate::store::{Lease, PostgresStore, SqliteStore, Store};

/// Everything requests share.
pub struct App {
    /// The configuration.
    pub config: Config,
    /// Where data lives.
    pub data_dir: PathBuf,
    /// Public base URL (no trailing `/`).
    pub base_url: String,
    /// Durable state.
    pub store: Arc<dyn Store>,
    /// The server world's host, and the services its requests reach.
    pub host: Host,
    /// Secrets by name (file layer, then environment).
    pub credentials: Arc<Credentials>,
    /// Outbound connections.
    pub outbound: Arc<Outbound>,
    /// The agents' host: the agent components behind `component` presets.
    pub agents: Arc<AgentHost>,
    /// The update check.
    pub update: crate::update::UpdateCheck,
    /// Checks OpenID Connect tokens.
    pub verifier: crate::identity::oidc::Verifier,
    /// TLS on the public listener (`[tls]`).
    pub tls: Option<Arc<crate::tls::Tls>>,
    /// The latest readiness answer (`/readyz`): whether ready, and the checks.
    pub readiness: crate::memo::Memo<(bool, serde_json::Value)>,
    table: RwLock<Table>,
    /// One rebuild of the table at a time, so none is built on presets another replaced.
    assembling: tokio::sync::Mutex<()>,
}

/// The presets, the instance records and what is served of them, swapped whole.
#[derive(Default)]
struct Table {
    presets: Arc<[Preset]>,
    records: Vec<InstanceRecord>,
    instances: Vec<Arc<Instance>>,
    routes: Arc<Routes>,
}

impl App {
    /// Opens the data directory, recovers interrupted tasks, reconciles the declarations, loads
    /// components, and assembles the instances, served on `listen` (and `control`), which its
    /// own requests never reach.
    pub async fn start(
        config: Config,
        data_dir: PathBuf,
        listen: SocketAddr,
        control: Option<SocketAddr>,
    ) -> anyhow::Result<Arc<App>> {
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
        let tls = config
            .tls
            .clone()
            .map(crate::tls::Tls::load)
            .transpose()?
            .map(Arc::new);
        // The cluster key seals what a shared database keeps: checked before connecting.
        let key = match config.storage.backend {
            StorageBackend::Postgres => {
                let c = &config.cluster;
                Some(SecretKey::load(
                    c.secret_key_file.as_deref(),
                    &c.secret_key_env,
                )?)
            }
            StorageBackend::Sqlite => None,
        };
        let store: Arc<dyn Store> = match config.storage.backend {
            StorageBackend::Sqlite => Arc::new(SqliteStore::open(
                &data_dir.join(crate::store::SQLITE_FILE),
                config.storage.fsync,
            )?),
            StorageBackend::Postgres => {
                let c = &config.cluster;
                let lease = Lease::new(c.node.as_deref(), c.lease_ms.max(1000));
                tracing::info!(node = %lease.node, lease_ms = lease.ttl_ms, "joining the nodes on the shared database");
                let timeout = Duration::from_millis(config.storage.timeout_ms.max(100));
                let url = config.storage.postgres_url()?;
                let key = key.clone().expect("loaded for a shared store");
                Arc::new(
                    PostgresStore::connect(&url, lease, timeout)
                        .await?
                        .sealing(key),
                )
            }
        };
        let run_dir = data_dir.join("run");
        let reaped = crate::sessions::groups::reap(&run_dir);
        if reaped > 0 {
            tracing::warn!(
                processes = reaped,
                "killed command processes a previous runtime left running"
            );
        }
        crate::settlement::at_start(&*store).await?;
        crate::declared::seed_connections(&config, &*store).await?;
        let engine = Arc::new(tokio::task::block_in_place(|| {
            Engine::new(&config.runtime, &data_dir)
        })?);
        let credentials = Arc::new(match key {
            Some(key) => Credentials::shared(store.clone(), key).await?,
            None => Credentials::open(&data_dir)?,
        });
        let exit = crate::egress::Exit::new(&config.egress)?;
        exit.refuse_own(listen, control);
        // The operator's connections may chain instances of this runtime; nothing else does.
        let connections = exit.reaching_own_instances();
        let client =
            tokio::task::block_in_place(|| ClientHost::new(engine.clone(), connections.clone()))?;
        let outbound =
            Arc::new(Outbound::new(store.clone(), credentials.clone(), client, connections).await?);
        let presets = config.all_presets();
        let sessions =
            Arc::new(Sessions::new(&presets, Some(run_dir), &exit).limited(config.sessions));
        let services = services(
            &config,
            &data_dir,
            store.clone(),
            sessions,
            outbound.clone(),
            exit.clone(),
            engine.max_instances,
        );
        let agents = Arc::new(AgentHost::new(
            &engine.cache_dir,
            data_dir.join("components"),
            &presets,
            store.clone(),
            exit.clone(),
            services.metrics.clone(),
        )?);
        services
            .sessions
            .run_agents_on(Arc::new(Runner(agents.clone())));
        agents.preload(preset::agents(&config.presets).into_keys().collect());
        let host = tokio::task::block_in_place(|| Host::new(engine, &data_dir, services))?;
        crate::declared::seed_instances(&config, &*store, |c| host.registry.get(c).is_some())
            .await?;
        let base_url = config
            .public_base_url
            .clone()
            .unwrap_or_else(|| {
                let scheme = if tls.is_some() { "https" } else { "http" };
                format!("{scheme}://{listen}")
            })
            .trim_end_matches('/')
            .to_owned();
        let update = crate::update::UpdateCheck::new(config.update.clone(), &exit);
        let verifier = crate::identity::oidc::Verifier::new(
            exit,
            Duration::from_millis(config.identity.jwks_min_refresh_ms),
        );
        let app = Arc::new(App {
            config,
            data_dir,
            base_url,
            store,
            host,
            credentials,
            outbound,
            agents,
            update,
            verifier,
            tls,
            readiness: crate::memo::Memo::new(Duration::from_secs(1)),
            table: RwLock::new(Table {
                presets: presets.into(),
                ..Table::default()
            }),
            assembling: tokio::sync::Mutex::default(),
        });
        app.reassemble().await?;
        Ok(app)
    }

    /// The services requests reach.
    pub fn services(&self) -> &Services {
        self.host.services()
    }

    /// The presets in effect: the configured ones and the built-in ones
    /// (docs/serving.md "Configuration"), as the latest start or reload left them.
    pub fn presets(&self) -> Arc<[Preset]> {
        self.table.read().unwrap().presets.clone()
    }

    /// Puts `presets` into effect: new turns run on their backends (running turns finish on
    /// the ones they began with), the agents they name load, and every instance is rebuilt.
    /// Refused, changing nothing, when a stored instance names a preset they lack or their
    /// agent components need a larger pool than the one made at start.
    pub async fn set_presets(&self, presets: Vec<Preset>) -> anyhow::Result<()> {
        let _one = self.assembling.lock().await;
        let records = self.store.instances().await?;
        if let Some(r) = records
            .iter()
            .find(|r| !presets.iter().any(|p| p.id == r.preset))
        {
            anyhow::bail!(
                "instance {:?} runs on preset {:?}, which the file no longer has: move the instance to another preset first (inbound update --preset)",
                r.id,
                r.preset
            );
        }
        self.agents.fits(&presets)?;
        self.services().sessions.set_presets(&presets);
        self.agents
            .preload(preset::agents(&presets).into_keys().collect());
        self.table.write().unwrap().presets = presets.into();
        self.assemble().await
    }

    /// Rebuilds every instance from the store and swaps the table.
    pub async fn reassemble(&self) -> anyhow::Result<()> {
        let _one = self.assembling.lock().await;
        self.assemble().await
    }

    /// [`App::reassemble`], the caller holding `assembling`.
    async fn assemble(&self) -> anyhow::Result<()> {
        let records = self.store.instances().await?;
        let presets = self.presets();
        let mut built = Vec::new();
        for record in &records {
            let Some(preset) = presets.iter().find(|p| p.id == record.preset).cloned() else {
                tracing::error!(id = %record.id, preset = %record.preset, "instance names an unknown preset; it is not served");
                continue;
            };
            if self.host.registry.get(&record.component).is_none() {
                tracing::error!(id = %record.id, component = %record.component, "instance names an unknown component; it is not served");
                continue;
            }
            let token = record
                .auth_token_env
                .as_deref()
                .and_then(|name| self.credentials.resolve(name));
            if record.auth_token_env.is_some() && token.is_none() {
                tracing::warn!(id = %record.id, secret = ?record.auth_token_env, "the instance's token secret is not set; its endpoint refuses every call until it is set");
            }
            let endpoint_url = format!("{}{}", self.base_url, record.endpoint_path);
            let grpc_url = self.config.grpc.announced(&endpoint_url);
            built.push(Arc::new(Instance {
                record: record.clone(),
                preset,
                token,
                endpoint_url,
                grpc_url,
                generation: crate::instances::next_generation(),
            }));
        }
        let routes = Arc::new(Routes::new(
            &built,
            self.config.well_known_instance.as_deref(),
        ));
        let mut table = self.table.write().unwrap();
        (table.records, table.instances, table.routes) = (records, built, routes);
        Ok(())
    }

    /// The current route table.
    pub fn routes(&self) -> Arc<Routes> {
        self.table.read().unwrap().routes.clone()
    }

    /// Every assembled instance.
    pub fn instances(&self) -> Vec<Arc<Instance>> {
        self.table.read().unwrap().instances.clone()
    }

    /// Every stored instance record (served or not), by id.
    pub fn records(&self) -> Vec<InstanceRecord> {
        self.table.read().unwrap().records.clone()
    }

    /// The stored record of an instance.
    pub fn record(&self, id: &str) -> Option<InstanceRecord> {
        self.table
            .read()
            .unwrap()
            .records
            .iter()
            .find(|r| r.id == id)
            .cloned()
    }

    /// Stores a changed record and reassembles.
    pub async fn save_instance(&self, record: InstanceRecord) -> anyhow::Result<()> {
        self.store.put_instance(record).await?;
        self.reassemble().await
    }

    /// Deletes a record and reassembles.
    pub async fn remove_instance(&self, id: &str) -> anyhow::Result<()> {
        self.store.delete_instance(id.to_owned()).await?;
        self.reassemble().await
    }
}

/// The services requests reach, over the store and the outbound connections.
fn services(
    config: &Config,
    data_dir: &std::path::Path,
    store: Arc<dyn Store>,
    sessions: Arc<Sessions>,
    outbound: Arc<Outbound>,
    exit: crate::egress::Exit,
    max_instances: u32,
) -> Services {
    Services {
        store,
        events: Arc::default(),
        sessions,
        admission: Arc::default(),
        attachments: Arc::new(crate::attachments::Attachments::new(
            data_dir,
            config.attachments.clone(),
        )),
        webhooks: Arc::new(
            crate::push::Webhooks::new(
                config.push.allow_private_targets,
                Duration::from_millis(config.push.timeout_ms),
            )
            .through(exit),
        ),
        activity: Arc::default(),
        holds: Default::default(),
        owed: Arc::default(),
        metrics: Arc::default(),
        toolbox: Arc::new(SessionToolbox(outbound)),
        provider: config.provider.clone(),
        legacy_error_codes: config.protocol.legacy_error_codes,
        instance_wait: Duration::from_millis(config.runtime.instance_wait_ms),
        max_instances,
        warm_instances: config.runtime.warm_instances,
        max_streams: config.runtime.max_streams,
    }
}
