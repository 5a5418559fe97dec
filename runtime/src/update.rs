//! The update check (docs/control.md "Control API › Reads"): the package registry's latest version and the version in the
//! repository's manifest, the higher wins; cached; read-only (it never installs anything).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use semver::Version;
use serde_json::{Value, json};

use crate::config::UpdateSettings;

/// How long a successful answer is reused.
const FRESH: Duration = Duration::from_secs(6 * 3600);
/// How long a failed answer is reused (a transient outage should not hide updates for hours).
const FRESH_FAILURE: Duration = Duration::from_secs(600);

/// The checker and its cache.
pub struct UpdateCheck {
    settings: UpdateSettings,
    client: reqwest::Client,
    cache: tokio::sync::Mutex<Option<(Instant, Value)>>,
    current: Version,
    ran: Mutex<u64>,
}

impl UpdateCheck {
    /// A checker over the configured sources, reached through `exit`.
    pub fn new(settings: UpdateSettings, exit: &crate::egress::Exit) -> UpdateCheck {
        let client = exit
            .client(reqwest::Client::builder())
            .user_agent(concat!(
                "a2a-edge/",
                env!("CARGO_PKG_VERSION"),
                " (update check)"
            ))
            .timeout(Duration::from_millis(settings.timeout_ms))
            .connect_timeout(Duration::from_millis(settings.timeout_ms))
            .build()
            .expect("a plain HTTP client builds");
        UpdateCheck {
            settings,
            client,
            cache: Default::default(),
            current: Version::parse(env!("CARGO_PKG_VERSION"))
                .expect("the crate version is semver"),
            ran: Mutex::new(0),
        }
    }

    /// How many times the sources were asked (for tests of the cache).
    pub fn checks(&self) -> u64 {
        *self.ran.lock().unwrap()
    }

    /// The answer: cached unless `refresh` or stale; switched off, the answer says so and
    /// nothing is contacted.
    pub async fn answer(&self, refresh: bool) -> Value {
        if !self.settings.enabled {
            return json!({
                "ok": false,
                "disabled": true,
                "current": self.current.to_string(),
                "error": null,
                "repoUrl": self.settings.repo_url,
                "packageName": crate::config::PACKAGE,
            });
        }
        let mut cache = self.cache.lock().await;
        if let Some((at, v)) = cache.as_ref() {
            let fresh = if v["ok"] == true {
                FRESH
            } else {
                FRESH_FAILURE
            };
            if !refresh && at.elapsed() < fresh {
                let mut v = v.clone();
                v["cached"] = json!(true);
                return v;
            }
        }
        *self.ran.lock().unwrap() += 1;
        let v = self.check().await;
        *cache = Some((Instant::now(), v.clone()));
        v
    }

    async fn check(&self) -> Value {
        let (registry, manifest) = tokio::join!(self.registry_version(), self.manifest_version());
        let mut errors = Vec::new();
        let mut found: Vec<(Version, &str)> = Vec::new();
        match registry {
            Ok(v) => found.push((v, "crates.io")),
            Err(e) => errors.push(format!("registry: {e}")),
        }
        match manifest {
            Ok(v) => found.push((v, "repository")),
            Err(e) => errors.push(format!("repository manifest: {e}")),
        }
        let best = found.into_iter().max_by(|a, b| a.0.cmp(&b.0));
        let (latest, source) = match &best {
            Some((v, s)) => (Some(v.to_string()), Some(*s)),
            None => (None, None),
        };
        json!({
            "ok": best.is_some(),
            "current": self.current.to_string(),
            "latest": latest,
            "hasUpdate": best.as_ref().is_some_and(|(v, _)| *v > self.current),
            "ahead": best.as_ref().is_some_and(|(v, _)| *v < self.current),
            "error": if best.is_some() { Value::Null } else { json!(errors.join("; ")) },
            "source": source,
            "repoUrl": self.settings.repo_url,
            "packageName": crate::config::PACKAGE,
            "checkedAt": crate::clock::now_ms(),
            "cached": false,
            "runtime": {
                "wasmtime": env!("A2A_EDGE_WASMTIME"),
                "platform": std::env::consts::OS,
                "arch": std::env::consts::ARCH,
                "profile": if cfg!(debug_assertions) { "debug" } else { "release" },
            },
        })
    }

    /// `crate.max_stable_version` (else `max_version`) of the registry's crate document.
    async fn registry_version(&self) -> Result<Version, String> {
        let doc: Value = self
            .get(&self.settings.registry_url)
            .await
            .and_then(|t| serde_json::from_str(&t).map_err(|e| format!("not JSON: {e}")))?;
        let v = doc["crate"]["max_stable_version"]
            .as_str()
            .or_else(|| doc["crate"]["max_version"].as_str())
            .ok_or("no crate.max_version in the answer")?;
        Version::parse(v).map_err(|e| format!("version {v:?}: {e}"))
    }

    /// `[workspace.package] version` or `[package] version` of the repository's manifest.
    async fn manifest_version(&self) -> Result<Version, String> {
        let doc: toml::Table = self
            .get(&self.settings.manifest_url)
            .await
            .and_then(|t| t.parse().map_err(|e| format!("not TOML: {e}")))?;
        let version = |t: Option<&toml::Value>| {
            t.and_then(|p| p.get("version"))
                .and_then(|v| v.as_str())
                .map(str::to_owned)
        };
        let v = version(doc.get("workspace").and_then(|w| w.get("package")))
            .or_else(|| version(doc.get("package")))
            .ok_or("no package version in the manifest")?;
        Version::parse(&v).map_err(|e| format!("version {v:?}: {e}"))
    }

    async fn get(&self, url: &str) -> Result<String, String> {
        let r = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| format!("{url}: {}", describe(&e)))?;
        if !r.status().is_success() {
            return Err(format!("{url} answered HTTP {}", r.status().as_u16()));
        }
        r.text()
            .await
            .map_err(|e| format!("{url}: {}", describe(&e)))
    }
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "cannot connect".into()
    } else {
        let mut s = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(inner) = source {
            s = format!("{s}: {inner}");
            source = inner.source();
        }
        s
    }
}
