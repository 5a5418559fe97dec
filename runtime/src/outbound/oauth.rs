//! OAuth 2.0 client credentials (RFC 6749 §4.4) for outbound connections
//! (docs/outbound.md "Outbound connections"): the runtime asks the token endpoint for a bearer
//! token, keeps it, and asks again before it expires. The token goes only into the host's request
//! headers (never to the client component); the client secret only to the token endpoint.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::egress::{Exit, Reach};
use crate::records::OAuthClient;

/// The lifetime assumed when the token endpoint names none (`expires_in` is only recommended).
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// The most a token answer may weigh.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;
/// The longest access token kept (a header value).
const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// The longest a token request may take.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// The longest lifetime believed (a larger `expires_in` is taken as this).
const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How long a failed grant is remembered: calls meanwhile get its error instead of asking again.
const FAILURE_MEMORY: Duration = Duration::from_secs(5);

/// A token kept: renewed from `renew_at`, still sent until `expires_at` if renewing fails.
struct Held {
    token: String,
    renew_at: Instant,
    expires_at: Instant,
}

/// What a client's slot holds: its token, and its last failed grant.
#[derive(Default)]
struct State {
    held: Option<Held>,
    failed: Option<(Instant, String)>,
}

impl State {
    /// The kept token while now is before the instant `until` picks.
    fn before(&self, until: impl Fn(&Held) -> Instant) -> Option<&str> {
        let now = Instant::now();
        self.held
            .as_ref()
            .filter(|h| now < until(h))
            .map(|h| h.token.as_str())
    }

    /// The kept token while it is fresh.
    fn fresh(&self) -> Option<&str> {
        self.before(|h| h.renew_at)
    }

    /// The kept token while it has not expired.
    fn valid(&self) -> Option<&str> {
        self.before(|h| h.expires_at)
    }

    /// The error of a grant that failed within [`FAILURE_MEMORY`].
    fn recent_failure(&self) -> Option<&str> {
        self.failed
            .as_ref()
            .filter(|(at, _)| at.elapsed() < FAILURE_MEMORY)
            .map(|(_, e)| e.as_str())
    }
}

/// One slot per client (endpoint, id, secret, scopes): concurrent calls wait for one grant.
type Slot = Arc<tokio::sync::Mutex<State>>;

/// The tokens of every connection's OAuth client, got through the egress guard.
pub struct Tokens {
    exit: Exit,
    slots: Mutex<HashMap<[u8; 32], Slot>>,
}

/// When a token of `lifetime` is renewed: a quarter of its lifetime early, at most a minute.
fn renew_after(lifetime: Duration) -> Duration {
    lifetime - (lifetime / 4).min(Duration::from_secs(60))
}

/// The slot's key: a digest, so the map holds no secret.
fn key(c: &OAuthClient, secret: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [
        c.token_url.as_str(),
        &c.client_id,
        secret,
        &c.scopes.join(" "),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().into()
}

impl Tokens {
    /// Tokens requested through `exit`.
    pub fn new(exit: Exit) -> Tokens {
        Tokens {
            exit,
            slots: Mutex::default(),
        }
    }

    /// A bearer token for client `c` with `secret`: the kept one while fresh, else a new grant
    /// (the kept one still serves, with a warning, while it has not expired and the grant
    /// fails; a failure is remembered a few seconds, so waiting calls do not each ask again).
    /// `allow_private` is the connection's.
    pub async fn bearer(
        &self,
        c: &OAuthClient,
        secret: &str,
        allow_private: bool,
    ) -> Result<String, String> {
        let slot = {
            let mut slots = self.slots.lock().unwrap();
            // Slots of changed secrets or removed connections go once nobody waits on them and
            // they hold neither a token that has not expired nor a recent failure.
            slots.retain(|_, s| {
                Arc::strong_count(s) > 1
                    || s.try_lock().map_or(true, |s| {
                        s.valid().is_some() || s.recent_failure().is_some()
                    })
            });
            slots.entry(key(c, secret)).or_default().clone()
        };
        let mut state = slot.lock().await;
        if let Some(token) = state.fresh() {
            return Ok(token.to_owned());
        }
        let error = match state.recent_failure() {
            Some(e) => e.to_owned(),
            None => match self.grant(c, secret, allow_private).await {
                Ok((token, lifetime)) => {
                    let now = Instant::now();
                    state.held = Some(Held {
                        token: token.clone(),
                        renew_at: now + renew_after(lifetime),
                        expires_at: now + lifetime,
                    });
                    state.failed = None;
                    return Ok(token);
                }
                Err(e) => {
                    state.failed = Some((Instant::now(), e.clone()));
                    e
                }
            },
        };
        match state.valid() {
            Some(token) => {
                tracing::warn!(token_url = %c.token_url, error = %error, "renewing an OAuth token failed; the kept one serves until it expires");
                Ok(token.to_owned())
            }
            None => Err(error),
        }
    }

    /// Asks the token endpoint for a token (client_secret_basic); the token and its lifetime.
    async fn grant(
        &self,
        c: &OAuthClient,
        secret: &str,
        allow_private: bool,
    ) -> Result<(String, Duration), String> {
        let url = &c.token_url;
        let request = grant_request(c, secret)?;
        let reach = Reach {
            trusted_host: crate::egress::url_host(url),
            allow_private,
            allow_with: "only the token URL's own host may be internal",
        };
        let (status, body) =
            crate::egress::fetch::exchange(&self.exit, request, &reach, MAX_WAIT, MAX_ANSWER_BYTES)
                .await
                .map_err(|e| format!("the OAuth token endpoint failed: {e}"))?;
        let answer: Value = serde_json::from_slice(&body).unwrap_or_default();
        if !status.is_success() {
            return Err(refusal(url, status, &answer));
        }
        token(&answer).map_err(|e| format!("the OAuth token endpoint {url} {e}"))
    }
}

/// The token request of client `c` (RFC 6749 §4.4.2), authenticated with `client_secret_basic`.
fn grant_request(c: &OAuthClient, secret: &str) -> Result<http::Request<Bytes>, String> {
    let url = &c.token_url;
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "client_credentials");
    if !c.scopes.is_empty() {
        form.append_pair("scope", &c.scopes.join(" "));
    }
    // RFC 6749 §2.3.1: id and secret form-encoded, then Basic.
    let encode = |v: &str| form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{}",
        encode(&c.client_id),
        encode(secret)
    ));
    http::Request::post(url)
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::USER_AGENT, crate::egress::USER_AGENT)
        .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
        .body(Bytes::from(form.finish()))
        .map_err(|e| format!("tokenUrl {url:?} cannot be requested: {e}"))
}

/// Why the token endpoint refused, in its own words (RFC 6749 §5.2), bounded.
fn refusal(url: &str, status: http::StatusCode, answer: &Value) -> String {
    let said = |k: &str| {
        answer[k].as_str().map(|s| {
            s.chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect::<String>()
        })
    };
    let mut why = format!(
        "the OAuth token endpoint {url} refused the client (HTTP {})",
        status.as_u16()
    );
    if let Some(e) = said("error") {
        why.push_str(&format!(": {e}"));
        if let Some(d) = said("error_description") {
            why.push_str(&format!(" ({d})"));
        }
    }
    if status == http::StatusCode::UNAUTHORIZED
        || said("error").as_deref() == Some("invalid_client")
    {
        why.push_str("; check clientId and the secret clientSecretEnv names");
    }
    why
}

/// The bearer token and lifetime of a successful answer (RFC 6749 §5.1).
fn token(answer: &Value) -> Result<(String, Duration), String> {
    let token = answer["access_token"]
        .as_str()
        .filter(|t| !t.is_empty() && t.len() <= MAX_TOKEN_BYTES && t.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or("answered no usable access_token (a JSON object with a printable access_token of at most 8 KiB)")?;
    let kind = answer["token_type"].as_str().unwrap_or_default();
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(format!(
            "answered token_type {:?}; only Bearer tokens can be sent",
            kind.chars().take(40).collect::<String>()
        ));
    }
    let lifetime = match &answer["expires_in"] {
        Value::Null => DEFAULT_LIFETIME,
        v => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .filter(|&s| s > 0)
            .map(|s| Duration::from_secs(s).min(MAX_LIFETIME))
            .ok_or("answered an expires_in that is not a positive number of seconds")?,
    };
    Ok((token.to_owned(), lifetime))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tokens_are_renewed_a_quarter_early_at_most_a_minute() {
        assert_eq!(renew_after(Duration::from_secs(4)), Duration::from_secs(3));
        assert_eq!(
            renew_after(Duration::from_secs(3600)),
            Duration::from_secs(3540)
        );
        assert_eq!(renew_after(Duration::from_secs(0)), Duration::from_secs(0));
    }

    #[test]
    fn answers_are_read_as_rfc_6749_says() {
        let ok = token(&json!({"access_token": "abc", "token_type": "bearer", "expires_in": 30}));
        assert_eq!(ok.unwrap(), ("abc".into(), Duration::from_secs(30)));
        let quoted =
            token(&json!({"access_token": "abc", "token_type": "Bearer", "expires_in": "30"}));
        assert_eq!(quoted.unwrap().1, Duration::from_secs(30));
        let bare = token(&json!({"access_token": "abc", "token_type": "Bearer"}));
        assert_eq!(bare.unwrap().1, DEFAULT_LIFETIME);
        let forever =
            token(&json!({"access_token": "abc", "token_type": "Bearer", "expires_in": u64::MAX}));
        assert_eq!(
            forever.unwrap().1,
            MAX_LIFETIME,
            "a lifetime past a day is a day"
        );
        for bad in [
            json!({"token_type": "Bearer"}),
            json!({"access_token": "a b", "token_type": "Bearer"}),
            json!({"access_token": "abc", "token_type": "mac"}),
            json!({"access_token": "abc", "token_type": "Bearer", "expires_in": 0}),
            json!({"access_token": "abc", "token_type": "Bearer", "expires_in": -5}),
            json!({"access_token": "x".repeat(MAX_TOKEN_BYTES + 1), "token_type": "Bearer"}),
        ] {
            assert!(token(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_refusal_names_the_error_and_what_to_check_but_nothing_else() {
        let why = refusal(
            "https://idp/token",
            http::StatusCode::UNAUTHORIZED,
            &json!({"error": "invalid_client", "error_description": "bad\nsecret", "secret": "s3cr3t"}),
        );
        assert!(why.contains("invalid_client (badsecret)"), "{why}");
        assert!(why.contains("clientSecretEnv"), "{why}");
        assert!(!why.contains("s3cr3t"), "{why}");
    }

    #[test]
    fn keys_differ_by_secret_and_scopes() {
        let c = OAuthClient {
            token_url: "https://idp/token".into(),
            client_id: "edge".into(),
            client_secret_env: "S".into(),
            scopes: vec!["a2a".into()],
        };
        let base = key(&c, "secret");
        assert_ne!(base, key(&c, "secret2"));
        let other = OAuthClient {
            scopes: vec![],
            ..c.clone()
        };
        assert_ne!(base, key(&other, "secret"));
    }
}
