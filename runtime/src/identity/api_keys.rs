//! API keys: named clients of an instance, each with its own key. A key is shown once, at
//! creation; the record keeps its SHA-256 (a key is 256 random bits, so a fast hash is enough
//! and a lookup costs one hash).

use aes_gcm::aead::OsRng;
use aes_gcm::aead::rand_core::RngCore;
use base64::Engine;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Caller;
use crate::records::ApiKey;

/// How every key starts (so a leaked one is recognisable, e.g. by secret scanners).
pub const PREFIX: &str = "a2a_";

/// Most keys one instance keeps, revoked ones included.
pub const MAX_KEYS: usize = 1024;

/// A new random key.
pub fn new_key() -> String {
    let mut bytes = [0u8; 32];
    OsRng.fill_bytes(&mut bytes);
    format!(
        "{PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

/// The hash a key is kept as.
pub fn hash(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The record of the client `name` holding `key`.
pub fn record(
    name: &str,
    key: &str,
    skills: Vec<String>,
    rate_per_second: Option<f64>,
    now: u64,
) -> ApiKey {
    ApiKey {
        name: name.to_owned(),
        hash: hash(key),
        skills,
        rate_per_second,
        created_at: now,
        revoked_at: None,
    }
}

/// The client of `keys` whose key `presented` is.
pub fn find<'a>(mut keys: impl Iterator<Item = &'a ApiKey>, presented: &str) -> Option<&'a ApiKey> {
    let h = hash(presented);
    keys.find(|k| bool::from(k.hash.as_bytes().ct_eq(h.as_bytes())))
}

/// The principal of the client `name`.
pub fn principal(name: &str) -> String {
    format!("key:{name}")
}

/// The caller a key names.
pub fn caller(key: &ApiKey) -> Caller {
    Caller {
        principal: principal(&key.name),
        key: Some(key.clone()),
    }
}

/// A client name: 1 to 64 letters, digits, `.`, `_` or `-`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "a key's name is 1 to 64 letters, digits, '.', '_' or '-', not {:?}",
            name.chars().take(80).collect::<String>()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_and_found_by_their_hash_only() {
        let (a, b) = (new_key(), new_key());
        assert_ne!(a, b);
        assert!(a.starts_with(PREFIX) && a.len() == PREFIX.len() + 43, "{a}");
        let keys = [record("a", &a, Vec::new(), None, 0)];
        assert!(!keys[0].hash.contains(&a));
        assert_eq!(find(keys.iter(), &a).map(|k| k.name.as_str()), Some("a"));
        assert!(find(keys.iter(), &b).is_none());
    }

    #[test]
    fn names_are_plain() {
        assert!(check_name("ci-bot_2.x").is_ok());
        for bad in ["", "a b", "a/b", &"x".repeat(65), "ключ"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
