//! Test harness: the real runtime on an ephemeral port with a temporary data directory, talked
//! to over real HTTP.

use std::path::{Path, PathBuf};

use a2a_edge::config::Config;
use serde_json::{Value, json};

/// The test-only misbehaving component.
pub const MISBEHAVE_WASM: &str = env!("MISBEHAVE_WASM");

/// A compile cache shared by the tests of one build (so each test does not recompile).
pub fn shared_cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-compile-cache")
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
}

impl Server {
    /// Starts a server with `config` (its cache dir defaults to the shared one).
    pub async fn start(config: Config) -> Server {
        Server::start_with(config, |_| {}).await
    }

    /// Starts a server after `prepare` filled its fresh data directory.
    pub async fn start_with(mut config: Config, prepare: impl FnOnce(&Path)) -> Server {
        if config.runtime.cache_dir.is_none() {
            config.runtime.cache_dir = Some(shared_cache());
        }
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path());
        let mut s = Server { running: None, dir, config, http: reqwest::Client::new() };
        s.boot().await;
        s
    }

    /// A server on the default config.
    pub async fn default() -> Server {
        Server::start(Config::default()).await
    }

    async fn boot(&mut self) {
        let running = a2a_edge::Running::start(self.config.clone(), self.dir.path().to_owned(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
        self.running = Some(running);
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
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = self.http.post(format!("{}{path}", self.base())).json(&body).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// Sends a text message with `message_id` to an endpoint path; returns the JSON-RPC body.
    pub async fn send(&self, path: &str, message_id: &str, text: &str) -> Value {
        let params = json!({"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}});
        self.rpc(path, "SendMessage", params).await.1
    }

    /// POSTs a control action; returns (status, body).
    pub async fn action(&self, body: Value) -> (u16, Value) {
        let r = self.http.post(format!("{}/a2a/api", self.base())).json(&body).send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// GETs a path; returns (status, body as JSON or null).
    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(format!("{}{path}", self.base())).send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Writes a component file into the data directory's components folder.
    pub fn put_component(&self, name: &str, bytes: &[u8]) {
        put_component(self.dir.path(), name, bytes);
    }
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
        let mut limits = config.limits;
        if let Some(m) = max_body {
            limits.max_body_bytes = *m;
        }
        config.instances.push(a2a_edge::config::InstanceDecl {
            id: Some((*id).into()),
            name: (*id).into(),
            description: format!("{id} test agent"),
            version: "0.1.0".into(),
            endpoint_path: None,
            preset: None,
            auth_token_env: None,
            enabled: true,
            component: Some((*component).into()),
            limits: Some(limits),
        });
    }
    config
}
