//! The `a2a-edge` command: its arguments and one arm per subcommand. The binary's `main` is
//! this module's [`main`], so everything it runs is compiled with the library.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cli;

#[derive(Parser)]
#[command(
    name = "a2a-edge",
    version,
    about = "A2A 1.0.1 edge service on wasmtime"
)]
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
        /// A loopback address of its own for the control API and panel (/a2a/api, /a2a/ui); the
        /// public listener then answers 404 there. Use it whenever a proxy forwards to --listen.
        #[arg(long, env = "A2A_EDGE_CONTROL_LISTEN")]
        control_listen: Option<SocketAddr>,
        /// Log format: `text` (human; colours only on a terminal) or `json` (one object per line).
        #[arg(long, value_enum, default_value = "text", env = "A2A_EDGE_LOG_FORMAT")]
        log_format: LogFormat,
    },
    /// Inbound instances (control API).
    #[command(subcommand)]
    Inbound(cli::Inbound),
    /// Outbound connections to remote A2A agents, whose skills become tools (control API).
    #[command(subcommand)]
    Outbound(cli::Outbound),
    /// Components: list, reload from their source, swap an instance's (control API).
    #[command(subcommand)]
    Component(cli::ComponentCmd),
    /// Fetch any agent's card, check it as the panel does, and print it (exit 1 when a check
    /// fails).
    Card {
        /// The card's URL (`…/agent-card.json`).
        url: String,
    },
    /// Print a shell completion script: `a2a-edge completions bash > /etc/bash_completion.d/a2a-edge`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
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
    /// Agent components: `agent new NAME --lang rust|python|js` writes a project.
    #[command(subcommand)]
    Agent(cli::agent::AgentCmd),
    /// Configuration files.
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Write a consistent copy of the SQLite database to a new file, also while the server
    /// runs (on PostgreSQL, use pg_dump).
    Backup {
        /// The new file.
        dest: PathBuf,
        /// The server's data directory.
        #[arg(long, default_value = "./a2a-data", env = "A2A_EDGE_DATA_DIR")]
        data_dir: PathBuf,
        /// Seconds the copy may take before it gives up and removes what it wrote.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
}

/// `a2a-edge config …`.
#[derive(Subcommand)]
enum ConfigCmd {
    /// Validate a configuration file without starting: syntax, fields, presets, declared
    /// instances and connections (as a first start would create them), commands, TLS files.
    Check {
        /// The file.
        file: PathBuf,
        /// The data directory whose components/ folder the declarations may name.
        #[arg(long, default_value = "./a2a-data", env = "A2A_EDGE_DATA_DIR")]
        data_dir: PathBuf,
        /// The address `serve` will listen on (beyond loopback, the file needs publicBaseUrl).
        #[arg(long, default_value = "127.0.0.1:3080", env = "A2A_EDGE_LISTEN")]
        listen: SocketAddr,
        /// The control listener `serve` will have, if any (it must be loopback).
        #[arg(long, env = "A2A_EDGE_CONTROL_LISTEN")]
        control_listen: Option<SocketAddr>,
    },
}

/// How `serve` writes its log.
#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The log filter when `RUST_LOG` is not set: the runtime's own lines at info, its dependencies'
/// (wasmtime's compiler, cranelift, hyper) only when they warn.
const DEFAULT_LOG_FILTER: &str = "warn,a2a_edge=info";

/// Parses the arguments and runs the command on a multi-threaded runtime.
#[tokio::main]
pub async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve { .. }) {
        // A client piped into `head` should end quietly, as command-line tools do.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    let json = cli.client.json;
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) if json => {
            // Scripts read one JSON document from standard output, failures included (with the
            // control API's HTTP status when it refused).
            let status = e.downcast_ref::<cli::Refused>().map(|r| r.status);
            println!(
                "{}",
                serde_json::json!({ "ok": false, "message": format!("{e:#}"), "status": status })
            );
            std::process::ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("a2a-edge: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

// The commands, one arm each, from arguments to the client call: it reads better whole.
async fn run(cli: Cli) -> anyhow::Result<()> {
    let json = cli.client.json;
    match cli.command {
        Command::Serve {
            listen,
            data_dir,
            config,
            control_listen,
            log_format,
        } => {
            let config = match config {
                Some(path) => crate::config::Config::load(&path)?,
                None => crate::config::Config::default(),
            };
            let tracing = crate::telemetry::trace::Tracing::start(
                &config.telemetry,
                &crate::egress::Exit::new(&config.egress)?,
            )?;
            let directives =
                std::env::var("RUST_LOG").unwrap_or_else(|_| DEFAULT_LOG_FILTER.into());
            let _log = crate::telemetry::logging::init(
                &directives,
                matches!(log_format, LogFormat::Json),
                Some(&tracing),
            );
            if let Some(to) = &tracing.exports_to {
                tracing::info!(to = %to, "exporting traces");
            }
            let files = crate::raise_fd_limit();
            if files < u64::from(config.runtime.max_connections) + 256 {
                tracing::warn!(
                    open_files = files,
                    max_connections = config.runtime.max_connections,
                    "the open-file limit is below runtime.maxConnections + 256: at that many clients new connections will wait"
                );
            }
            // First: a SIGHUP from now on re-reads the file (once serving), never ends the process.
            let hangups = crate::reload::hangups()?;
            let running = crate::Running::start_on(
                config,
                data_dir,
                crate::Listen {
                    public: listen,
                    control: control_listen,
                },
            )
            .await?;
            crate::reload::on_sighup(running.app.clone(), hangups);
            // The banner is for whoever watches; a closed stdout (`serve | head -1`) must not stop
            // the server, so write errors are ignored.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "a2a-edge {} listening on {}://{}",
                env!("CARGO_PKG_VERSION"),
                running.scheme(),
                running.addr
            );
            let _ = writeln!(out, "control API: {}", running.control_url());
            let _ = writeln!(out, "web panel:   {}", running.panel_url());
            for i in running.app.instances().iter().filter(|i| i.record.enabled) {
                let _ = writeln!(
                    out,
                    "agent {:<24} card: {}{}/agent-card.json",
                    i.record.id, running.app.base_url, i.record.endpoint_path
                );
            }
            let _ = out.flush();
            drop(out);
            let token = running.shutdown_token();
            tokio::spawn(async move {
                shutdown_signal().await;
                // Cancel first: the log line is for whoever still reads it.
                token.cancel();
                tracing::info!("shutting down: finishing in-flight requests");
            });
            running.wait().await;
            // The exporter's last batch goes out on this runtime, which must go on meanwhile.
            tokio::task::block_in_place(|| tracing.shutdown());
            Ok(())
        }
        Command::Inbound(c) => cli::Control::new(cli.client).inbound(c).await,
        Command::Outbound(c) => cli::Control::new(cli.client).outbound(c).await,
        Command::Component(c) => cli::Control::new(cli.client).component(c).await,
        Command::Card { url } => cli::card::run(&url, json).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "a2a-edge", &mut script);
            let mut script = String::from_utf8_lossy(&script).into_owned();
            if shell == clap_complete::Shell::Bash {
                // clap_complete's bash script names a hyphenated command's states two ways
                // (`a2a__edge__subcmd__inbound` where it moves to one, `a2a__subcmd__edge…`
                // where it reads it), so no word after the first completed: one spelling.
                script = script.replace("a2a__subcmd__edge", "a2a__edge");
            }
            print!("{script}");
            Ok(())
        }
        Command::Task(c) => cli::Control::new(cli.client).task(c).await,
        Command::Session(c) => cli::Control::new(cli.client).session(c).await,
        Command::Metrics { prometheus } => cli::Control::new(cli.client).metrics(prometheus).await,
        Command::Update { refresh } => cli::Control::new(cli.client).update(refresh).await,
        Command::Send(args) => cli::send::run(args, cli.client.json).await,
        Command::Agent(cli::agent::AgentCmd::New(args)) => {
            println!("{}", cli::agent::new(&args)?);
            Ok(())
        }
        Command::Config(ConfigCmd::Check {
            file,
            data_dir,
            listen,
            control_listen,
        }) => {
            let config = crate::config::Config::load(&file)?;
            // What `serve` checks of its listeners against the file.
            crate::Listen {
                public: listen,
                control: control_listen,
            }
            .check(&config)?;
            let (instances, connections) =
                crate::declared::check(&config, &data_dir.join("components")).await?;
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "ok": true, "file": file, "instances": instances, "connections": connections })
                );
            } else {
                println!(
                    "{}: valid ({instances} instance(s), {connections} connection(s) declared)",
                    file.display()
                );
            }
            Ok(())
        }
        Command::Backup {
            dest,
            data_dir,
            timeout,
        } => {
            let db = data_dir.join(crate::store::SQLITE_FILE);
            let timeout = std::time::Duration::from_secs(timeout);
            let tasks =
                tokio::task::spawn_blocking(move || crate::store::backup(&db, &dest, timeout))
                    .await??;
            println!("backed up {tasks} tasks");
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
