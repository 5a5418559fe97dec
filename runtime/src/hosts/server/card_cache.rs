//! Agent cards kept as an edge cache keeps any response: a component's 200 answer to a card route
//! that says `Cache-Control: public, max-age=N` is kept (at most [`MAX_AGE`]) for that instance
//! record and that component, and answered again, `If-None-Match` included, without
//! instantiating anything. A card whose answer says `Vary` is kept once per value of the request
//! headers it names (a few at most), so a 1.0 caller never gets the card a 0.3 caller got. A
//! changed record, a swapped component or an expired entry asks the component again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_NONE_MATCH, VARY};
use http::{HeaderMap, HeaderName, HeaderValue, Response};
use http_body_util::BodyExt;

use crate::responses::{Body, full};

/// Longest a card is kept, whatever the component says.
pub const MAX_AGE: Duration = Duration::from_secs(300);
/// Largest card kept.
const MAX_BYTES: usize = 64 << 10;
/// Most answers kept per instance (one per value of the headers its card varies on).
const MAX_VARIANTS: usize = 8;

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
    /// The request headers the answer varies on, with the values it was made for.
    vary: Vec<(HeaderName, Option<HeaderValue>)>,
    until: Instant,
    headers: HeaderMap,
    body: Bytes,
}

impl Kept {
    /// Whether this answer holds for `version` and a request with `headers`, now.
    fn serves(&self, version: &Version, headers: &HeaderMap) -> bool {
        self.version == *version
            && Instant::now() < self.until
            && self
                .vary
                .iter()
                .all(|(name, value)| headers.get(name) == value.as_ref())
    }
}

/// Cards by instance id, one per variant.
#[derive(Default)]
pub struct CardCache(Mutex<HashMap<String, Vec<Kept>>>);

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
            .get(instance)?
            .iter()
            .find(|k| k.serves(version, request))?;
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

    /// Keeps `response` to a request with `request` headers when it is a cacheable 200 (read
    /// whole, so it is answered whole); returns it either way.
    pub async fn keep(
        &self,
        instance: &str,
        version: Version,
        request: &HeaderMap,
        response: Response<Body>,
    ) -> Response<Body> {
        let Some((max_age, vary)) = (response.status() == 200)
            .then(|| public_max_age(response.headers()).zip(varies_on(response.headers())))
            .flatten()
        else {
            return response;
        };
        let vary: Vec<_> = vary
            .into_iter()
            .map(|name| {
                let value = request.get(&name).cloned();
                (name, value)
            })
            .collect();
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
        kept.retain(|k| k.version == version && k.vary != vary);
        if kept.len() >= MAX_VARIANTS {
            kept.remove(0);
        }
        kept.push(Kept {
            version,
            vary,
            until: Instant::now() + max_age.min(MAX_AGE),
            headers: parts.headers.clone(),
            body: body.clone(),
        });
        Response::from_parts(parts, full(body))
    }
}

/// The request headers an answer varies on (none without `Vary`); none at all for `Vary: *`,
/// which no cache may keep.
fn varies_on(headers: &HeaderMap) -> Option<Vec<HeaderName>> {
    let mut names = Vec::new();
    for value in headers.get_all(VARY) {
        for name in value.to_str().ok()?.split(',').map(str::trim) {
            if name == "*" {
                return None;
            }
            if !name.is_empty() {
                names.push(HeaderName::from_bytes(name.as_bytes()).ok()?);
            }
        }
    }
    Some(names)
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
            .keep("i", version(1), &none, card("public, max-age=300"))
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
            cache
                .keep("i", version(1), &HeaderMap::new(), card(header))
                .await;
            assert!(
                cache.answer("i", &version(1), &HeaderMap::new()).is_none(),
                "{header}"
            );
        }
    }

    #[tokio::test]
    async fn keeps_one_answer_per_value_of_the_headers_it_varies_on() {
        let cache = CardCache::default();
        let asking = |v: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(v) = v {
                h.insert("a2a-version", v.parse().unwrap());
            }
            h
        };
        let varying = |body: &'static str| {
            let mut r = card("public, max-age=300");
            r.headers_mut()
                .insert(VARY, "A2A-Version, Accept".parse().unwrap());
            *r.body_mut() = full(body);
            r
        };
        cache
            .keep("i", version(1), &asking(None), varying("both"))
            .await;
        assert!(
            cache
                .answer("i", &version(1), &asking(Some("1.0")))
                .is_none(),
            "a 1.0 request is not answered with the card made for none"
        );
        cache
            .keep("i", version(1), &asking(Some("1.0")), varying("clean"))
            .await;
        let (none, _) = cache.answer("i", &version(1), &asking(None)).unwrap();
        assert_eq!(text(none).await, "both");
        let (clean, _) = cache
            .answer("i", &version(1), &asking(Some("1.0")))
            .unwrap();
        assert_eq!(text(clean).await, "clean");
        for n in 0..MAX_VARIANTS {
            let v = format!("9.{n}");
            cache
                .keep("i", version(1), &asking(Some(&v)), varying("other"))
                .await;
        }
        assert_eq!(cache.0.lock().unwrap()["i"].len(), MAX_VARIANTS, "bounded");
        let mut any = card("public, max-age=300");
        any.headers_mut().insert(VARY, "*".parse().unwrap());
        cache.keep("j", version(1), &asking(None), any).await;
        assert!(cache.answer("j", &version(1), &asking(None)).is_none());
    }
}
