//! Who calls an instance (docs/auth.md "Authentication"): the credentials a request carries,
//! checked against the instance's schemes, and the principal the caller is known by. Tasks,
//! contexts and push configs belong to a principal; rate limits key on it.

pub mod api_keys;
pub mod oidc;

use http::HeaderMap;
use http::header::AUTHORIZATION;

use crate::records::{ApiKey, CertName, InstanceRecord, OidcSettings, SHARED_PRINCIPAL};
use crate::tls::PeerCert;

/// The header an API key comes in (it may come as `Authorization: Bearer <key>` too).
pub const API_KEY_HEADER: &str = "x-api-key";
/// That header as the card names it.
pub const API_KEY_HEADER_NAME: &str = "X-API-Key";

/// A caller the checks let in.
#[derive(Clone, Debug, PartialEq)]
pub struct Caller {
    /// Its principal: [`SHARED_PRINCIPAL`], or `key:<name>` for a named client.
    pub principal: String,
    /// The named client's key record (its skills and rate).
    pub key: Option<ApiKey>,
}

impl Caller {
    /// The instance's shared principal: its token's holders, or anyone when it takes none.
    pub fn shared() -> Caller {
        Caller {
            principal: SHARED_PRINCIPAL.to_owned(),
            key: None,
        }
    }

    /// A card request's caller: nobody, who owns no task.
    pub fn anonymous() -> Caller {
        Caller {
            principal: "anonymous".to_owned(),
            key: None,
        }
    }

    /// A caller known apart from the others (not the shared principal): its rate limit is its
    /// own, not its address's.
    pub fn individual(&self) -> bool {
        self.principal != SHARED_PRINCIPAL
    }
}

/// What separates a principal from a message id in a claim key.
const CLAIM_SEPARATOR: char = '\u{1f}';

/// The key `principal` claims `message_id` under, so idempotency is per principal: the shared
/// principal's ids as they are (claims kept before principals still hold), any other's (and an id
/// starting with the separator) as `␟<principal>␟<id>`, which no plain id is.
pub fn claim_key(principal: &str, message_id: String) -> String {
    if principal == SHARED_PRINCIPAL && !message_id.starts_with(CLAIM_SEPARATOR) {
        return message_id;
    }
    format!("{CLAIM_SEPARATOR}{principal}{CLAIM_SEPARATOR}{message_id}")
}

/// A scheme an instance takes (docs/auth.md "Authentication").
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scheme<'a> {
    /// Its shared bearer token.
    Bearer,
    /// Its named clients' API keys.
    ApiKey,
    /// OpenID Connect tokens.
    Oidc(&'a OidcSettings),
    /// Client certificates.
    Mtls,
}

impl Scheme<'_> {
    /// Its name in the card's `securitySchemes` and the snapshot's `schemes`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Bearer => "bearer",
            Scheme::ApiKey => "apiKey",
            Scheme::Oidc(_) => "oidc",
            Scheme::Mtls => "mtls",
        }
    }
}

/// The schemes the instance takes, in the order its card lists them.
pub fn schemes(record: &InstanceRecord) -> impl Iterator<Item = Scheme<'_>> {
    [
        record.auth_token_env.as_ref().map(|_| Scheme::Bearer),
        record.active_keys().next().map(|_| Scheme::ApiKey),
        record.oidc.as_ref().map(Scheme::Oidc),
        record.mtls.as_ref().map(|_| Scheme::Mtls),
    ]
    .into_iter()
    .flatten()
}

/// Whether the instance takes credentials at all (its card announces them).
pub fn required(record: &InstanceRecord) -> bool {
    schemes(record).next().is_some()
}

/// Why a request's credentials were refused: the reason the log gives (never a credential) and
/// the `error` its `WWW-Authenticate` challenge names (RFC 6750 §3.1; none when no credentials
/// came).
#[derive(Clone, Debug, PartialEq)]
pub struct Refused {
    /// For the log.
    pub why: &'static str,
    /// `invalid_token` or `insufficient_scope`.
    pub error: Option<&'static str>,
}

impl Refused {
    fn invalid(why: &'static str) -> Refused {
        Refused {
            why,
            error: Some("invalid_token"),
        }
    }
}

/// The caller of a request with `headers` (at most one `Authorization` and one `X-API-Key`,
/// checked before) to `record`, whose bearer token is `token` (none: its secret is not set);
/// OpenID Connect tokens are checked by `verifier`. `cert` is the client certificate the
/// connection's handshake verified: it names the caller of an instance taking `mtls` when the
/// request carries no credential header (one that does is judged by it).
pub async fn authenticate(
    record: &InstanceRecord,
    token: Option<&str>,
    headers: &HeaderMap,
    cert: Option<&PeerCert>,
    verifier: &oidc::Verifier,
) -> Result<Caller, Refused> {
    if !required(record) {
        return Ok(Caller::shared());
    }
    let has_header = headers.contains_key(API_KEY_HEADER) || headers.contains_key(AUTHORIZATION);
    if let (Some(m), Some(cert), false) = (&record.mtls, cert, has_header) {
        let name = match m.principal_from {
            CertName::Subject => cert.subject.as_deref(),
            CertName::San => cert.san.as_deref(),
        };
        return name
            .map(|n| Caller {
                principal: format!("mtls:{n}"),
                key: None,
            })
            .ok_or(Refused::invalid("client_certificate_without_name"));
    }
    // A key header decides, even one that is not text (it is then wrong).
    if let Some(key) = headers.get(API_KEY_HEADER) {
        let key = key.to_str().unwrap_or_default();
        return api_keys::find(record.active_keys(), key)
            .map(api_keys::caller)
            .ok_or(Refused::invalid("wrong_api_key"));
    }
    let unset = record.auth_token_env.is_some() && token.is_none();
    let authorization = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    let Some(authorization) = authorization else {
        return Err(Refused {
            why: if unset {
                "token_secret_not_set"
            } else {
                "missing_token"
            },
            error: None,
        });
    };
    let Some(presented) = crate::credentials::bearer(authorization) else {
        return Err(Refused::invalid("not_a_bearer_token"));
    };
    if let Some(t) = token
        && crate::credentials::bearer_matches(Some(authorization), t)
    {
        return Ok(Caller::shared());
    }
    if let Some(k) = api_keys::find(record.active_keys(), presented) {
        return Ok(api_keys::caller(k));
    }
    if let Some(s) = &record.oidc
        && presented.split('.').count() == 3
    {
        return match verifier.verify(s, presented).await {
            Ok(principal) => Ok(Caller {
                principal,
                key: None,
            }),
            Err(oidc::Refusal::Invalid(why)) => Err(Refused::invalid(why)),
            Err(oidc::Refusal::Scope) => Err(Refused {
                why: "oidc_insufficient_scope",
                error: Some("insufficient_scope"),
            }),
        };
    }
    Err(Refused::invalid(if unset {
        "token_secret_not_set"
    } else {
        "wrong_token"
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(token: bool, key: Option<&str>) -> InstanceRecord {
        let mut r = crate::declared::demo(&Default::default(), 0);
        r.auth_token_env = token.then(|| "T".into());
        r.api_keys = key
            .map(|k| api_keys::record("alice", k, Vec::new(), None, 0))
            .into_iter()
            .collect();
        r
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    /// The principal `record` gives a request with `pairs`, or why it is refused.
    fn check(
        record: &InstanceRecord,
        token: Option<&str>,
        pairs: &[(&'static str, &str)],
    ) -> Result<String, &'static str> {
        check_headers(record, token, &headers(pairs))
    }

    fn check_headers(
        record: &InstanceRecord,
        token: Option<&str>,
        h: &HeaderMap,
    ) -> Result<String, &'static str> {
        let verifier = oidc::Verifier::new(crate::egress::Exit::direct(), Default::default());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(authenticate(record, token, h, None, &verifier))
            .map(|c| c.principal)
            .map_err(|r| r.why)
    }

    #[test]
    fn claim_keys_never_collide_across_principals() {
        assert_eq!(claim_key("token", "m1".into()), "m1");
        let alice = claim_key("key:alice", "m1".into());
        assert_ne!(alice, "m1");
        // A shared caller cannot name another principal's claim.
        assert_ne!(claim_key("token", alice.clone()), alice);
        assert_ne!(claim_key("key:bob", "m1".into()), alice);
    }

    #[test]
    fn an_open_instance_has_one_shared_caller() {
        let got = check(&record(false, None), None, &[]);
        assert_eq!(got, Ok("token".into()));
    }

    #[test]
    fn the_token_is_the_shared_principal_and_keys_name_their_client() {
        let r = record(true, Some("k-alice"));
        let check = |h: &[(&'static str, &str)]| check(&r, Some("tok-123"), h);
        assert_eq!(
            check(&[("authorization", "Bearer tok-123")]),
            Ok("token".into())
        );
        assert_eq!(check(&[("x-api-key", "k-alice")]), Ok("key:alice".into()));
        assert_eq!(
            check(&[("authorization", "bearer k-alice")]),
            Ok("key:alice".into())
        );
        assert_eq!(check(&[("x-api-key", "k-bob")]), Err("wrong_api_key"));
        assert_eq!(
            check(&[("authorization", "Bearer nope")]),
            Err("wrong_token")
        );
        assert_eq!(
            check(&[("authorization", "Basic x")]),
            Err("not_a_bearer_token")
        );
        assert_eq!(check(&[]), Err("missing_token"));
        // A key in the key header is never tried as the token, nor the other way.
        assert_eq!(check(&[("x-api-key", "tok-123")]), Err("wrong_api_key"));
    }

    #[test]
    fn a_key_header_decides_even_when_it_is_not_text_and_revoked_keys_never_match() {
        let mut r = record(true, Some("k-alice"));
        let mut h = headers(&[("authorization", "Bearer tok-123")]);
        h.insert(
            API_KEY_HEADER,
            http::HeaderValue::from_bytes(b"\xff").unwrap(),
        );
        assert_eq!(check_headers(&r, Some("tok-123"), &h), Err("wrong_api_key"));
        r.api_keys[0].revoked_at = Some(1);
        let alice = [("x-api-key", "k-alice")];
        assert_eq!(check(&r, Some("tok-123"), &alice), Err("wrong_api_key"));
        r.auth_token_env = None;
        assert!(!required(&r), "a revoked key guards nothing");
    }

    #[test]
    fn a_token_secret_not_set_still_lets_keys_in() {
        let r = record(true, Some("k-alice"));
        let got = check(&r, None, &[("authorization", "Bearer tok")]);
        assert_eq!(got, Err("token_secret_not_set"));
        let got = check(&r, None, &[("x-api-key", "k-alice")]);
        assert_eq!(got, Ok("key:alice".into()));
    }
}
