//! Test harness: the real runtime on an ephemeral port with a temporary data directory (or the
//! real binary), talked to over real HTTP; and what the tests put around it.

pub mod binary;
pub mod events;
pub mod faults;
pub mod grpc;
pub mod issuer;
pub mod jsonrpc;
pub mod loopback;
pub mod model;
pub mod network;
pub mod otlp;
pub mod pki;
pub mod postgres;
pub mod toolchains;
pub mod trials;
pub mod webhook;

use std::path::{Path, PathBuf};

use a2a_edge::config::{Config, UpdateSettings};
use a2a_edge::sessions::preset::{Backend, CommandSettings, Preset};
use serde_json::{Value, json};

use events::Events;

/// The test-only misbehaving component.
pub const MISBEHAVE_WASM: &str = env!("MISBEHAVE_WASM");
/// The test-only agent probe (`tests/components/agent-probe`).
pub const AGENT_PROBE_WASM: &str = env!("AGENT_PROBE_WASM");
/// The `counter` example agent.
pub const COUNTER_WASM: &str = env!("COUNTER_WASM");
/// The `assistant` example agent.
pub const ASSISTANT_WASM: &str = env!("ASSISTANT_WASM");

/// A compile cache shared by the tests of one build (so each test does not recompile).
pub fn shared_cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-compile-cache")
}

/// Keeps this process's spans for the task pages as `serve` does (no exporter, no log lines): for
/// tests that look at the traces of in-process servers.
pub fn keep_traces() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    static TRACING: std::sync::OnceLock<a2a_edge::telemetry::trace::Tracing> =
        std::sync::OnceLock::new();
    TRACING.get_or_init(|| {
        let tracing = a2a_edge::telemetry::trace::Tracing::in_process();
        tracing_subscriber::registry()
            .with(tracing.layer())
            .try_init()
            .expect("no other subscriber in this process");
        tracing
    });
}

/// `config` as a test runs it: the shared compile cache unless it names one, and update sources
/// on a closed loopback port unless it names its own, so that no test reaches the network.
pub fn isolated(mut config: Config) -> Config {
    config.runtime.cache_dir.get_or_insert_with(shared_cache);
    let defaults = UpdateSettings::default();
    if config.update.registry_url == defaults.registry_url {
        config.update.registry_url = "http://127.0.0.1:9/registry".into();
    }
    if config.update.manifest_url == defaults.manifest_url {
        config.update.manifest_url = "http://127.0.0.1:9/manifest".into();
    }
    config
}

/// A running server and its data directory.
pub struct Server {
    /// The runtime.
    pub running: Option<a2a_edge::Running>,
    /// Its data directory (kept across restarts).
    pub dir: tempfile::TempDir,
    /// The config it runs with.
    pub config: Config,
    /// HTTP client.
    pub http: reqwest::Client,
    /// The control surface has a listener of its own (`--control-listen`).
    pub split: bool,
}

impl Server {
    /// Starts a server with `config`, [`isolated`].
    pub async fn start(config: Config) -> Server {
        Server::start_with(config, |_| {}).await
    }

    /// Starts a server after `prepare` filled its fresh data directory.
    pub async fn start_with(config: Config, prepare: impl FnOnce(&Path)) -> Server {
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path());
        let mut s = Server {
            running: None,
            dir,
            config: isolated(config),
            http: reqwest::Client::new(),
            split: false,
        };
        s.boot().await;
        s
    }

    /// Starts a server whose control surface listens on a loopback port of its own.
    pub async fn start_split(config: Config) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Server {
            running: None,
            dir,
            config: isolated(config),
            http: reqwest::Client::new(),
            split: true,
        };
        s.boot().await;
        s
    }

    /// A server on the default config.
    pub async fn default() -> Server {
        Server::start(Config::default()).await
    }

    async fn boot(&mut self) {
        self.running = Some(self.try_boot().await.unwrap());
    }

    /// Starts the runtime on this server's config and data directory; the start-up error as is.
    pub async fn try_boot(&self) -> anyhow::Result<a2a_edge::Running> {
        let control = self.split.then(|| "127.0.0.1:0".parse().unwrap());
        a2a_edge::Running::start_on(
            self.config.clone(),
            self.dir.path().to_owned(),
            a2a_edge::Listen {
                public: "127.0.0.1:0".parse().unwrap(),
                control,
            },
        )
        .await
    }

    /// Stops gracefully and starts again on the same data directory.
    pub async fn restart(&mut self) {
        self.running.take().unwrap().stop().await;
        self.boot().await;
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://{}", self.running.as_ref().unwrap().addr)
    }

    /// The runtime state.
    pub fn app(&self) -> &a2a_edge::app::App {
        &self.running.as_ref().unwrap().app
    }

    /// POSTs a JSON-RPC call to an endpoint path; returns (status, body).
    pub async fn rpc(&self, path: &str, method: &str, params: Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base());
        answer(jsonrpc::request(&self.http, &url, method, params)).await
    }

    /// Sends a text message with `message_id` to an endpoint path; returns the JSON-RPC body.
    pub async fn send(&self, path: &str, message_id: &str, text: &str) -> Value {
        let params = json!({"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}});
        self.rpc(path, "SendMessage", params).await.1
    }

    /// Calls a streaming method at an endpoint path (see [`jsonrpc::stream_request`]).
    pub async fn stream(
        &self,
        path: &str,
        method: &str,
        params: Value,
        last_event_id: Option<u64>,
    ) -> Events {
        let url = format!("{}{path}", self.base());
        Events::open(&self.http, &url, method, params, last_event_id).await
    }

    /// The `result` of a successful JSON-RPC call (panics with the body otherwise).
    pub async fn ok(&self, path: &str, method: &str, params: Value) -> Value {
        let (_, body) = self.rpc(path, method, params).await;
        assert!(body.get("result").is_some(), "{method} failed: {body}");
        body["result"].clone()
    }

    /// The error code of a failed JSON-RPC call (panics with the body otherwise).
    pub async fn code(&self, path: &str, method: &str, params: Value) -> i64 {
        let (_, body) = self.rpc(path, method, params).await;
        body["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method} did not fail: {body}"))
    }

    /// Polls GetTask until the task reaches `state` (or panics after `secs`).
    pub async fn wait_state(&self, path: &str, task_id: &str, state: &str, secs: u64) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let t = self.ok(path, "GetTask", json!({"id": task_id})).await;
            if t["status"]["state"] == state {
                return t;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "task {task_id} did not reach {state}: {t}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// The control surface's base URL (its own listener when split).
    pub fn control_base(&self) -> String {
        let r = self.running.as_ref().unwrap();
        format!("http://{}", r.control_addr.unwrap_or(r.addr))
    }

    /// POSTs a control action; returns (status, body).
    pub async fn action(&self, body: Value) -> (u16, Value) {
        let request = self
            .http
            .post(format!("{}/a2a/api", self.control_base()))
            .json(&body);
        answer(request).await
    }

    /// Sends a raw control request with exactly these headers (and body); (status, body).
    pub async fn control(
        &self,
        method: reqwest::Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> (u16, Value) {
        let mut r = self
            .http
            .request(method, format!("{}{path}", self.control_base()));
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        if let Some(b) = body {
            r = r.body(b.to_owned());
        }
        answer(r).await
    }

    /// GETs a path (control paths on the control surface); returns (status, body as JSON or null).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let base = if path.starts_with("/a2a/api") || path.starts_with("/a2a/ui") {
            self.control_base()
        } else {
            self.base()
        };
        answer(self.http.get(format!("{base}{path}"))).await
    }

    /// A FAILED task's two accounts: the status text the remote caller read in `answer` (a
    /// SendMessage result) and the operator's reason the control API's task view shows.
    pub async fn failure(&self, answer: &Value) -> (String, String) {
        let task = &answer["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{answer}");
        let said = task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let id = task["id"].as_str().unwrap();
        let (status, record) = self.get(&format!("/a2a/api/task?id={id}")).await;
        assert_eq!(status, 200, "{record}");
        let detail = record["error"]["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (said, detail)
    }

    /// Writes a component file into the data directory's components folder.
    pub fn put_component(&self, name: &str, bytes: &[u8]) {
        put_component(self.dir.path(), name, bytes);
    }
}

/// Sends `request`: the status and the body as JSON (null when it is not JSON).
pub async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let r = request.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The answer of the control action `body` at `base` (a server's base URL).
pub async fn action(base: &str, body: Value) -> Value {
    let request = reqwest::Client::new()
        .post(format!("{base}/a2a/api"))
        .json(&body);
    answer(request).await.1
}

/// The JSON a GET of `url` answers.
pub async fn get_json(url: &str) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

/// Sends `head` (a request head, no body) raw to `addr` and reads the start of the answer: for
/// a refusal that comes before the body is read, which a client still sending would race.
pub async fn answer_head(addr: std::net::SocketAddr, head: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 64];
    let n = tcp.read(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

/// Writes `<data-dir>/components/<name>.wasm`.
pub fn put_component(data_dir: &Path, name: &str, bytes: &[u8]) {
    let dir = data_dir.join("components");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.wasm")), bytes).unwrap();
}

/// A config declaring instances `(id, component, maxBodyBytes)`.
pub fn config_with(instances: &[(&str, &str, Option<u64>)]) -> Config {
    let mut config = Config::default();
    for (id, component, max_body) in instances {
        let mut decl = instance(id, "echo");
        decl.component = Some((*component).into());
        if let Some(m) = max_body {
            decl.limits.as_mut().unwrap().max_body_bytes = *m;
        }
        config.instances.push(decl);
    }
    config
}

/// A preset `id` running `sh -c script` per turn, killed after `timeout_ms`.
pub fn command_preset(id: &str, script: &str, timeout_ms: Option<u64>) -> Preset {
    Preset::new(
        id,
        Backend::Command(CommandSettings {
            command: vec!["sh".into(), "-c".into(), script.into()],
            working_dir: None,
            timeout_ms,
        }),
    )
}

/// An instance declaration `id` on `preset` with the default limits.
pub fn instance(id: &str, preset: &str) -> a2a_edge::config::InstanceDecl {
    a2a_edge::config::InstanceDecl {
        id: Some(id.into()),
        name: id.into(),
        description: Some(format!("{id} test agent")),
        preset: Some(preset.into()),
        limits: Some(a2a_edge::records::Limits::default()),
        ..Default::default()
    }
}

/// A config with one instance `tck` on the scripted preset, changed by `edit`.
pub fn scripted(edit: impl FnOnce(&mut a2a_edge::config::InstanceDecl)) -> Config {
    let mut decl = instance("tck", "scripted");
    edit(&mut decl);
    Config {
        instances: vec![decl],
        ..Config::default()
    }
}

/// A user message with one text part.
pub fn message(message_id: &str, text: &str) -> Value {
    json!({"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// The virtualenv with the outbound tests' Python remote agent (a2a-sdk 1.3), created under
/// `target/` on first use from `tests/outbound/requirements.txt` (needs `python3` and PyPI).
pub fn python() -> &'static Path {
    static VENV: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    VENV.get_or_init(|| outbound_venv("outbound"))
}

/// The virtualenv with the A2A 0.3 remote agent (the a2a-sdk 0.3 line), from
/// `tests/outbound03/requirements.txt`.
pub fn python03() -> &'static Path {
    static VENV: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    VENV.get_or_init(|| outbound_venv("outbound03"))
}

/// The Python of `target/<dir>-venv`, made from `tests/<dir>/requirements.txt`.
fn outbound_venv(dir: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    toolchains::venv(
        &root.join(format!("target/{dir}-venv")),
        &root.join(format!("tests/{dir}/requirements.txt")),
    )
    .join("bin/python")
}

/// A Python a2a-sdk agent (`tests/outbound/remote_agent.py`) on a free port; killed on drop.
pub struct RemoteAgent {
    child: std::process::Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
}

impl RemoteAgent {
    /// Starts the agent with extra arguments (`--no-streaming`, `--token T`) and waits for its card.
    pub async fn start(args: &[&str]) -> RemoteAgent {
        RemoteAgent::spawn(python(), "outbound/remote_agent.py", args).await
    }

    /// Starts the A2A 0.3 agent (`tests/outbound03/remote_agent_03.py`) likewise.
    pub async fn start_03(args: &[&str]) -> RemoteAgent {
        RemoteAgent::spawn(python03(), "outbound03/remote_agent_03.py", args).await
    }

    async fn spawn(python: &Path, script: &str, args: &[&str]) -> RemoteAgent {
        let port = binary::free_port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
        let child = std::process::Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .args(args)
            .spawn()
            .unwrap();
        let agent = RemoteAgent {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        for _ in 0..200 {
            if reqwest::get(agent.card_url())
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return agent;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("the Python remote agent did not start on port {port}");
    }

    /// Its card URL.
    pub fn card_url(&self) -> String {
        format!("{}/.well-known/agent-card.json", self.base)
    }

    /// GETs one of its `/test/...` hooks.
    pub async fn hook(&self, path: &str) -> Value {
        reqwest::get(format!("{}/test/{path}", self.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Makes its next `n` JSON-RPC calls answer 503.
    pub async fn fail_next(&self, n: u32) {
        reqwest::Client::new()
            .post(format!("{}/test/fail-next?n={n}", self.base))
            .send()
            .await
            .unwrap();
    }

    /// Stops it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RemoteAgent {
    fn drop(&mut self) {
        self.stop();
    }
}
