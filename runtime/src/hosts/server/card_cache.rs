//! Agent cards kept as an edge cache keeps any response: a component's 200 answer to a card route
//! that says `Cache-Control: public, max-age=N` is kept (at most [`MAX_AGE`]) for that instance
//! record and that component, and answered again, `If-None-Match` included, without
//! instantiating anything. A card varies by request (`Vary: A2A-Version, Accept`): it is kept once
//! per [`Variant`], what the protocol crate makes of those headers (at most four, whatever
//! callers send), so a 1.0 caller never gets the card a 0.3 caller got; an answer that varies on
//! anything else is not kept. A changed record, a swapped component or an expired entry asks the
//! component again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY,
};
use http::{HeaderMap, Response};
use http_body_util::BodyExt;

use crate::responses::{Body, full};

/// Longest a card is kept, whatever the component says.
pub const MAX_AGE: Duration = Duration::from_secs(300);
/// Largest card kept.
const MAX_BYTES: usize = 64 << 10;
/// The request headers a kept card may vary on: what [`Variant`] reads.
const VARIES_ON: [&str; 2] = ["a2a-version", "accept"];

/// What a kept card belongs to: what the card is made of (the instance record's version, whether
/// a token is set, the public URL) and the component's digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The record's `updatedAt`.
    pub record: u64,
    /// A bearer token is set.
    pub auth: bool,
    /// The endpoint URL the card announces.
    pub endpoint: String,
    /// The component's sha256.
    pub component: String,
}

/// Which of an instance's cards a request gets, as the protocol crate decides it from the
/// request's `Accept` and `A2A-Version`: its media type, and whether the 0.3 fields are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    media: &'static str,
    fields_03: bool,
}

impl Variant {
    /// The card a request with `headers` gets from an instance that serves 0.3 callers or not.
    pub fn of(headers: &HeaderMap, compat03: bool) -> Variant {
        let accept: Vec<&str> = headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        let version = headers.get("a2a-version").and_then(|v| v.to_str().ok());
        Variant {
            media: a2a_protocol::methods::answer_type(None, Some(&accept.join(", ")))
                .unwrap_or("application/json"),
            fields_03: a2a_protocol::card::with_03_fields(compat03, version),
        }
    }
}

struct Kept {
    version: Version,
    variant: Variant,
    until: Instant,
    headers: HeaderMap,
    body: Bytes,
}

/// Cards by instance id, one per variant.
#[derive(Default)]
pub struct CardCache(Mutex<HashMap<String, Vec<Kept>>>);

impl CardCache {
    /// The kept answer to a card request of `variant`, and its outcome (`ok`, `not_modified`), if
    /// one is fresh.
    pub fn answer(
        &self,
        instance: &str,
        version: &Version,
        variant: Variant,
        request: &HeaderMap,
    ) -> Option<(Response<Body>, &'static str)> {
        let cards = self.0.lock().unwrap();
        let kept = cards
            .get(instance)?
            .iter()
            .find(|k| k.version == *version && k.variant == variant && Instant::now() < k.until)?;
        let fresh = match (request.get(IF_NONE_MATCH), kept.headers.get(ETAG)) {
            (Some(asked), Some(etag)) => a2a_protocol::card::etag_matches(
                asked.to_str().unwrap_or_default(),
                etag.to_str().unwrap_or_default(),
            ),
            _ => false,
        };
        let mut response = Response::new(full(if fresh {
            Bytes::new()
        } else {
            kept.body.clone()
        }));
        *response.headers_mut() = kept.headers.clone();
        if fresh {
            *response.status_mut() = http::StatusCode::NOT_MODIFIED;
            response.headers_mut().remove(CONTENT_TYPE);
            response.headers_mut().remove(CONTENT_LENGTH);
        }
        Some((response, if fresh { "not_modified" } else { "ok" }))
    }

    /// Keeps `response`, the card of `variant`, when it is a cacheable 200 that varies on no
    /// more than a variant tells apart (read whole, so it is answered whole); returns it either
    /// way.
    pub async fn keep(
        &self,
        instance: &str,
        version: Version,
        variant: Variant,
        response: Response<Body>,
    ) -> Response<Body> {
        let Some(max_age) = (response.status() == 200 && varies_as_variants(response.headers()))
            .then(|| public_max_age(response.headers()))
            .flatten()
        else {
            return response;
        };
        let (parts, body) = response.into_parts();
        let body = match body.collect().await {
            Ok(b) => b.to_bytes(),
            // The component's body failed midway: so does the answer.
            Err(e) => {
                let failed = futures_util::stream::once(async { Err(e) });
                let body = http_body_util::StreamBody::new(failed).boxed_unsync();
                return Response::from_parts(parts, body);
            }
        };
        if body.len() > MAX_BYTES {
            return Response::from_parts(parts, full(body));
        }
        let mut cards = self.0.lock().unwrap();
        let kept = cards.entry(instance.to_owned()).or_default();
        kept.retain(|k| k.version == version && k.variant != variant);
        kept.push(Kept {
            version,
            variant,
            until: Instant::now() + max_age.min(MAX_AGE),
            headers: parts.headers.clone(),
            body: body.clone(),
        });
        Response::from_parts(parts, full(body))
    }
}

/// Whether an answer varies on no request header but those a [`Variant`] reads (`Vary: *` and
/// any other header: not kept).
fn varies_as_variants(headers: &HeaderMap) -> bool {
    headers.get_all(VARY).iter().all(|value| {
        value.to_str().is_ok_and(|names| {
            names
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .all(|n| VARIES_ON.iter().any(|v| v.eq_ignore_ascii_case(n)))
        })
    })
}

/// The `max-age` of a `Cache-Control: public` response.
fn public_max_age(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(CACHE_CONTROL)?.to_str().ok()?;
    let directives: Vec<&str> = value.split(',').map(str::trim).collect();
    if !directives.iter().any(|d| d.eq_ignore_ascii_case("public")) {
        return None;
    }
    let seconds: u64 = directives
        .iter()
        .find_map(|d| d.strip_prefix("max-age="))?
        .parse()
        .ok()?;
    (seconds > 0).then(|| Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(cache_control: &str) -> Response<Body> {
        let mut r = Response::new(full("{\"name\":\"a\"}"));
        let h = r.headers_mut();
        h.insert(CACHE_CONTROL, cache_control.parse().unwrap());
        h.insert(ETAG, "\"e1\"".parse().unwrap());
        h.insert(CONTENT_TYPE, "application/json".parse().unwrap());
        r
    }

    fn version(record: u64) -> Version {
        Version {
            record,
            auth: false,
            endpoint: "http://a/".into(),
            component: "sha".into(),
        }
    }

    async fn text(r: Response<Body>) -> String {
        String::from_utf8(r.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    /// The variant of a request without `Accept` or `A2A-Version`, from a 0.3-serving instance.
    fn plain() -> Variant {
        Variant::of(&HeaderMap::new(), true)
    }

    #[tokio::test]
    async fn keeps_public_cards_for_their_version_and_answers_conditionals() {
        let cache = CardCache::default();
        let none = HeaderMap::new();
        assert!(cache.answer("i", &version(1), plain(), &none).is_none());
        let first = cache
            .keep("i", version(1), plain(), card("public, max-age=300"))
            .await;
        assert_eq!(
            text(first).await,
            "{\"name\":\"a\"}",
            "the first answer is whole"
        );
        let (again, outcome) = cache.answer("i", &version(1), plain(), &none).unwrap();
        assert_eq!((again.status().as_u16(), outcome), (200, "ok"));
        assert_eq!(again.headers()[ETAG], "\"e1\"");
        assert_eq!(text(again).await, "{\"name\":\"a\"}");
        let mut conditional = HeaderMap::new();
        conditional.insert(IF_NONE_MATCH, "\"e1\"".parse().unwrap());
        let (not_modified, outcome) = cache
            .answer("i", &version(1), plain(), &conditional)
            .unwrap();
        assert_eq!(
            (not_modified.status().as_u16(), outcome),
            (304, "not_modified")
        );
        assert!(not_modified.headers().get(CONTENT_TYPE).is_none());
        assert!(
            cache.answer("i", &version(2), plain(), &none).is_none(),
            "a changed record asks the component"
        );
        assert!(cache.answer("j", &version(1), plain(), &none).is_none());
    }

    #[tokio::test]
    async fn keeps_nothing_the_component_does_not_allow() {
        let cache = CardCache::default();
        for header in [
            "private, max-age=300",
            "public",
            "public, max-age=0",
            "no-store",
        ] {
            cache.keep("i", version(1), plain(), card(header)).await;
            assert!(
                cache
                    .answer("i", &version(1), plain(), &HeaderMap::new())
                    .is_none(),
                "{header}"
            );
        }
        for vary in ["*", "A2A-Version, Cookie"] {
            let mut r = card("public, max-age=300");
            r.headers_mut().insert(VARY, vary.parse().unwrap());
            cache.keep("j", version(1), plain(), r).await;
            assert!(
                cache
                    .answer("j", &version(1), plain(), &HeaderMap::new())
                    .is_none(),
                "Vary: {vary}"
            );
        }
    }

    #[tokio::test]
    async fn keeps_one_card_per_variant_however_callers_spell_their_headers() {
        let asking = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                h.append(*name, value.parse().unwrap());
            }
            Variant::of(&h, true)
        };
        let cache = CardCache::default();
        let none = HeaderMap::new();
        let varying = |body: &'static str| {
            let mut r = card("public, max-age=300");
            r.headers_mut()
                .insert(VARY, "A2A-Version, Accept".parse().unwrap());
            *r.body_mut() = full(body);
            r
        };
        cache
            .keep("i", version(1), asking(&[]), varying("both"))
            .await;
        let clean = asking(&[("a2a-version", "1.0")]);
        assert!(
            cache.answer("i", &version(1), clean, &none).is_none(),
            "a 1.0 request is not answered with the card made for none"
        );
        cache.keep("i", version(1), clean, varying("clean")).await;
        let (both, _) = cache
            .answer("i", &version(1), asking(&[("a2a-version", "0.3")]), &none)
            .unwrap();
        assert_eq!(text(both).await, "both", "0.3 and none get one card");
        // Any 1.x, in any spelling, and any Accept without a2a+json: the same kept card.
        for pairs in [
            &[("a2a-version", "1.0.1"), ("accept", "*/*;q=0.1")][..],
            &[
                ("a2a-version", "1"),
                ("accept", "text/html"),
                ("accept", "*/*"),
            ][..],
        ] {
            let (same, _) = cache
                .answer("i", &version(1), asking(pairs), &none)
                .unwrap_or_else(|| panic!("{pairs:?}"));
            assert_eq!(text(same).await, "clean");
        }
        let a2a = asking(&[("accept", "text/html"), ("accept", "application/a2a+json")]);
        assert_ne!(a2a, plain(), "Accept is read across all its fields");
        for n in 0..100 {
            let v = format!("9.{n}");
            cache
                .keep(
                    "i",
                    version(1),
                    asking(&[("a2a-version", &v)]),
                    varying("other"),
                )
                .await;
        }
        assert!(
            cache.0.lock().unwrap()["i"].len() <= 4,
            "at most one card per variant"
        );
    }
}
