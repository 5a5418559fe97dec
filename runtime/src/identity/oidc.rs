//! OpenID Connect bearer tokens (docs/auth.md "Authentication"): JWTs the instance's issuer signed,
//! checked with the `jsonwebtoken` crate against the issuer's published keys. The keys come
//! through the egress guard (the issuer's host is trusted as the operator gave it; a `jwks_uri`
//! elsewhere must be public), over https unless from loopback, are cached per issuer, refetched
//! when older than `MAX_KEYS_AGE`, and refetched on an unknown `kid` at most once per
//! `min_refresh`. A fetch runs on a task of its own, one at a time per issuer: a token whose key
//! is cached never waits for it. Only asymmetric algorithms are ever accepted: never `none`,
//! never an HMAC keyed with a public key.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;
use tokio::sync::watch;

use crate::egress::{Exit, Reach};
use crate::records::{OIDC_ALGORITHMS, OidcSettings};

/// The most a discovery document or key set may weigh.
const MAX_DOCUMENT_BYTES: u64 = 256 * 1024;
/// How long each request of a key fetch may take (a caller waits for at most two).
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Keys older than this are refetched on their next use (so a removed key stops working once
/// that fetch ends).
const MAX_KEYS_AGE: Duration = Duration::from_secs(15 * 60);
/// Clock skew allowed on `exp` and `nbf`, seconds.
const LEEWAY_SECONDS: u64 = 30;

/// Why a token was refused: what the log says (never the token), and whether the challenge
/// names a missing scope.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// The token is not one the issuer signed for this audience, now (`invalid_token`).
    Invalid(&'static str),
    /// A valid token without every required scope (`insufficient_scope`).
    Scope,
}

/// One key source's keys as last fetched, when a fetch last started, and the fetch under way
/// (whose sender is dropped when it ends).
#[derive(Default)]
struct Keys {
    set: Option<(Arc<JwkSet>, Instant)>,
    tried: Option<Instant>,
    fetching: Option<watch::Receiver<()>>,
}

impl Keys {
    /// The fetch under way, if one is.
    fn fetching(&self) -> Option<watch::Receiver<()>> {
        self.fetching.clone().filter(|f| f.has_changed().is_ok())
    }
}

/// Verifies tokens; shared by every instance (keys are cached per issuer and key-set URL).
pub struct Verifier {
    exit: Exit,
    min_refresh: Duration,
    /// Per key source, its keys: locked only to read or swap them, never across a fetch.
    keys: Mutex<HashMap<String, Arc<Mutex<Keys>>>>,
}

impl Verifier {
    /// A verifier fetching through `exit`, refetching on an unknown `kid` at most once per
    /// `min_refresh`.
    pub fn new(exit: Exit, min_refresh: Duration) -> Verifier {
        Verifier {
            exit,
            min_refresh,
            keys: Default::default(),
        }
    }

    /// The principal `token` names under `s` (`oidc:<claim value>`), or why it is refused.
    pub async fn verify(&self, s: &OidcSettings, token: &str) -> Result<String, Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Refusal::Invalid("oidc_malformed_jwt"))?;
        if header.crit.is_some() {
            return Err(Refusal::Invalid("oidc_unsupported_critical_header"));
        }
        if !allowed(s).contains(&header.alg) {
            return Err(Refusal::Invalid("oidc_algorithm_not_allowed"));
        }
        let jwk = self.key(s, header.kid.as_deref()).await?;
        let key = DecodingKey::from_jwk(&jwk).map_err(|_| Refusal::Invalid("oidc_unusable_key"))?;
        let mut v = Validation::new(header.alg);
        v.leeway = LEEWAY_SECONDS;
        v.validate_nbf = true;
        v.set_issuer(&[&s.issuer]);
        v.set_audience(&[&s.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Value>(token, &key, &v)
            .map_err(|e| Refusal::Invalid(failed(e.kind())))?
            .claims;
        if !s
            .scopes
            .iter()
            .all(|need| scopes(&claims).any(|s| s == need))
        {
            return Err(Refusal::Scope);
        }
        match claims.get(&s.principal_claim) {
            Some(Value::String(p)) if !p.is_empty() && p.len() <= 256 => Ok(format!("oidc:{p}")),
            _ => Err(Refusal::Invalid("oidc_no_principal_claim")),
        }
    }

    /// The key `kid` names (or the only signing key when the token names none). The set is
    /// fetched when it is missing, stale, or lacks `kid`, unless a fetch is under way or started
    /// within `min_refresh`. A key the set holds answers at once, even while a fetch runs; a
    /// caller without one waits for the fetch under way, at most [`FETCH_TIMEOUT`].
    async fn key(&self, s: &OidcSettings, kid: Option<&str>) -> Result<Jwk, Refusal> {
        let source = format!(
            "{}\n{}",
            s.issuer,
            s.jwks_url.as_deref().unwrap_or_default()
        );
        let slot = lock(&self.keys).entry(source).or_default().clone();
        let (held, start, fetching) = {
            let mut keys = lock(&slot);
            let (held, fresh) = match &keys.set {
                Some((set, fetched)) => (pick(set, kid), fetched.elapsed() < MAX_KEYS_AGE),
                None => (None, false),
            };
            let may_try = keys.tried.is_none_or(|t| t.elapsed() >= self.min_refresh);
            let wanted = !fresh || held.is_none();
            let start = (wanted && may_try && keys.fetching().is_none()).then(|| {
                let (done, fetching) = watch::channel(());
                keys.tried = Some(Instant::now());
                keys.fetching = Some(fetching);
                done
            });
            (held, start, keys.fetching())
        };
        if let Some(done) = start {
            self.refetch(s, slot.clone(), done);
        }
        if let Some(jwk) = held {
            return Ok(jwk);
        }
        if let Some(mut fetching) = fetching {
            // Ends when the fetch does (its sender is dropped), or when it should have: a
            // discovery document and then the key set, each within the fetch timeout.
            let _ = tokio::time::timeout(2 * FETCH_TIMEOUT, fetching.changed()).await;
        }
        let keys = lock(&slot);
        match &keys.set {
            None => Err(Refusal::Invalid("oidc_issuer_keys_unavailable")),
            Some((set, _)) => pick(set, kid).ok_or(Refusal::Invalid("oidc_unknown_kid")),
        }
    }

    /// Fetches `s`'s keys into `slot` on a task of its own (a caller going away never cancels
    /// it); dropping `done` at its end wakes the callers waiting for it.
    fn refetch(&self, s: &OidcSettings, slot: Arc<Mutex<Keys>>, done: watch::Sender<()>) {
        let (exit, s) = (self.exit.clone(), s.clone());
        tokio::spawn(async move {
            let fetched = fetch(&exit, &s).await;
            let mut keys = lock(&slot);
            match fetched {
                Ok(set) => keys.set = Some((Arc::new(set), Instant::now())),
                // A stale set still serves until the next try.
                Err(why) => {
                    tracing::warn!(issuer = %s.issuer, %why, "could not fetch the issuer's keys")
                }
            }
            drop(keys);
            drop(done);
        });
    }
}

/// The issuer's key set, from `jwksUrl` or from the URL its discovery document names.
async fn fetch(exit: &Exit, s: &OidcSettings) -> Result<JwkSet, String> {
    check_https(s)?;
    let reach = Reach {
        trusted_host: crate::egress::url_host(&s.issuer),
        allow_private: false,
        allow_with: "serve the key set from the issuer's host",
    };
    let jwks_url = match &s.jwks_url {
        Some(u) => u.clone(),
        None => {
            let url = discovery_url(&s.issuer);
            let doc =
                crate::egress::fetch_json(exit, &url, &reach, FETCH_TIMEOUT, MAX_DOCUMENT_BYTES)
                    .await?;
            if doc["issuer"].as_str() != Some(s.issuer.as_str()) {
                return Err(format!("{url} names another issuer ({})", doc["issuer"]));
            }
            let jwks_uri = doc["jwks_uri"]
                .as_str()
                .ok_or_else(|| format!("{url} has no jwks_uri"))?;
            over_https(&format!("jwks_uri (in {url})"), jwks_uri)?;
            jwks_uri.to_owned()
        }
    };
    let set = crate::egress::fetch_json(exit, &jwks_url, &reach, FETCH_TIMEOUT, MAX_DOCUMENT_BYTES)
        .await?;
    serde_json::from_value(set).map_err(|e| format!("{jwks_url} is not a JWK set: {e}"))
}

/// Refuses an issuer or `jwksUrl` that is plain `http://` to a host that is not loopback (local
/// issuers and tests may use http on loopback); `Err` says which and to use https.
pub fn check_https(s: &OidcSettings) -> Result<(), String> {
    over_https("issuer", &s.issuer)?;
    s.jwks_url
        .as_deref()
        .map_or(Ok(()), |u| over_https("jwksUrl", u))
}

/// Refuses `url` (what `field` names) when it is plain `http://` to a host that is not
/// loopback: keys fetched in clear could be swapped on the way, letting anyone sign tokens.
fn over_https(field: &str, url: &str) -> Result<(), String> {
    let url = url.trim();
    let plain = url
        .get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case("http://"));
    let loopback = crate::egress::url_host(url).is_some_and(|h| {
        h == "localhost"
            || h.parse::<IpAddr>()
                .is_ok_and(|ip| ip.to_canonical().is_loopback())
    });
    if plain && !loopback {
        return Err(format!(
            "{field} {url} must use https:// (plain http:// only on loopback): keys fetched in clear could be swapped on the way, letting anyone sign tokens"
        ));
    }
    Ok(())
}

/// `m` locked, even after a panic elsewhere while it was held (its keys are whole either way).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where an issuer's discovery document is (OpenID Connect Discovery 1.0 §4).
pub fn discovery_url(issuer: &str) -> String {
    format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    )
}

/// The signing key named `kid`; without a `kid`, the set's only signing key.
fn pick(set: &JwkSet, kid: Option<&str>) -> Option<Jwk> {
    let signing = |k: &&Jwk| {
        !matches!(
            k.common.public_key_use,
            Some(jsonwebtoken::jwk::PublicKeyUse::Encryption)
        )
    };
    match kid {
        Some(kid) => set.find(kid).filter(signing).cloned(),
        None => {
            let mut keys = set.keys.iter().filter(signing);
            match (keys.next(), keys.next()) {
                (Some(k), None) => Some(k.clone()),
                _ => None,
            }
        }
    }
}

/// The algorithms `s` accepts: only [`OIDC_ALGORITHMS`], whatever the record says.
fn allowed(s: &OidcSettings) -> Vec<Algorithm> {
    s.algorithms
        .iter()
        .filter(|a| OIDC_ALGORITHMS.contains(&a.as_str()))
        .filter_map(|a| a.parse::<Algorithm>().ok())
        .collect()
}

/// The scopes a token grants: `scope` (space-separated, RFC 8693 §4.2) or `scp` (a list or a
/// string, as some issuers send it).
fn scopes(claims: &Value) -> impl Iterator<Item = &str> {
    let spaced = ["scope", "scp"]
        .into_iter()
        .filter_map(|c| claims.get(c)?.as_str())
        .flat_map(str::split_whitespace);
    let listed = claims
        .get("scp")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    spaced.chain(listed)
}

/// What a failed check is called in the log (each OpenID Connect reason starts `oidc_`).
fn failed(kind: &jsonwebtoken::errors::ErrorKind) -> &'static str {
    use jsonwebtoken::errors::ErrorKind as K;
    match kind {
        K::ExpiredSignature => "oidc_expired",
        K::ImmatureSignature => "oidc_not_yet_valid",
        K::InvalidAudience => "oidc_wrong_audience",
        K::InvalidIssuer => "oidc_wrong_issuer",
        K::InvalidSignature => "oidc_bad_signature",
        K::InvalidAlgorithm => "oidc_algorithm_not_allowed",
        K::MissingRequiredClaim(_) => "oidc_missing_claim",
        K::InvalidClaimFormat(_) => "oidc_malformed_claim",
        _ => "oidc_malformed_jwt",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scopes_come_from_scope_or_scp_in_either_form() {
        let got = |c: Value| scopes(&c).map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            got(json!({"scope": "a2a:call  read"})),
            ["a2a:call", "read"]
        );
        assert_eq!(got(json!({"scp": ["a2a:call", 3, "x"]})), ["a2a:call", "x"]);
        assert_eq!(got(json!({"scp": "one"})), ["one"]);
        assert!(got(json!({"scope": 5})).is_empty());
    }

    #[test]
    fn only_asymmetric_algorithms_are_ever_allowed() {
        let s = OidcSettings {
            algorithms: vec!["HS256".into(), "none".into(), "ES256".into()],
            ..OidcSettings::new("https://id.example", "edge")
        };
        assert_eq!(allowed(&s), [Algorithm::ES256]);
    }

    #[test]
    fn keys_come_over_https_unless_from_loopback() {
        let s = |issuer: &str, jwks: Option<&str>| OidcSettings {
            jwks_url: jwks.map(Into::into),
            ..OidcSettings::new(issuer, "edge")
        };
        for fine in [
            s("https://id.example", None),
            s("http://127.0.0.1:8080", None),
            s("http://localhost/x", Some("http://[::1]:9/jwks")),
        ] {
            assert_eq!(check_https(&fine), Ok(()), "{}", fine.issuer);
        }
        let err = check_https(&s("http://id.example", None)).unwrap_err();
        assert!(
            err.starts_with("issuer http://id.example must use https://"),
            "{err}"
        );
        let err = check_https(&s("https://id.example", Some("HTTP://10.0.0.1/jwks"))).unwrap_err();
        assert!(err.starts_with("jwksUrl "), "{err}");
    }

    #[test]
    fn a_token_without_kid_needs_a_set_of_one_signing_key() {
        let key = |kid: &str| json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"});
        let one: JwkSet = serde_json::from_value(json!({"keys": [key("a")]})).unwrap();
        let two: JwkSet = serde_json::from_value(json!({"keys": [key("a"), key("b")]})).unwrap();
        assert!(pick(&one, None).is_some());
        assert!(pick(&two, None).is_none());
        assert_eq!(
            pick(&two, Some("b")).unwrap().common.key_id.as_deref(),
            Some("b")
        );
        assert!(pick(&two, Some("c")).is_none());
    }
}
