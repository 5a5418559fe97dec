//! Where the runtime's own requests may connect (the SSRF guard), and the connection itself: the
//! host is resolved once, every address is checked, and the request goes to exactly the checked
//! address, so a DNS answer that changes between the check and the connect (rebinding) cannot
//! slip through. Outbound connections and push webhooks both go through it, and out through the
//! [`Exit`] (TLS roots, proxy).
//!
//! For an outbound connection, the operator-configured card URL is trusted as given; anything
//! else a guest asks for (an endpoint a remote card announces, a redirect) may not reach
//! loopback, private, link-local, multicast or unspecified addresses unless its host is the card
//! URL's host or the connection sets `allowPrivate`. Webhooks are never trusted hosts. Link-local
//! addresses (cloud metadata lives there) are always refused.

mod exit;
pub mod fetch;
pub mod guarded;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use wasmtime_wasi_http::Error;

pub use exit::{EgressSettings, Exit, Sent};
pub use fetch::{exchange, fetch_json};

/// The `User-Agent` of the runtime's own requests.
pub const USER_AGENT: &str = concat!("a2a-edge/", env!("CARGO_PKG_VERSION"));

/// Where a connection's requests may go.
#[derive(Clone, Debug, Default)]
pub struct Reach {
    /// The card URL's host (lower-cased): trusted as the operator gave it.
    pub trusted_host: Option<String>,
    /// The connection allows private addresses for every host.
    pub allow_private: bool,
    /// What allows internal addresses, for the refusal (e.g. `set allowPrivate on the connection`).
    pub allow_with: &'static str,
}

/// The address a request to `ip` really reaches: the IPv4 address an IPv6 form carries
/// (IPv4-mapped `::ffff:0:0/96`, IPv4-translated `::ffff:0:0:0/96`, IPv4-compatible `::/96`,
/// NAT64 `64:ff9b::/96`, 6to4 `2002::/16`), so every form is judged by the IPv4 rules; other
/// addresses as they are.
fn reached(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip.to_canonical() else {
        return ip.to_canonical();
    };
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    let compatible = s[..6] == [0; 6] && !v6.is_loopback() && !v6.is_unspecified();
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let translated = s[..6] == [0, 0, 0, 0, 0xffff, 0];
    if compatible || nat64 || translated {
        return IpAddr::V4(low);
    }
    if s[0] == 0x2002 {
        return IpAddr::V4(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    IpAddr::V6(v6)
}

/// Addresses no outbound request may reach: link-local (169.254.0.0/16 with the cloud metadata
/// service at 169.254.169.254, fe80::/10) and AWS's IPv6 metadata address, in any IPv6 form
/// that carries them.
pub fn always_refused(ip: IpAddr) -> bool {
    match reached(ip) {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6 == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
        }
    }
}

/// Every address that is not global unicast: loopback, private, shared (CGNAT), link-local,
/// multicast, broadcast, unspecified, documentation (TEST-NET, `2001:db8::/32`), benchmarking,
/// reserved, IPv6 site-local, unique-local, discard-only, Teredo and ORCHID, and NAT64's local-use
/// prefix; an IPv6 form that carries an IPv4 address is judged by that address.
pub fn is_internal(ip: IpAddr) -> bool {
    match reached(ip) {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_unspecified()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 192 && b == 0 && c == 2)
                || (a == 192 && b == 88 && c == 99)
                || (a == 198 && (b == 18 || b == 19))
                || (a == 198 && b == 51 && c == 100)
                || (a == 203 && b == 0 && c == 113)
                || a >= 240
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            // Global unicast is 2000::/3; the rest of the space is not.
            (s[0] & 0xe000) != 0x2000
                || v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x2001 && s[1] == 0)
                || (s[0] == 0x2001 && s[1] == 2 && s[2] == 0)
                || (s[0] == 0x2001 && (s[1] & 0xffe0) == 0x0020)
                || (s[0] == 0x2001 && (s[1] & 0xfff0) == 0x0010)
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)
                || s[..4] == [0x100, 0, 0, 0]
        }
    }
}

impl Reach {
    /// Checks the addresses `host` resolved to; the refusal says which address and why.
    pub fn check(&self, host: &str, addrs: &[SocketAddr]) -> Result<(), String> {
        let trusted = self
            .trusted_host
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case(host));
        for a in addrs {
            if always_refused(a.ip()) {
                return Err(format!(
                    "{host} resolves to the link-local address {}, which outbound calls never reach",
                    a.ip()
                ));
            }
            if is_internal(a.ip()) && !trusted && !self.allow_private {
                return Err(format!(
                    "{host} resolves to the internal address {}: {}",
                    a.ip(),
                    self.allow_with
                ));
            }
        }
        Ok(())
    }
}

/// The host of `url` as the guard compares it ([`host_of`]), if it is a URI with one.
pub fn url_host(url: &str) -> Option<String> {
    url.parse::<http::Uri>().ok().as_ref().and_then(host_of)
}

/// The host of a URI as the guard compares it: lower-cased, without IPv6 brackets.
pub fn host_of(uri: &http::Uri) -> Option<String> {
    Some(
        uri.host()?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase(),
    )
}

/// An entry of an agent's `allowedHosts` as the guard compares it: `name`, `name:port`,
/// `[v6]` or `[v6]:port`, as (host lower-cased without brackets, port); `None` for anything
/// else (a URL, `user@`, a path).
pub fn allowed_entry(entry: &str) -> Option<(String, Option<u16>)> {
    let authority: http::uri::Authority = entry.parse().ok()?;
    let port = authority.port_u16();
    let bare = authority.as_str().len() == authority.host().len();
    if authority.as_str().contains('@') || authority.host().is_empty() || (port.is_none() && !bare)
    {
        return None;
    }
    let uri = http::Uri::builder()
        .scheme("http")
        .authority(authority.clone())
        .path_and_query("/")
        .build()
        .ok()?;
    Some((host_of(&uri)?, port))
}

/// [`host_of`] and the port (the scheme's default when none is given).
fn host_port(uri: &http::Uri) -> Option<(String, u16)> {
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    Some((host_of(uri)?, port))
}

/// Resolves the request's host, checks every address against `reach`, and returns them.
pub async fn resolve(
    uri: &http::Uri,
    reach: &Reach,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, Error> {
    let (host, port) = host_port(uri).ok_or(Error::HttpRequestUriInvalid)?;
    let addrs = lookup(&host, port, timeout).await?;
    if let Err(why) = reach.check(&host, &addrs) {
        tracing::warn!(uri = %uri, %why, "refused an outbound request");
        return Err(Error::DestinationIpProhibited);
    }
    Ok(addrs)
}

/// The addresses of `host` (an IP address stands for itself), within `timeout`.
pub async fn lookup(host: &str, port: u16, timeout: Duration) -> Result<Vec<SocketAddr>, Error> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<SocketAddr> =
        match tokio::time::timeout(timeout, tokio::net::lookup_host((host, port))).await {
            Ok(Ok(found)) => found.collect(),
            Ok(Err(e)) => {
                return Err(Error::DnsError {
                    rcode: Some(e.to_string()),
                    info_code: None,
                });
            }
            Err(_) => return Err(Error::DnsTimeout),
        };
    if addrs.is_empty() {
        return Err(Error::DestinationNotFound);
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Vec<SocketAddr> {
        vec![SocketAddr::new(s.parse().unwrap(), 80)]
    }

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            // IPv6 forms judged by the IPv4 address they carry.
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::10.0.0.1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2002:c0a8:101::",
            "::ffff:0:a9fe:a9fe",
            "::ffff:0:7f00:1",
            // Not global in themselves.
            "400::1",
            "4000::1",
            "64:ff9b:1::8.8.8.8",
            "fec0::1",
            "2001:db8::1",
            "2001::1",
            "2001:2::1",
            "2001:10::1",
            "2001:20::1",
            "100::1",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "198.19.255.254",
            "192.88.99.1",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "172.32.0.1",
            "100.128.0.1",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
            "198.20.0.1",
            "2001:4860::8888",
        ] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
        assert!(always_refused(IpAddr::V4(Ipv4Addr::new(
            169, 254, 169, 254
        ))));
        assert!(always_refused("fd00:ec2::254".parse().unwrap()));
        assert!(always_refused("::ffff:169.254.169.254".parse().unwrap()));
        for metadata in [
            "64:ff9b::a9fe:a9fe",
            "::169.254.169.254",
            "2002:a9fe:a9fe::",
            "::ffff:0:a9fe:a9fe",
        ] {
            assert!(always_refused(metadata.parse().unwrap()), "{metadata}");
        }
        assert!(!always_refused("10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn allowed_hosts_are_names_or_addresses_with_an_optional_port() {
        let e = |s: &str| allowed_entry(s);
        assert_eq!(e("API.example.com"), Some(("api.example.com".into(), None)));
        assert_eq!(e("10.0.0.5:8080"), Some(("10.0.0.5".into(), Some(8080))));
        assert_eq!(e("[::1]"), Some(("::1".into(), None)));
        assert_eq!(e("[::1]:8080"), Some(("::1".into(), Some(8080))));
        for bad in ["http://x", "user@x", "x/y", "", "::1", "x:port"] {
            assert_eq!(e(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_the_card_host_may_be_internal() {
        let reach = Reach {
            trusted_host: Some("card.local".into()),
            allow_private: false,
            allow_with: "set allowPrivate",
        };
        assert!(
            reach.check("card.local", &addr("127.0.0.1")).is_ok(),
            "the operator's own card URL"
        );
        assert!(reach.check("CARD.local", &addr("10.0.0.1")).is_ok());
        assert!(
            reach
                .check("announced.example", &addr("127.0.0.1"))
                .unwrap_err()
                .contains("internal address 127.0.0.1")
        );
        assert!(
            reach
                .check("announced.example", &addr("93.184.216.34"))
                .is_ok()
        );
        assert!(
            reach
                .check("card.local", &addr("169.254.169.254"))
                .unwrap_err()
                .contains("link-local"),
            "metadata even for the card's host"
        );
        let open = Reach {
            trusted_host: None,
            allow_private: true,
            allow_with: "",
        };
        assert!(open.check("any", &addr("192.168.0.9")).is_ok());
        assert!(open.check("any", &addr("169.254.169.254")).is_err());
    }
}
