//! The control surface's guards (docs/control.md "Control API"): a loopback peer is not enough, since a web page in the
//! operator's browser and a proxy on the same host reach loopback too. A control request must
//! name a loopback `Host`, come from no other origin, carry no forwarding headers, and a POST must
//! be `application/json` (which no cross-site form or `text/plain` request can send).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::{HeaderMap, Method, Uri, header};

/// The control surface answers only these peers (the TCP peer; proxy headers are ignored).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip == IpAddr::V4(Ipv4Addr::LOCALHOST)
        || ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
        || ip == IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped())
}

/// Why a control request is refused: its HTTP status and message.
#[derive(Debug, PartialEq, Eq)]
pub struct Forbidden {
    /// 403 or 415.
    pub status: u16,
    /// What is wrong, and what to do.
    pub message: &'static str,
}

/// `Via` among them: every request an a2a-edge sends carries it (`egress::VIA`), so no
/// component of this runtime or another drives a control API through its egress.
const FORWARDING: &[&str] = &["forwarded", "x-real-ip", "via"];

/// Checks a control request's headers (the peer was checked already); its authority is `Host`,
/// or with HTTP/2 the target's (`:authority`); `secure` when it came over TLS (so its origin is
/// `https://`).
pub fn check(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    secure: bool,
) -> Result<(), Forbidden> {
    let forbidden = |message| {
        Err(Forbidden {
            status: 403,
            message,
        })
    };
    if headers
        .keys()
        .any(|k| FORWARDING.contains(&k.as_str()) || k.as_str().starts_with("x-forwarded-"))
    {
        return forbidden(
            "the control API refuses requests that came through a proxy (Forwarded, Via, X-Forwarded-*, X-Real-IP), the requests of a2a-edge's components among them; call it on loopback directly",
        );
    }
    let host = match headers.get(header::HOST) {
        Some(h) => h.to_str().ok(),
        None => uri.authority().map(|a| a.as_str()),
    };
    let Some(port) = host.and_then(loopback_authority) else {
        return forbidden(
            "the control API answers only Host: 127.0.0.1, localhost or [::1] (with any port)",
        );
    };
    match headers
        .get(header::ORIGIN)
        .map(|o| o.to_str().unwrap_or(""))
    {
        Some(origin) => {
            let (scheme, default) = if secure {
                ("https://", 443)
            } else {
                ("http://", 80)
            };
            let same = origin
                .strip_prefix(scheme)
                .and_then(loopback_authority)
                .is_some_and(|p| p.unwrap_or(default) == port.unwrap_or(default));
            if !same {
                return forbidden(
                    "the control API refuses requests from other origins (Origin is not this server's loopback origin)",
                );
            }
        }
        None => {
            let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
            if site.is_some_and(|s| !matches!(s, "same-origin" | "none")) {
                return forbidden(
                    "the control API refuses requests from other sites (Sec-Fetch-Site)",
                );
            }
        }
    }
    if method == Method::POST {
        let media = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        if media.as_deref() != Some("application/json") {
            return Err(Forbidden {
                status: 415,
                message: "control actions must be sent with Content-Type: application/json",
            });
        }
    }
    Ok(())
}

/// `Some(port)` when `authority` is `127.0.0.1`, `localhost` or `[::1]` with an optional port.
fn loopback_authority(authority: &str) -> Option<Option<u16>> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && (!h.starts_with('[') || h.ends_with(']')) => {
            (h, Some(p.parse::<u16>().ok()?))
        }
        _ => (authority, None),
    };
    matches!(
        host.to_ascii_lowercase().as_str(),
        "127.0.0.1" | "localhost" | "[::1]"
    )
    .then_some(port)
}

/// Whether an address the runtime listens on is loopback only.
pub fn listens_on_loopback(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.to_canonical().is_loopback()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    v.parse().unwrap(),
                )
            })
            .collect()
    }

    fn status(method: Method, pairs: &[(&str, &str)]) -> u16 {
        check(
            &method,
            &Uri::from_static("/a2a/api"),
            &headers(pairs),
            false,
        )
        .map_or_else(|r| r.status, |_| 200)
    }

    #[test]
    fn over_tls_the_origin_is_https_and_http2_names_its_authority_in_the_target() {
        let h2 = |uri: &'static str, pairs: &[(&str, &str)]| {
            check(&Method::GET, &Uri::from_static(uri), &headers(pairs), true)
                .map_or_else(|r| r.status, |_| 200)
        };
        let target = "https://127.0.0.1:3080/a2a/api";
        assert_eq!(h2(target, &[]), 200);
        assert_eq!(h2("https://evil.example/a2a/api", &[]), 403);
        assert_eq!(h2("/a2a/api", &[]), 403, "no authority at all");
        assert_eq!(h2(target, &[("origin", "https://127.0.0.1:3080")]), 200);
        assert_eq!(
            h2(target, &[("origin", "http://127.0.0.1:3080")]),
            403,
            "plain http is another origin"
        );
        assert_eq!(
            h2(
                "https://localhost/a2a/api",
                &[("origin", "https://localhost:443")]
            ),
            200
        );
        assert_eq!(
            status(
                Method::GET,
                &[("host", "localhost"), ("origin", "https://localhost")]
            ),
            403,
            "https is not this plain listener's origin"
        );
    }

    #[test]
    fn hosts() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:3080",
            "localhost:1",
            "LOCALHOST",
            "[::1]:3080",
            "[::1]",
        ] {
            assert_eq!(status(Method::GET, &[("host", ok)]), 200, "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:3080",
            "127.0.0.1.evil.example",
            "localhost.:3080",
            "127.0.0.2",
            "[::1]:x",
            "::1",
            "localhost:99999",
        ] {
            assert_eq!(status(Method::GET, &[("host", bad)]), 403, "{bad}");
        }
        assert_eq!(status(Method::GET, &[]), 403);
    }

    #[test]
    fn origins_and_sites() {
        let h = ("host", "127.0.0.1:3080");
        assert_eq!(
            status(Method::GET, &[h, ("origin", "http://127.0.0.1:3080")]),
            200
        );
        assert_eq!(
            status(Method::GET, &[h, ("origin", "http://localhost:3080")]),
            200
        );
        assert_eq!(
            status(Method::GET, &[h, ("origin", "http://localhost:8000")]),
            403,
            "another local port is another origin"
        );
        assert_eq!(
            status(Method::GET, &[h, ("origin", "http://evil.example")]),
            403
        );
        assert_eq!(status(Method::GET, &[h, ("origin", "null")]), 403);
        assert_eq!(
            status(Method::GET, &[h, ("sec-fetch-site", "cross-site")]),
            403
        );
        assert_eq!(
            status(Method::GET, &[h, ("sec-fetch-site", "same-site")]),
            403
        );
        assert_eq!(
            status(Method::GET, &[h, ("sec-fetch-site", "same-origin")]),
            200
        );
        assert_eq!(
            status(
                Method::GET,
                &[("host", "localhost"), ("origin", "http://localhost")]
            ),
            200
        );
    }

    #[test]
    fn posts_need_json_and_no_proxy() {
        let h = ("host", "127.0.0.1:3080");
        assert_eq!(status(Method::POST, &[h]), 415);
        assert_eq!(
            status(Method::POST, &[h, ("content-type", "text/plain")]),
            415
        );
        assert_eq!(
            status(
                Method::POST,
                &[h, ("content-type", "application/json; charset=utf-8")]
            ),
            200
        );
        for fwd in [
            "forwarded",
            "x-forwarded-for",
            "x-forwarded-host",
            "x-real-ip",
            "via",
        ] {
            assert_eq!(status(Method::GET, &[h, (fwd, "1.2.3.4")]), 403, "{fwd}");
        }
    }
}
