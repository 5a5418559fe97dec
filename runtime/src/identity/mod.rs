//! Who calls an instance (README "Authentication"): the credentials a request carries, checked
//! against the instance's schemes, and the principal the caller is known by. Tasks, contexts and
//! push configs belong to a principal; rate limits key on it.

pub mod api_keys;

use http::HeaderMap;
use http::header::AUTHORIZATION;

use crate::records::{ApiKey, InstanceRecord, SHARED_PRINCIPAL};

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

/// Whether the instance takes credentials at all (its card announces them).
pub fn required(record: &InstanceRecord) -> bool {
    record.auth_token_env.is_some() || !record.api_keys.is_empty()
}

/// The caller of a request with `headers` (at most one `Authorization` and one `X-API-Key`,
/// checked before) to `record`, whose bearer token is `token` (none: its secret is not set);
/// `Err` names the check that failed, for the log (never a credential).
pub fn authenticate(
    record: &InstanceRecord,
    token: Option<&str>,
    headers: &HeaderMap,
) -> Result<Caller, &'static str> {
    if !required(record) {
        return Ok(Caller::shared());
    }
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(key) = text(API_KEY_HEADER) {
        return api_keys::find(&record.api_keys, key)
            .map(api_keys::caller)
            .ok_or("wrong_api_key");
    }
    let Some(authorization) = text(AUTHORIZATION.as_str()) else {
        return Err(match (&record.auth_token_env, token) {
            (Some(_), None) => "token_secret_not_set",
            _ => "missing_token",
        });
    };
    let Some(presented) = crate::credentials::bearer(authorization) else {
        return Err("not_a_bearer_token");
    };
    if let Some(t) = token
        && crate::credentials::bearer_matches(Some(authorization), t)
    {
        return Ok(Caller::shared());
    }
    if let Some(k) = api_keys::find(&record.api_keys, presented) {
        return Ok(api_keys::caller(k));
    }
    Err(match (&record.auth_token_env, token) {
        (Some(_), None) => "token_secret_not_set",
        _ => "wrong_token",
    })
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
        let got = authenticate(&record(false, None), None, &headers(&[]));
        assert_eq!(got, Ok(Caller::shared()));
    }

    #[test]
    fn the_token_is_the_shared_principal_and_keys_name_their_client() {
        let r = record(true, Some("k-alice"));
        let token = Some("tok-123");
        let check =
            |h: &[(&'static str, &str)]| authenticate(&r, token, &headers(h)).map(|c| c.principal);
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
    fn a_token_secret_not_set_still_lets_keys_in() {
        let r = record(true, Some("k-alice"));
        let got = authenticate(&r, None, &headers(&[("authorization", "Bearer tok")]));
        assert_eq!(got, Err("token_secret_not_set"));
        let got = authenticate(&r, None, &headers(&[("x-api-key", "k-alice")]));
        assert_eq!(got.map(|c| c.principal), Ok("key:alice".into()));
    }
}
