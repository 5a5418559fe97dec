//! What the runtime's integration tests share: a server in this process, the real binary, and
//! a webhook receiver.
#![allow(dead_code)] // each test file uses its own part of it

/// The site network helpers of the black-box tests (a TLS front on a private CA, a forward
/// proxy), shared rather than copied.
#[path = "../../../tests/src/network.rs"]
pub mod network;
/// Tests run as trials that say when they cannot run (PostgreSQL missing).
#[path = "../../../tests/src/trials.rs"]
pub mod trials;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_edge::config::Config;
use serde_json::{Value, json};

/// The compile cache the tests share.
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-compile-cache")
}

/// A running server and the data directory it lives in (removed when dropped).
pub struct Served {
    /// The server.
    pub running: a2a_edge::Running,
    _dir: tempfile::TempDir,
}

impl Served {
    /// Starts on the default config in a fresh data directory, on a free loopback port, sharing
    /// the tests' compile cache and asking no update source.
    pub async fn start() -> Served {
        Served::start_with(Config::default()).await
    }

    /// [`Served::start`] on `config`.
    pub async fn start_with(mut config: Config) -> Served {
        let dir = tempfile::tempdir().unwrap();
        config.runtime.cache_dir = Some(cache_dir());
        config.update.registry_url = "http://127.0.0.1:9/registry".into();
        config.update.manifest_url = "http://127.0.0.1:9/manifest".into();
        let running = a2a_edge::Running::start(
            config,
            dir.path().to_owned(),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        Served { running, _dir: dir }
    }

    /// `http://<address>`.
    pub fn base(&self) -> String {
        format!("http://{}", self.running.addr)
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `a2a-edge serve` on `port` over `dir` (with `dir/config.toml`); its output discarded.
pub fn spawn_binary(dir: &Path, port: u16) -> Child {
    spawn_logging(dir, port, "warn", Stdio::null())
}

/// [`spawn_binary`] logging at `filter` (`RUST_LOG`) to `stderr`.
pub fn spawn_logging(dir: &Path, port: u16, filter: &str, stderr: impl Into<Stdio>) -> Child {
    Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
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

/// The answer of the control action `body` at `base`.
pub async fn action(base: &str, body: Value) -> Value {
    post_json(format!("{base}/a2a/api"), &body).await
}

/// The JSON a POST of `body` to `url` answers.
async fn post_json(url: String, body: &Value) -> Value {
    reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The JSON a GET of `url` answers.
pub async fn get_json(url: &str) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

/// A node in this process whose database calls go through a fault proxy (calls time out after
/// 1 s): the proxy and the node.
pub async fn behind_proxy(url: &str, config: impl FnOnce(&str) -> Config) -> (Proxy, Served) {
    let (proxy, through) = Proxy::to_postgres(url).await;
    let mut c = config(&through);
    c.storage.timeout_ms = 1000;
    (proxy, Served::start_with(c).await)
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

/// One request a webhook received.
#[derive(Clone, Debug)]
pub struct Hit {
    /// What it answered.
    pub status: u16,
    /// The request headers.
    pub headers: http::HeaderMap,
    /// The body, as JSON (null when it is not JSON).
    pub body: Value,
}

/// A webhook receiver on a loopback port: records every request and answers 200, or 503 to
/// the next requests [`Webhook::fail_next`] asked for. Stops when dropped.
pub struct Webhook {
    /// Where it listens.
    pub addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    failures: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl Webhook {
    /// A receiver on a free port.
    pub async fn start() -> Webhook {
        Webhook::start_on(0).await
    }

    /// A receiver on `port`.
    pub async fn start_on(port: u16) -> Webhook {
        use http_body_util::BodyExt;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let failures = Arc::new(AtomicU32::new(0));
        let (h, f) = (hits.clone(), failures.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let (hits, failures) = (h.clone(), f.clone());
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let (hits, failures) = (hits.clone(), failures.clone());
                        async move {
                            let (parts, body) = req.into_parts();
                            let bytes = body.collect().await.map(|b| b.to_bytes());
                            let body = bytes
                                .ok()
                                .and_then(|b| serde_json::from_slice(&b).ok())
                                .unwrap_or(Value::Null);
                            let fail = failures
                                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                    n.checked_sub(1)
                                })
                                .is_ok();
                            let status = if fail { 503 } else { 200 };
                            hits.lock().unwrap().push(Hit {
                                status,
                                headers: parts.headers,
                                body,
                            });
                            let answer = hyper::Response::builder()
                                .status(status)
                                .body(http_body_util::Full::new(bytes::Bytes::new()))
                                .unwrap();
                            Ok::<_, std::convert::Infallible>(answer)
                        }
                    },
                );
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
                );
            }
        });
        Webhook {
            addr,
            hits,
            failures,
            task,
        }
    }

    /// `http://127.0.0.1:<port>/hook`.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Answers the next `n` requests 503.
    pub fn fail_next(&self, n: u32) {
        self.failures.store(n, Ordering::SeqCst);
    }

    /// Every request so far.
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// The bodies it took (answered 200), in order.
    pub fn delivered(&self) -> Vec<Value> {
        let hits = self.hits();
        hits.into_iter()
            .filter(|h| h.status == 200)
            .map(|h| h.body)
            .collect()
    }

    /// Waits (at most `secs`) until it took a body whose task is in `state`; every body taken.
    pub async fn wait_for_state(&self, state: &str, secs: u64) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let taken = self.delivered();
            if taken.iter().any(|b| b["task"]["status"]["state"] == state) {
                return taken;
            }
            assert!(
                Instant::now() < deadline,
                "no notification of a {state} task within {secs} s; requests: {:?}",
                self.hits()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The URL of a fresh database on the test cluster (`A2A_EDGE_TEST_POSTGRES`; run only where
/// [`postgres_missing`] says nothing is missing).
pub async fn fresh_postgres() -> String {
    let url = std::env::var("A2A_EDGE_TEST_POSTGRES")
        .expect("set A2A_EDGE_TEST_POSTGRES to the URL of a role that may create databases");
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let name = format!("a2a_edge_it_{}", uuid::Uuid::new_v4().simple());
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// What the PostgreSQL tests lack here, if anything.
pub fn postgres_missing() -> Option<String> {
    std::env::var_os("A2A_EDGE_TEST_POSTGRES")
        .is_none()
        .then(|| {
            "set A2A_EDGE_TEST_POSTGRES to a PostgreSQL URL (.ci/postgres.sh start prints one)"
                .into()
        })
}

/// An SSE response read event by event: its `id:` and its data as JSON.
pub struct Sse {
    response: reqwest::Response,
    buf: String,
}

impl Sse {
    /// Calls `method` on `instance` at `base` under `Accept: text/event-stream`.
    pub async fn open(
        base: &str,
        instance: &str,
        method: &str,
        params: Value,
        last_event_id: Option<u64>,
    ) -> Sse {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = reqwest::Client::new()
            .post(format!("{base}/a2a/{instance}"))
            .header("Accept", "text/event-stream")
            .json(&body);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        Sse {
            response,
            buf: String::new(),
        }
    }

    /// The next event's id and `result`; none at the end of the stream.
    pub async fn next(&mut self) -> Option<(Option<u64>, Value)> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let event: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut data) = (None, String::new());
                for line in event.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(&data).unwrap();
                return Some((id, v["result"].clone()));
            }
            let chunk = self.response.chunk().await.ok()??;
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Every event until the stream ends.
    pub async fn rest(&mut self) -> Vec<(Option<u64>, Value)> {
        let mut all = Vec::new();
        while let Some(e) = self.next().await {
            all.push(e);
        }
        all
    }
}

/// The numbered frames of a stream, as (id, frame).
pub fn numbered(events: &[(Option<u64>, Value)]) -> Vec<(u64, Value)> {
    events
        .iter()
        .filter_map(|(id, v)| Some((id.as_ref().copied()?, v.clone())))
        .collect()
}

/// The task state an event carries (a task snapshot or a status update).
pub fn state(event: &Value) -> &str {
    event["task"]["status"]["state"]
        .as_str()
        .or(event["statusUpdate"]["status"]["state"].as_str())
        .unwrap_or("")
}

/// A JSON-RPC call of `method` on the instance `instance` at `base`; the whole answer.
pub async fn call(base: &str, instance: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    post_json(format!("{base}/a2a/{instance}"), &body).await
}

/// What a [`Proxy`] does with its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Passes bytes both ways.
    Pass,
    /// Closes every connection and refuses new ones (a database that is down).
    Cut,
    /// Keeps the connections and passes no byte (a database that hangs).
    Freeze,
}

/// A TCP proxy in front of `upstream` on a loopback port, to fail what is behind it for one
/// client alone (the test database cluster is shared by every test).
pub struct Proxy {
    /// Where it listens.
    pub port: u16,
    fault: tokio::sync::watch::Sender<Fault>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy to `upstream` (`host:port`), passing.
    pub async fn start(upstream: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (fault, watch) = tokio::sync::watch::channel(Fault::Pass);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *watch.borrow() == Fault::Cut {
                    continue;
                }
                let (watch, upstream) = (watch.clone(), upstream.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(pump(cr, sw, watch.clone()), pump(sr, cw, watch));
                });
            }
        });
        Proxy { port, fault, task }
    }

    /// The proxy to the database of `url`, and `url` through it.
    pub async fn to_postgres(url: &str) -> (Proxy, String) {
        let (head, db) = url.rsplit_once('/').unwrap();
        let (user, hostport) = head.rsplit_once('@').unwrap();
        let proxy = Proxy::start(hostport.to_owned()).await;
        let through = format!("{user}@127.0.0.1:{}/{db}", proxy.port);
        (proxy, through)
    }

    /// Sets what it does from now on.
    pub fn set(&self, fault: Fault) {
        self.fault.send_replace(fault);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.set(Fault::Cut);
        self.task.abort();
    }
}

/// Copies `from` to `to` while the fault allows: holds bytes while frozen, ends when cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut fault: tokio::sync::watch::Receiver<Fault>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 << 10];
    // Waits while frozen; false once cut.
    async fn passing(fault: &mut tokio::sync::watch::Receiver<Fault>) -> bool {
        loop {
            match *fault.borrow_and_update() {
                Fault::Pass => return true,
                Fault::Cut => return false,
                Fault::Freeze => {}
            }
            if fault.changed().await.is_err() {
                return false;
            }
        }
    }
    loop {
        if !passing(&mut fault).await {
            return;
        }
        let n = tokio::select! {
            n = from.read(&mut buf) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = fault.changed() => continue,
        };
        if !passing(&mut fault).await || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Whether this process may mount file systems (a tmpfs for the disk tests): root, in a
/// sandbox that allows it. Says so when it may not.
pub fn can_mount() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(dir.path())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let _ = Command::new("umount").arg(dir.path()).status();
    } else {
        eprintln!("skipped: mounting a tmpfs needs root");
    }
    ok
}

/// A tmpfs of `mib` MiB mounted on a fresh directory, unmounted when dropped.
pub struct Tmpfs {
    /// Where it is mounted.
    pub dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts one.
    pub fn mount(mib: u32) -> Tmpfs {
        let dir = tempfile::tempdir().unwrap();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs");
        Tmpfs { dir }
    }

    /// Remounts it read-only.
    pub fn read_only(&self) {
        let status = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "remount ro");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
