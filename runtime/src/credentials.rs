//! Secrets by name. On one node the credentials layer is a file of its own in the data
//! directory (`credentials.json`, mode 0600, replaced atomically); on a shared database it is the
//! `secrets` table, each value sealed with AES-256-GCM under the cluster key every node reads
//! (never plaintext in the database). A name the layer does not hold falls back to the process
//! environment. Secrets never leave the host: not in records, snapshots, cards, logs, errors or
//! guest memory.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use anyhow::Context;

use crate::sealing::KEY_CHECK;
pub use crate::sealing::SecretKey;
use crate::store::Records;

/// The credentials layer.
pub struct Credentials {
    layer: Layer,
    values: RwLock<BTreeMap<String, String>>,
}

/// Where the layer keeps its secrets.
enum Layer {
    /// `<data-dir>/credentials.json`.
    File(PathBuf),
    /// The shared store, sealed.
    Shared {
        store: Arc<dyn Records>,
        key: Box<SecretKey>,
    },
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.values.read().unwrap().keys().cloned().collect();
        let layer = match &self.layer {
            Layer::File(path) => path.display().to_string(),
            Layer::Shared { .. } => "the shared database".into(),
        };
        f.debug_struct("Credentials")
            .field("layer", &layer)
            .field("names", &names)
            .finish()
    }
}

impl Credentials {
    /// Opens `<data-dir>/credentials.json` (absent = empty); tightens its mode to 0600.
    pub fn open(data_dir: &Path) -> anyhow::Result<Credentials> {
        let path = data_dir.join("credentials.json");
        let values = match std::fs::read(&path) {
            Ok(bytes) => {
                restrict(&path)?;
                serde_json::from_slice(&bytes).with_context(|| {
                    format!(
                        "{} is not a JSON object of names to secrets",
                        path.display()
                    )
                })?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        Ok(Credentials {
            layer: Layer::File(path),
            values: RwLock::new(values),
        })
    }

    /// The layer of a shared store, sealed with `key`; reads what the store holds. The first
    /// node on a database stores a check value sealed with its key; a node whose key cannot open
    /// it is refused here, before it writes anything the others could not read.
    pub async fn shared(store: Arc<dyn Records>, key: SecretKey) -> anyhow::Result<Credentials> {
        let wrong_key = || {
            anyhow::anyhow!(
                "this node's cluster key is not the key the shared database was first started with: every node needs the same [cluster] secretKeyFile (or A2A_EDGE_SECRET_KEY)"
            )
        };
        // Every value there must open first: a database from before the check value (or a
        // wrong key) is caught before this node writes one.
        let secrets = store.secrets().await?;
        for s in &secrets {
            key.open(s).map_err(|_| wrong_key())?;
        }
        if !secrets.iter().any(|s| s.name == KEY_CHECK) {
            // The store never replaces a check value: of nodes starting together, the first
            // one's stays, and the others read it back below.
            store
                .put_secret(KEY_CHECK.into(), Some(key.seal(KEY_CHECK, KEY_CHECK)))
                .await
                .context("cannot store the cluster key's check value")?;
            let check = store.secrets().await?;
            let check = check.iter().find(|s| s.name == KEY_CHECK);
            check
                .map(|c| key.open(c))
                .transpose()
                .map_err(|_| wrong_key())?;
        }
        let c = Credentials {
            layer: Layer::Shared {
                store,
                key: Box::new(key),
            },
            values: RwLock::default(),
        };
        c.refresh().await?;
        Ok(c)
    }

    /// Takes up what other nodes changed (a shared layer; a file is this node's alone);
    /// whether anything did.
    pub async fn refresh(&self) -> anyhow::Result<bool> {
        let Layer::Shared { store, key } = &self.layer else {
            return Ok(false);
        };
        let mut values = BTreeMap::new();
        for s in store.secrets().await? {
            let value = key.open(&s)?;
            if s.name != KEY_CHECK {
                values.insert(s.name.clone(), value);
            }
        }
        let changed = *self.values.read().unwrap() != values;
        if changed {
            *self.values.write().unwrap() = values;
        }
        Ok(changed)
    }

    /// The secret `name`: the credentials layer first, then the process environment.
    pub fn resolve(&self, name: &str) -> Option<String> {
        if let Some(v) = self.values.read().unwrap().get(name) {
            return Some(v.clone());
        }
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    /// Stores (`Some`, non-empty) or removes the secret `name`, durably, before answering.
    pub async fn set(&self, name: &str, value: Option<&str>) -> anyhow::Result<()> {
        let value = value.filter(|v| !v.is_empty());
        match &self.layer {
            Layer::File(path) => {
                let mut values = self.values.write().unwrap();
                let mut next = values.clone();
                match value {
                    Some(v) => next.insert(name.to_owned(), v.to_owned()),
                    None => next.remove(name),
                };
                write_file(path, &next)?;
                *values = next;
            }
            Layer::Shared { store, key } => {
                let sealed = value.map(|v| key.seal(name, v));
                store
                    .put_secret(name.to_owned(), sealed)
                    .await
                    .with_context(|| format!("cannot store the secret {name}"))?;
                let mut values = self.values.write().unwrap();
                match value {
                    Some(v) => values.insert(name.to_owned(), v.to_owned()),
                    None => values.remove(name),
                };
            }
        }
        Ok(())
    }
}

/// Writes a temporary file (created 0600) beside the target, syncs it and renames it over.
fn write_file(path: &Path, values: &BTreeMap<String, String>) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot write credentials in {}", dir.display()))?;
    tmp.write_all(&serde_json::to_vec_pretty(values)?)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).ok();
    Ok(())
}

fn restrict(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
    if mode != 0o600 {
        tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "credentials file was readable by others; set to 0600");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

pub use control_api::check_secret_name;

/// The generated secret name of an inbound instance: `A2A_INBOUND_<ID>`.
pub fn inbound_name(id: &str) -> String {
    generated_name("A2A_INBOUND_", id)
}

/// The generated secret name of an outbound connection: `A2A_OUTBOUND_<ID>`.
pub fn outbound_name(id: &str) -> String {
    generated_name("A2A_OUTBOUND_", id)
}

/// `prefix` + the id upper-cased with every non-alphanumeric character as `_`.
fn generated_name(prefix: &str, id: &str) -> String {
    let tail: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{prefix}{tail}")
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 9110 §11.1): `Bearer`, `bearer` and `BEARER` all work.
pub fn bearer(authorization: &str) -> Option<&str> {
    authorization
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim_start_matches(' '))
}

/// Constant-time comparison of a presented bearer token with the expected one.
pub fn bearer_matches(authorization: Option<&str>, expected: &str) -> bool {
    use subtle::ConstantTimeEq;
    let presented = authorization.and_then(bearer).unwrap_or("");
    !expected.is_empty() && bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(bearer_matches(Some("BEARER s3cret"), "s3cret"));
        assert!(bearer_matches(Some("BeArEr  s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer "), ""));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
    }

    #[test]
    fn names() {
        assert_eq!(
            inbound_name("reports-1a2b3c4d"),
            "A2A_INBOUND_REPORTS_1A2B3C4D"
        );
        assert_eq!(outbound_name("my agent.x"), "A2A_OUTBOUND_MY_AGENT_X");
    }

    #[tokio::test]
    async fn file_layer_is_private_durable_and_first() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let c = Credentials::open(dir.path()).unwrap();
        assert_eq!(c.resolve("A2A_TEST_CRED_X"), None);
        c.set("A2A_TEST_CRED_X", Some("v1")).await.unwrap();
        let mode = std::fs::metadata(dir.path().join("credentials.json"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            Credentials::open(dir.path())
                .unwrap()
                .resolve("A2A_TEST_CRED_X")
                .as_deref(),
            Some("v1")
        );
        // The layer wins over the environment; clearing falls back to it.
        unsafe { std::env::set_var("A2A_TEST_CRED_X", "from-env") };
        assert_eq!(c.resolve("A2A_TEST_CRED_X").as_deref(), Some("v1"));
        c.set("A2A_TEST_CRED_X", None).await.unwrap();
        assert_eq!(c.resolve("A2A_TEST_CRED_X").as_deref(), Some("from-env"));
        assert!(!format!("{c:?}").contains("v1"));
    }
}
