//! Agent cards kept as an edge cache keeps any response: a component's 200 answer to a card route
//! that says `Cache-Control: public, max-age=N` is kept (at most [`MAX_AGE`]) for that instance
//! record and that component, and answered again, `If-None-Match` included, without
//! instantiating anything. A changed record, a swapped component or an expired entry asks the
//! component again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use http::{HeaderMap, Response};
use http_body_util::BodyExt;

use crate::responses::{Body, full};

/// Longest a card is kept, whatever the component says.
pub const MAX_AGE: Duration = Duration::from_secs(300);
/// Largest card kept.
const MAX_BYTES: usize = 64 << 10;

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

struct Kept {
    version: Version,
    until: Instant,
    headers: HeaderMap,
    body: Bytes,
}

/// Cards by instance id.
#[derive(Default)]
pub struct CardCache(Mutex<HashMap<String, Kept>>);

impl CardCache {
    /// The kept answer to a card request, and its outcome (`ok`, `not_modified`), if one is fresh.
    pub fn answer(
        &self,
        instance: &str,
        version: &Version,
        request: &HeaderMap,
    ) -> Option<(Response<Body>, &'static str)> {
        let cards = self.0.lock().unwrap();
        let kept = cards
            .get(instance)
            .filter(|k| k.version == *version && Instant::now() < k.until)?;
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

    /// Keeps `response` when it is a cacheable 200 (read whole, so it is answered whole);
    /// returns it either way.
    pub async fn keep(
        &self,
        instance: &str,
        version: Version,
        response: Response<Body>,
    ) -> Response<Body> {
        let Some(max_age) = (response.status() == 200)
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
        self.0.lock().unwrap().insert(
            instance.to_owned(),
            Kept {
                version,
                until: Instant::now() + max_age.min(MAX_AGE),
                headers: parts.headers.clone(),
                body: body.clone(),
            },
        );
        Response::from_parts(parts, full(body))
    }
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

    #[tokio::test]
    async fn keeps_public_cards_for_their_version_and_answers_conditionals() {
        let cache = CardCache::default();
        let none = HeaderMap::new();
        assert!(cache.answer("i", &version(1), &none).is_none());
        let first = cache
            .keep("i", version(1), card("public, max-age=300"))
            .await;
        assert_eq!(
            text(first).await,
            "{\"name\":\"a\"}",
            "the first answer is whole"
        );
        let (again, outcome) = cache.answer("i", &version(1), &none).unwrap();
        assert_eq!((again.status().as_u16(), outcome), (200, "ok"));
        assert_eq!(again.headers()[ETAG], "\"e1\"");
        assert_eq!(text(again).await, "{\"name\":\"a\"}");
        let mut conditional = HeaderMap::new();
        conditional.insert(IF_NONE_MATCH, "\"e1\"".parse().unwrap());
        let (not_modified, outcome) = cache.answer("i", &version(1), &conditional).unwrap();
        assert_eq!(
            (not_modified.status().as_u16(), outcome),
            (304, "not_modified")
        );
        assert!(not_modified.headers().get(CONTENT_TYPE).is_none());
        assert!(
            cache.answer("i", &version(2), &none).is_none(),
            "a changed record asks the component"
        );
        assert!(cache.answer("j", &version(1), &none).is_none());
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
            cache.keep("i", version(1), card(header)).await;
            assert!(
                cache.answer("i", &version(1), &HeaderMap::new()).is_none(),
                "{header}"
            );
        }
    }
}
