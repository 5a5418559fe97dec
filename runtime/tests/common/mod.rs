//! What the runtime's integration tests share: a server in this process on the embedded defaults.

use a2a_edge::config::Config;

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
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.runtime.cache_dir = Some(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-compile-cache"),
        );
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
