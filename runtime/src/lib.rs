//! a2a-edge: an A2A 1.0.1 edge service. A wasmtime runtime hosts the protocol components
//! (`wasm32-wasip2`, WASI HTTP) and gives them storage, events, sessions and admission.
//!
//! A request's way: [`server`] accepts it, guards the surface and routes it; the A2A surface
//! authenticates and bounds it before [`hosts::server::Host::handle`] prepares a store whose capabilities
//! (one per `a2a:edge` interface, built from [`hosts::server::Services`]) reach the [`store`], the
//! [`events`] logs, the [`sessions`] and the [`admission`] gate; the component decides, the host
//! stores, schedules, limits and counts. The control surface runs [`control`] actions on the
//! [`app::App`] assembly. The layers import only downwards; `docs/ARCHITECTURE.md` lists them.
#![deny(missing_docs)]
#![allow(
    clippy::result_large_err,
    reason = "handlers return early with a ready HTTP response or the WIT's store error; boxing \
              them would cost an allocation on the paths that answer at once, for no gain"
)]

pub mod activity;
pub mod admission;
pub mod app;
pub mod attachments;
pub mod body;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod command;
pub mod config;
pub mod control;
pub mod credentials;
pub mod data_dir;
pub mod declared;
pub mod egress;
pub mod engine;
pub mod events;
pub mod feed;
pub mod holds;
pub mod hosts;
pub mod identity;
pub mod instances;
pub mod memo;
pub mod outbound;
pub mod panel;
pub mod pem_files;
pub mod push;
pub mod records;
pub mod reload;
pub mod responses;
pub mod sealing;
pub mod server;
pub mod sessions;
pub mod settlement;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod update;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// Most open connections of a control listener of its own.
const CONTROL_CONNECTIONS: u32 = 256;

/// Raises the soft limit of open files to the hard limit (a server holds one per connection and
/// the default soft limit is often 1024); returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    lim.rlim_cur
}

/// Samples the traffic for the panel's charts every [`telemetry::series::STEP`] until `stop`.
async fn sample_traffic(metrics: Arc<telemetry::Metrics>, stop: CancellationToken) {
    let mut every = tokio::time::interval(telemetry::series::STEP);
    // After a stall the next sample comes a step later, not in a burst of short intervals.
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => metrics.sample(clock::now_ms()),
        }
    }
}

/// Memory the allocator may hold freed before it is given back to the system.
const KEEP_FREED_BYTES: usize = 32 << 20;

/// Gives freed memory back to the system: glibc's allocator keeps the freed pages of its arenas
/// (measured: 10,000 closed streams left ~270 MiB resident; 20 agent turns of 7 MiB answers
/// ~800 MiB), so when more than [`KEEP_FREED_BYTES`] lie free the arenas are trimmed, off the
/// request path.
async fn return_freed_memory(shutdown: CancellationToken) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        }
        let _ = tokio::task::spawn_blocking(|| {
            // SAFETY: mallinfo2 reads the allocator's counters; malloc_trim only returns free
            // memory of its arenas to the system.
            unsafe {
                if libc::mallinfo2().fordblks > KEEP_FREED_BYTES {
                    libc::malloc_trim(0);
                }
            }
        })
        .await;
    }
}

/// Where the runtime listens (docs/control.md "Control API").
#[derive(Clone, Copy, Debug)]
pub struct Listen {
    /// The A2A endpoints (and the control surface, without `control`).
    pub public: SocketAddr,
    /// A loopback address of its own for `/a2a/api` and `/a2a/ui`.
    pub control: Option<SocketAddr>,
}

impl Listen {
    /// Refuses what docs/control.md "Control API" forbids: beyond loopback without `publicBaseUrl`, a control listener
    /// beyond loopback. Whether the public listener reaches beyond loopback.
    pub fn check(&self, config: &config::Config) -> anyhow::Result<bool> {
        let exposed = !server::surface_guard::listens_on_loopback(self.public.ip());
        if exposed && config.public_base_url.is_none() {
            anyhow::bail!(
                "listening on {} reaches beyond loopback, so cards need a URL clients can reach: set publicBaseUrl in the config (e.g. publicBaseUrl = \"https://agents.example.com\"), or listen on 127.0.0.1",
                self.public
            );
        }
        if let Some(c) = self
            .control
            .filter(|c| !server::surface_guard::listens_on_loopback(c.ip()))
        {
            anyhow::bail!(
                "--control-listen {c} must be a loopback address (127.0.0.1:PORT or [::1]:PORT): the control API is for this machine only"
            );
        }
        Ok(exposed)
    }
}

/// A running server (for the CLI and in-process tests).
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// The bound control address, when the control surface has a listener of its own.
    pub control_addr: Option<SocketAddr>,
    /// The runtime state.
    pub app: Arc<app::App>,
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The data directory's lock, released once the store is closed.
    _lock: data_dir::Lock,
}

impl Running {
    /// Binds `listen`, starts the runtime and serves in the background.
    pub async fn start(
        config: config::Config,
        data_dir: PathBuf,
        listen: SocketAddr,
    ) -> anyhow::Result<Running> {
        Running::start_on(
            config,
            data_dir,
            Listen {
                public: listen,
                control: None,
            },
        )
        .await
    }

    /// Binds the listeners of `listen`, starts the runtime and serves in the background.
    /// A listener beyond loopback needs `publicBaseUrl`; the control listener must be loopback.
    pub async fn start_on(
        config: config::Config,
        data_dir: PathBuf,
        listen: Listen,
    ) -> anyhow::Result<Running> {
        let exposed = listen.check(&config)?;
        let bind = |addr: SocketAddr| async move {
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
        };
        let listener = bind(listen.public).await?;
        let control = match listen.control {
            Some(addr) => Some(bind(addr).await?),
            None => None,
        };
        let addr = listener.local_addr()?;
        let control_addr = control.as_ref().map(|l| l.local_addr()).transpose()?;
        let database = matches!(config.storage.backend, config::StorageBackend::Sqlite)
            .then(|| data_dir.join(store::SQLITE_FILE));
        let lock = data_dir::lock(&data_dir, database.as_deref())?;
        let app = app::App::start(config, data_dir, addr, control_addr).await?;
        if exposed {
            for i in app
                .instances()
                .iter()
                .filter(|i| i.record.enabled && !identity::required(&i.record))
            {
                tracing::warn!(instance = %i.record.id, listen = %addr, "this instance takes no credentials and is reachable beyond loopback: set a token with `a2a-edge inbound auth {} --token-stdin` (or keys, OpenID Connect, mutual TLS)", i.record.id);
            }
        }
        if let Err(why) = app.config.client_certificates() {
            for i in app.instances().iter().filter(|i| i.record.mtls.is_some()) {
                tracing::warn!(instance = %i.record.id, "this instance takes client certificates, but {why}; until then no certificate reaches it");
            }
        }
        let shutdown = CancellationToken::new();
        let surfaces = if control.is_some() {
            server::Surfaces::Public
        } else {
            server::Surfaces::Both
        };
        let runtime = &app.config.runtime;
        let slots = server::Slots::new(runtime.max_connections, runtime.connections_per_peer());
        let mut tasks = vec![tokio::spawn(server::serve(
            app.clone(),
            listener,
            surfaces,
            app.tls.clone(),
            slots,
            shutdown.clone(),
        ))];
        if let Some(control) = control {
            // The operator's own listener never waits behind the public one's clients.
            let own = server::Slots::new(CONTROL_CONNECTIONS, CONTROL_CONNECTIONS);
            tasks.push(tokio::spawn(server::serve(
                app.clone(),
                control,
                server::Surfaces::Control,
                None,
                own,
                shutdown.clone(),
            )));
        }
        if let Some(tls) = &app.tls {
            tokio::spawn(tls.clone().watch(shutdown.clone()));
            if surfaces == server::Surfaces::Both {
                tracing::info!(
                    "the control API and panel are served over TLS on the public listener; --control-listen 127.0.0.1:<port> keeps them on plain loopback HTTP for the CLI"
                );
            }
        }
        tokio::spawn(app.outbound.clone().connect_all());
        tokio::spawn(return_freed_memory(shutdown.clone()));
        tokio::spawn(app.services().sessions.clone().sweep(shutdown.clone()));
        tokio::spawn(app.host.settle().pay_owed(shutdown.clone()));
        let services = app.services();
        let deliveries = push::Worker::new(
            services.store.clone(),
            app.config.push.clone(),
            services.webhooks.clone(),
            services.metrics.clone(),
        );
        tokio::spawn(deliveries.run(shutdown.clone()));
        tokio::spawn(sample_traffic(services.metrics.clone(), shutdown.clone()));
        cluster::start(&app, &shutdown);
        let (watched, stopping) = (app.clone(), shutdown.clone());
        tokio::spawn(async move {
            stopping.cancelled().await;
            watched.services().activity.feed().close();
        });
        Ok(Running {
            addr,
            control_addr,
            app,
            shutdown,
            tasks,
            _lock: lock,
        })
    }

    /// The base URL of the control API (`http://<addr>/a2a/api`).
    pub fn control_url(&self) -> String {
        format!("{}/a2a/api", self.control_origin())
    }

    /// The web panel's URL (`http://<addr>/a2a/ui`).
    pub fn panel_url(&self) -> String {
        format!("{}/a2a/ui", self.control_origin())
    }

    /// Where the control surface answers, as a browser on this host must name it: a wildcard
    /// listener is reached (and only accepted, docs/control.md "Control API") as loopback.
    fn control_origin(&self) -> String {
        let mut addr = self.control_addr.unwrap_or(self.addr);
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr.ip() {
                std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let scheme = if self.control_addr.is_none() && self.app.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{addr}")
    }

    /// The public listener's URL scheme.
    pub fn scheme(&self) -> &'static str {
        if self.app.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Stops accepting, drains in-flight requests and flushes the store.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.wait().await;
    }

    /// Serves until the shutdown token fires, then drains and flushes as [`Running::stop`].
    pub async fn wait(self) {
        for task in self.tasks {
            let _ = task.await;
        }
        let killed = self.app.services().sessions.kill_processes();
        if killed > 0 {
            tracing::warn!(
                groups = killed,
                "killed the process groups of command turns still running at shutdown"
            );
        }
        let _ = self.app.store.flush().await;
        tracing::info!("stopped");
        self.app.store.close();
    }

    /// A handle that triggers [`Running::stop`]'s shutdown from elsewhere.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}
