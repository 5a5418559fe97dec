//! `wasi:http/outgoing-handler` of agents: deny-all unless the preset's `allowedHosts` names
//! the host, and then through the egress guard (SSRF rules, timeouts, response cap).

use std::sync::Arc;
use std::time::Duration;

use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::egress::{Exit, Reach, Sent};

/// Longest connect, first-byte or between-bytes wait of an agent's request.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response body an agent reads.
const MAX_RESPONSE_BYTES: u64 = 16 << 20;
/// Most requests of one turn.
pub const MAX_REQUESTS: u32 = 64;

/// Where an agent's requests may go.
pub struct Outgoing {
    allowed: Arc<Vec<String>>,
    reach: Reach,
    exit: Exit,
    sent: u32,
    /// A refusal was logged this turn (the next ones are not: an agent cannot flood the log).
    warned: bool,
}

impl Outgoing {
    /// Requests to the `allowed` hosts (`name` or `name:port`), to private addresses only when
    /// `allow_private`, leaving through `exit`.
    pub fn prepare(allowed: Arc<Vec<String>>, allow_private: bool, exit: Exit) -> Self {
        Outgoing {
            allowed,
            reach: Reach {
                trusted_host: None,
                allow_private,
                allow_with: "set grants.allowPrivate on the agent's preset",
            },
            exit,
            sent: 0,
            warned: false,
        }
    }

    /// Whether `allowedHosts` names `host` (any port) or `host:port` (an IPv6 address in
    /// brackets, as in a URL).
    fn allows(&self, host: &str, port: u16) -> bool {
        self.allowed.iter().any(|a| {
            crate::egress::allowed_entry(a)
                .is_some_and(|(h, p)| h.eq_ignore_ascii_case(host) && p.is_none_or(|p| p == port))
        })
    }
}

type Sending = Box<dyn Future<Output = Result<Sent, Error>> + Send>;

impl WasiHttpHooks for Outgoing {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Sending {
        let uri = request.uri();
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Box::new(async { Err(ErrorCode::HttpRequestUriInvalid.into()) }),
        };
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let allowed = crate::egress::host_of(uri).is_some_and(|h| self.allows(&h, port));
        if !allowed || self.sent >= MAX_REQUESTS {
            if !std::mem::replace(&mut self.warned, true) {
                tracing::warn!(uri = %uri, "refused an agent's request: its host is not in the preset's grants.allowedHosts, or the turn made {MAX_REQUESTS} requests (further refusals of this turn are not logged)");
            }
            return Box::new(async { Err(ErrorCode::HttpRequestDenied.into()) });
        }
        self.sent += 1;
        let t = crate::egress::guarded::timeout(options, TIMEOUT);
        let (reach, exit) = (self.reach.clone(), self.exit.clone());
        Box::new(async move {
            crate::egress::guarded::send(request, &reach, &exit, t, MAX_RESPONSE_BYTES).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_hosts_and_ports_are_allowed() {
        let o = Outgoing::prepare(
            Arc::new(vec![
                "api.example.com".into(),
                "127.0.0.1:8080".into(),
                "[::1]".into(),
                "[fd00::5]:8443".into(),
            ]),
            false,
            Exit::direct(),
        );
        assert!(o.allows("api.example.com", 443) && o.allows("API.example.com", 80));
        assert!(o.allows("127.0.0.1", 8080));
        assert!(!o.allows("127.0.0.1", 8081) && !o.allows("example.com", 443));
        assert!(o.allows("::1", 80) && o.allows("fd00::5", 8443) && !o.allows("fd00::5", 443));
        let none = Outgoing::prepare(Arc::default(), true, Exit::direct());
        assert!(!none.allows("api.example.com", 443), "deny-all by default");
    }
}
