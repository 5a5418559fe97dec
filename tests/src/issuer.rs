//! An OpenID Connect issuer on loopback: its discovery document, a key set it can rotate (or
//! make hang), and ES256 tokens signed with its keys (made by rcgen for each test); also an
//! OAuth 2.0 token endpoint granting client credentials (RFC 6749 §4.4), which counts its grants.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use base64::Engine;

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// One signing key: what signs, what is published, and its public key in PEM.
struct Key {
    signing: EncodingKey,
    jwk: Jwk,
    public_pem: String,
}

/// The one client the token endpoint knows: its id, secret, the audience and lifetime (s) of
/// its tokens.
#[derive(Clone, Default)]
struct TokenClient {
    id: String,
    secret: String,
    audience: String,
    lifetime: u64,
}

/// The issuer; stops when dropped.
pub struct Issuer {
    url: String,
    keys: Arc<HashMap<String, Key>>,
    published: Arc<Mutex<Vec<Jwk>>>,
    fetches: Arc<AtomicU32>,
    client: Arc<Mutex<TokenClient>>,
    grants: Arc<Mutex<Vec<Instant>>>,
    down: Arc<AtomicBool>,
    hang: Arc<AtomicBool>,
    hung: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
    silent: tokio::task::JoinHandle<()>,
}

impl Issuer {
    /// An issuer holding a key for each of `kids`, publishing those of `published`.
    pub async fn start(kids: &[&str], published: &[&str]) -> Issuer {
        let keys: Arc<HashMap<String, Key>> =
            Arc::new(kids.iter().map(|kid| (kid.to_string(), key(kid))).collect());
        let set: Arc<Mutex<Vec<Jwk>>> = Arc::default();
        let fetches = Arc::new(AtomicU32::new(0));
        let client: Arc<Mutex<TokenClient>> = Arc::default();
        let grants: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let down: Arc<AtomicBool> = Arc::default();
        let url: Arc<Mutex<String>> = Arc::default();
        // A key-set URL that takes connections and never answers, counting them.
        let hang: Arc<AtomicBool> = Arc::default();
        let hung = Arc::new(AtomicU32::new(0));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let silent_jwks = format!("http://{}/jwks", listener.local_addr().unwrap());
        let counted = hung.clone();
        let silent = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((tcp, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                held.push(tcp);
            }
        });
        let hanging = hang.clone();
        let (s, f, u, k, c, g, d) = (
            set.clone(),
            fetches.clone(),
            url.clone(),
            keys.clone(),
            client.clone(),
            grants.clone(),
            down.clone(),
        );
        let handler = move |parts: hyper::http::request::Parts, body: bytes::Bytes| {
            let issuer = u.lock().unwrap().clone();
            match parts.uri.path() {
                "/.well-known/openid-configuration" => {
                    let jwks = if hanging.load(Ordering::SeqCst) {
                        silent_jwks.clone()
                    } else {
                        format!("{issuer}/jwks")
                    };
                    crate::loopback::json(
                        200,
                        &json!({"issuer": issuer, "jwks_uri": jwks, "token_endpoint": format!("{issuer}/token"), "id_token_signing_alg_values_supported": ["ES256"]}),
                    )
                }
                "/jwks" => {
                    f.fetch_add(1, Ordering::SeqCst);
                    let keys = JwkSet {
                        keys: s.lock().unwrap().clone(),
                    };
                    crate::loopback::json(200, &serde_json::to_value(keys).unwrap())
                }
                "/token" if d.load(Ordering::SeqCst) => {
                    crate::loopback::json(503, &json!({"error": "temporarily_unavailable"}))
                }
                "/token" => {
                    let client = c.lock().unwrap().clone();
                    match grant(&parts, &body, &client) {
                        Ok(scope) => {
                            g.lock().unwrap().push(Instant::now());
                            let now = jsonwebtoken::get_current_timestamp();
                            let claims = json!({"iss": issuer, "aud": client.audience, "sub": client.id, "scope": scope, "iat": now, "exp": now + client.lifetime});
                            let kid = s.lock().unwrap()[0].common.key_id.clone().unwrap();
                            let mut header = Header::new(Algorithm::ES256);
                            header.kid = Some(kid.clone());
                            let token =
                                jsonwebtoken::encode(&header, &claims, &k[&kid].signing).unwrap();
                            crate::loopback::json(
                                200,
                                &json!({"access_token": token, "token_type": "Bearer", "expires_in": client.lifetime}),
                            )
                        }
                        Err((status, error)) => {
                            crate::loopback::json(status, &json!({"error": error}))
                        }
                    }
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
            client,
            grants,
            down,
            hang,
            hung,
            task,
            silent,
        };
        issuer.publish(published);
        issuer
    }

    /// Lets the token endpoint grant client `id` with `secret` tokens for `audience` that
    /// expire `lifetime` seconds after they are issued.
    pub fn grant_to(&self, id: &str, secret: &str, audience: &str, lifetime: u64) {
        *self.client.lock().unwrap() = TokenClient {
            id: id.into(),
            secret: secret.into(),
            audience: audience.into(),
            lifetime,
        };
    }

    /// Makes the token endpoint answer 503 (`true`) or grant again.
    pub fn token_endpoint_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// Makes its discovery document name a key-set URL that takes connections and never answers
    /// (`true`), or its own key set again.
    pub fn hang_key_set(&self, hang: bool) {
        self.hang.store(hang, Ordering::SeqCst);
    }

    /// How many fetches of the key set that never answers were begun.
    pub fn hung_fetches(&self) -> u32 {
        self.hung.load(Ordering::SeqCst)
    }

    /// When the token endpoint granted tokens.
    pub fn grants(&self) -> Vec<Instant> {
        self.grants.lock().unwrap().clone()
    }

    /// Its token endpoint.
    pub fn token_url(&self) -> String {
        format!("{}/token", self.url)
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

/// Checks a token request as RFC 6749 §4.4.2 and §2.3.1 say (a form with
/// `grant_type=client_credentials`, the client in HTTP Basic with its id and secret
/// form-encoded); the scope asked for, or the status and error to answer.
fn grant(
    parts: &hyper::http::request::Parts,
    body: &[u8],
    client: &TokenClient,
) -> Result<String, (u16, &'static str)> {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body).into_owned().collect();
    let typed = parts
        .headers
        .get("content-type")
        .is_some_and(|v| v == "application/x-www-form-urlencoded");
    if parts.method != hyper::Method::POST || !typed {
        return Err((400, "invalid_request"));
    }
    if form.get("grant_type").map(String::as_str) != Some("client_credentials") {
        return Err((400, "unsupported_grant_type"));
    }
    let basic = parts
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    let decode = |v: &str| {
        url::form_urlencoded::parse(format!("v={v}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
    };
    let (id, secret) = basic.split_once(':').unwrap_or_default();
    if client.id.is_empty()
        || decode(id).as_deref() != Some(client.id.as_str())
        || decode(secret).as_deref() != Some(client.secret.as_str())
    {
        return Err((401, "invalid_client"));
    }
    Ok(form.get("scope").cloned().unwrap_or_default())
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
        self.silent.abort();
    }
}
