//! The real `a2a-edge` binary, run as a site runs it. Only the runtime's own tests know where
//! it is built: they pass `env!("CARGO_BIN_EXE_a2a-edge")` as `bin`.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `bin serve` on `port` over `dir` (with `dir/config.toml`); its output discarded.
pub fn spawn_binary(bin: &str, dir: &Path, port: u16) -> Child {
    spawn_logging(bin, dir, port, "warn", Stdio::null())
}

/// [`spawn_binary`] logging at `filter` (`RUST_LOG`) to `stderr`.
pub fn spawn_logging(
    bin: &str,
    dir: &Path,
    port: u16,
    filter: &str,
    stderr: impl Into<Stdio>,
) -> Child {
    Command::new(bin)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir)
        .arg("--config")
        .arg(dir.join("config.toml"))
        .env("RUST_LOG", filter)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}

/// Waits until the demo instance's card answers at `base`.
pub async fn ready(client: &reqwest::Client, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while client
        .get(format!("{base}/a2a/demo/agent-card.json"))
        .send()
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the server did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
