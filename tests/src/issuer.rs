//! An OpenID Connect issuer on loopback: its discovery document, a key set it can rotate, and
//! ES256 tokens signed with its keys (made by rcgen for each test).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// One signing key: what signs, what is published, and its public key in PEM.
struct Key {
    signing: EncodingKey,
    jwk: Jwk,
    public_pem: String,
}

/// The issuer; stops when dropped.
pub struct Issuer {
    url: String,
    keys: HashMap<String, Key>,
    published: Arc<Mutex<Vec<Jwk>>>,
    fetches: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl Issuer {
    /// An issuer holding a key for each of `kids`, publishing those of `published`.
    pub async fn start(kids: &[&str], published: &[&str]) -> Issuer {
        let keys: HashMap<String, Key> =
            kids.iter().map(|kid| (kid.to_string(), key(kid))).collect();
        let set: Arc<Mutex<Vec<Jwk>>> = Arc::default();
        let fetches = Arc::new(AtomicU32::new(0));
        let url: Arc<Mutex<String>> = Arc::default();
        let (s, f, u) = (set.clone(), fetches.clone(), url.clone());
        let handler = move |parts: hyper::http::request::Parts, _: bytes::Bytes| {
            let issuer = u.lock().unwrap().clone();
            match parts.uri.path() {
                "/.well-known/openid-configuration" => crate::loopback::json(
                    200,
                    &json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks"), "id_token_signing_alg_values_supported": ["ES256"]}),
                ),
                "/jwks" => {
                    f.fetch_add(1, Ordering::SeqCst);
                    let keys = JwkSet {
                        keys: s.lock().unwrap().clone(),
                    };
                    crate::loopback::json(200, &serde_json::to_value(keys).unwrap())
                }
                _ => crate::loopback::json(404, &json!({})),
            }
        };
        let (addr, task) = crate::loopback::serve(0, Arc::new(handler)).await;
        *url.lock().unwrap() = format!("http://{addr}");
        let issuer = Issuer {
            url: format!("http://{addr}"),
            keys,
            published: set,
            fetches,
            task,
        };
        issuer.publish(published);
        issuer
    }

    /// Its URL (`iss`).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Publishes exactly the keys of `kids` (a rotation).
    pub fn publish(&self, kids: &[&str]) {
        *self.published.lock().unwrap() = kids.iter().map(|k| self.keys[*k].jwk.clone()).collect();
    }

    /// How often its key set was fetched.
    pub fn fetches(&self) -> u32 {
        self.fetches.load(Ordering::SeqCst)
    }

    /// Claims valid for an hour from now, for `audience`, naming `sub`, with `scope`.
    pub fn claims(&self, audience: &str, sub: &str, scope: &str) -> Value {
        let now = jsonwebtoken::get_current_timestamp();
        json!({"iss": self.url, "aud": audience, "sub": sub, "scope": scope, "iat": now, "nbf": now - 5, "exp": now + 3600})
    }

    /// `claims` signed ES256 with key `kid`, which the header names.
    pub fn sign(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.into());
        jsonwebtoken::encode(&header, claims, &self.keys[kid].signing).unwrap()
    }

    /// `claims` signed HS256 with key `kid`'s public key as the secret: the algorithm-confusion
    /// attack.
    pub fn sign_with_public_key_as_hmac(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid.into());
        let secret = EncodingKey::from_secret(self.keys[kid].public_pem.as_bytes());
        jsonwebtoken::encode(&header, claims, &secret).unwrap()
    }
}

/// `claims` unsigned, with `alg: none`.
pub fn unsigned(claims: &Value) -> String {
    use base64::Engine;
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "typ": "JWT"})),
        b64(claims)
    )
}

/// A new P-256 key named `kid`.
fn key(kid: &str) -> Key {
    let pair = rcgen::KeyPair::generate().unwrap();
    let signing = EncodingKey::from_ec_pem(pair.serialize_pem().as_bytes()).unwrap();
    let mut jwk = Jwk::from_encoding_key(&signing, Algorithm::ES256).unwrap();
    jwk.common.key_id = Some(kid.into());
    Key {
        signing,
        jwk,
        public_pem: pair.public_key_pem(),
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
