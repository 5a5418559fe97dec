//! a2a-edge: an A2A 1.0.1 edge service. A wasmtime runtime hosts the protocol components
//! (`wasm32-wasip2`, WASI HTTP) and gives them storage, events, sessions and admission.
#![deny(missing_docs)]

pub mod activity;
pub mod admission;
pub mod app;
pub mod attachments;
pub mod cli;
pub mod config;
pub mod credentials;
pub mod events;
pub mod histogram;
pub mod host;
pub mod instances;
pub mod metrics;
pub mod outbound;
pub mod server;
pub mod sessions;
pub mod store;
pub mod tasks;
pub mod update;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

/// A running server (for the CLI and in-process tests).
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// The runtime state.
    pub app: Arc<app::App>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Binds `listen`, starts the runtime and serves in the background.
    pub async fn start(config: config::Config, data_dir: PathBuf, listen: SocketAddr) -> anyhow::Result<Running> {
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr()?;
        let app = tokio::task::block_in_place(|| app::App::start(config, data_dir, addr))?;
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(server::serve(app.clone(), listener, shutdown.clone()));
        tokio::spawn(outbound::connect_all(app.clone()));
        Ok(Running { addr, app, shutdown, task })
    }

    /// Stops accepting, drains in-flight requests and flushes the store.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.wait().await;
    }

    /// Serves until the shutdown token fires, then drains and flushes as [`Running::stop`].
    pub async fn wait(self) {
        let _ = self.task.await;
        self.app.store.close();
    }

    /// A handle that triggers [`Running::stop`]'s shutdown from elsewhere.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}
