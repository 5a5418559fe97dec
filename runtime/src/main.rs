//! The `a2a-edge` command.

use std::net::SocketAddr;
use std::path::PathBuf;

use a2a_edge::cli;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "a2a-edge", version, about = "A2A 1.0.1 edge service on wasmtime")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    client: cli::ClientOpts,
}

#[derive(Subcommand)]
enum Command {
    /// Run the runtime: the control API at /a2a/api and every enabled inbound instance.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:3080", env = "A2A_EDGE_LISTEN")]
        listen: SocketAddr,
        /// Data directory (database, credentials, components, compile cache).
        #[arg(long, default_value = "./a2a-data", env = "A2A_EDGE_DATA_DIR")]
        data_dir: PathBuf,
        /// TOML configuration file.
        #[arg(long, env = "A2A_EDGE_CONFIG")]
        config: Option<PathBuf>,
        /// Log as JSON lines instead of human text.
        #[arg(long)]
        json_logs: bool,
    },
    /// Inbound instances (control API).
    #[command(subcommand)]
    Inbound(cli::Inbound),
    /// Tasks of every instance (control API).
    #[command(subcommand)]
    Task(cli::TaskCmd),
    /// Conversations (control API).
    #[command(subcommand)]
    Session(cli::SessionCmd),
    /// Runtime metrics (control API).
    Metrics {
        /// Print the Prometheus text format.
        #[arg(long)]
        prometheus: bool,
    },
    /// Check for a newer release (read-only).
    Update {
        /// Re-check instead of using the 6-hour cache.
        #[arg(long)]
        refresh: bool,
    },
    /// Send a message to any A2A agent and print its answer.
    Send(cli::SendArgs),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. }) {
        // A client piped into `head` should end quietly, as command-line tools do.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("a2a-edge: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve { listen, data_dir, config, json_logs } => {
            let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,wasmtime=warn,cranelift=warn".into());
            let logs = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
            if json_logs {
                logs.json().init()
            } else {
                logs.init()
            }
            let config = match config {
                Some(path) => a2a_edge::config::Config::load(&path)?,
                None => a2a_edge::config::Config::default(),
            };
            let running = a2a_edge::Running::start(config, data_dir, listen).await?;
            println!("a2a-edge {} listening on http://{}", env!("CARGO_PKG_VERSION"), running.addr);
            println!("control API: http://{}/a2a/api", running.addr);
            for i in running.app.instances().iter().filter(|i| i.record.enabled) {
                println!("agent {:<24} card: {}{}/agent-card.json", i.record.id, running.app.base_url, i.record.endpoint_path);
            }
            let token = running.shutdown_token();
            tokio::spawn(async move {
                shutdown_signal().await;
                tracing::info!("shutting down: finishing in-flight requests");
                token.cancel();
            });
            running.wait().await;
            Ok(())
        }
        Command::Inbound(c) => cli::Control::new(cli.client).inbound(c).await,
        Command::Task(c) => cli::Control::new(cli.client).task(c).await,
        Command::Session(c) => cli::Control::new(cli.client).session(c).await,
        Command::Metrics { prometheus } => cli::Control::new(cli.client).metrics(prometheus).await,
        Command::Update { refresh } => cli::Control::new(cli.client).update(refresh).await,
        Command::Send(args) => cli::send::run(args, cli.client.json).await,
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
