//! Sealing with the cluster key: AES-256-GCM with a random nonce and the value's name as
//! associated data, so a sealed value moved to another name does not open. The shared store
//! keeps secrets and webhook configs sealed this way; every node reads the same key.

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use anyhow::Context;
use base64::Engine as _;
use std::path::Path;

/// A secret sealed for the database: AES-256-GCM with a random nonce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedSecret {
    /// The secret's name.
    pub name: String,
    /// The 12-byte nonce.
    pub nonce: Vec<u8>,
    /// Ciphertext and tag.
    pub sealed: Vec<u8>,
}

/// The name of the value the first node on a shared database seals with its key, so a node with
/// another key is refused at start (not a valid secret name: it never meets one). Once written it
/// is never replaced.
pub const KEY_CHECK: &str = "a2a-edge/key-check";

/// How a sealed text starts (then the nonce and the ciphertext, base64, `:`-separated).
const SEALED_TEXT: &str = "sealed:v1:";

/// The key that seals the secrets of a shared store: 32 bytes, AES-256-GCM. Each value is sealed
/// with a random nonce and its name as associated data, so a sealed value moved to another name
/// does not open.
#[derive(Clone)]
pub struct SecretKey(Aes256Gcm);

impl SecretKey {
    /// The key in `file` (base64, surrounding space ignored), else in the variable `env`.
    pub fn load(file: Option<&Path>, env: &str) -> anyhow::Result<SecretKey> {
        let generate = "generate one with `openssl rand -base64 32` and give every node the same";
        let text = match file {
            Some(f) => std::fs::read_to_string(f)
                .with_context(|| format!("cannot read the cluster key file {}", f.display()))?,
            None => std::env::var(env).map_err(|_| {
                anyhow::anyhow!(
                    "a shared database keeps the secrets sealed: set {env} (or [cluster] secretKeyFile) to a 32-byte key in base64; {generate}"
                )
            })?,
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|e| anyhow::anyhow!("the cluster key is not base64 ({e}); {generate}"))?;
        let key = Aes256Gcm::new_from_slice(&bytes).map_err(|_| {
            anyhow::anyhow!(
                "the cluster key has {} bytes, not 32; {generate}",
                bytes.len()
            )
        })?;
        Ok(SecretKey(key))
    }

    /// `value` sealed under `name` (a fresh nonce each time).
    pub fn seal(&self, name: &str, value: &str) -> SealedSecret {
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let payload = Payload {
            msg: value.as_bytes(),
            aad: name.as_bytes(),
        };
        let sealed = self
            .0
            .encrypt(&nonce, payload)
            .expect("AES-GCM seals any message shorter than 64 GiB");
        SealedSecret {
            name: name.to_owned(),
            nonce: nonce.to_vec(),
            sealed,
        }
    }

    /// A sealed value opened; refused when it was sealed under another name or key.
    pub fn open(&self, s: &SealedSecret) -> anyhow::Result<String> {
        let refused = || {
            anyhow::anyhow!(
                "the secret {} does not open with this node's cluster key: every node needs the same key",
                s.name
            )
        };
        if s.nonce.len() != 12 {
            return Err(refused());
        }
        let payload = Payload {
            msg: &s.sealed,
            aad: s.name.as_bytes(),
        };
        let plain = self
            .0
            .decrypt(Nonce::from_slice(&s.nonce), payload)
            .map_err(|_| refused())?;
        String::from_utf8(plain).map_err(|_| refused())
    }
}

impl SecretKey {
    /// `value` sealed under `name` as one line of text, for a text column.
    pub fn seal_text(&self, name: &str, value: &str) -> String {
        let s = self.seal(name, value);
        let b64 = base64::engine::general_purpose::STANDARD;
        format!(
            "{SEALED_TEXT}{}:{}",
            b64.encode(s.nonce),
            b64.encode(s.sealed)
        )
    }

    /// A text [`SecretKey::seal_text`] sealed under `name`, opened; a text that is not sealed
    /// (written before sealing) as it is.
    pub fn open_text(&self, name: &str, text: &str) -> anyhow::Result<String> {
        let Some(rest) = text.strip_prefix(SEALED_TEXT) else {
            return Ok(text.to_owned());
        };
        let b64 = base64::engine::general_purpose::STANDARD;
        let (nonce, sealed) = rest
            .split_once(':')
            .and_then(|(n, s)| Some((b64.decode(n).ok()?, b64.decode(s).ok()?)))
            .ok_or_else(|| anyhow::anyhow!("the sealed value {name} is damaged"))?;
        self.open(&SealedSecret {
            name: name.to_owned(),
            nonce,
            sealed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_secrets_open_only_with_the_key_and_under_their_name() {
        let key = |k: &str| {
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("key");
            std::fs::write(&f, format!("{k}\n")).unwrap();
            SecretKey::load(Some(&f), "UNUSED")
        };
        let a = key("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").unwrap();
        let b = key("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").unwrap();
        let sealed = a.seal("A2A_INBOUND_X", "s3cret-token");
        assert!(
            !sealed.sealed.windows(6).any(|w| w == b"s3cret".as_slice()),
            "no plaintext in what the database keeps"
        );
        assert_eq!(a.open(&sealed).unwrap(), "s3cret-token");
        assert_ne!(a.seal("A2A_INBOUND_X", "s3cret-token").nonce, sealed.nonce);
        let err = b.open(&sealed).unwrap_err().to_string();
        assert!(err.contains("same key") && !err.contains("s3cret"), "{err}");
        let moved = SealedSecret {
            name: "A2A_INBOUND_Y".into(),
            ..sealed
        };
        assert!(a.open(&moved).is_err(), "bound to its name");
        let short = key("c2hvcnQ=").err().unwrap().to_string();
        assert!(
            short.contains("5 bytes, not 32") && short.contains("openssl rand"),
            "{short}"
        );
        let missing = SecretKey::load(None, "A2A_TEST_NO_SUCH_KEY").err().unwrap();
        assert!(missing.to_string().contains("A2A_TEST_NO_SUCH_KEY"));
    }

    #[test]
    fn sealed_texts_open_under_their_name_and_plain_ones_pass() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("key");
        std::fs::write(&f, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").unwrap();
        let k = SecretKey::load(Some(&f), "UNUSED").unwrap();
        let text = k.seal_text("push:i/t/c", "{\"token\":\"tok\"}");
        assert!(
            text.starts_with(SEALED_TEXT) && !text.contains("tok"),
            "{text}"
        );
        assert_eq!(
            k.open_text("push:i/t/c", &text).unwrap(),
            "{\"token\":\"tok\"}"
        );
        assert!(k.open_text("push:i/t/other", &text).is_err());
        assert_eq!(k.open_text("x", "{}").unwrap(), "{}");
    }
}
