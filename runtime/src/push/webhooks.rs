//! Where a webhook may point: its URL's form (the protocol crate's rule), then every address its
//! host resolves to (the egress guard's rule), at registration and again before each delivery,
//! which then connects to exactly the addresses checked (no second lookup to rebind).

use std::net::SocketAddr;
use std::time::Duration;

use crate::egress::{self, Exit, Reach};

/// Why a webhook is not reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unreachable {
    /// The URL or an address it resolves to is refused: no attempt will change that.
    Refused(String),
    /// The host does not resolve now (worth another try).
    Unresolved(String),
}

/// The guard of every webhook, and the way out to them.
#[derive(Clone)]
pub struct Webhooks {
    reach: Reach,
    dns_timeout: Duration,
    exit: Exit,
}

impl Webhooks {
    /// Internal addresses refused unless `allow_private` (`push.allowPrivateTargets`).
    pub fn new(allow_private: bool, dns_timeout: Duration) -> Webhooks {
        Webhooks {
            reach: Reach {
                trusted_host: None,
                allow_private,
                allow_with: "webhooks may not reach internal addresses (the runtime setting push.allowPrivateTargets allows them)",
            },
            dns_timeout,
            exit: Exit::direct(),
        }
    }

    /// These webhooks, reached through `exit`.
    pub fn through(self, exit: Exit) -> Webhooks {
        Webhooks { exit, ..self }
    }

    /// How deliveries leave (TLS roots, proxy).
    pub fn exit(&self) -> &Exit {
        &self.exit
    }

    /// The webhook's URI and the checked addresses to connect to.
    pub async fn resolve(&self, url: &str) -> Result<(http::Uri, Vec<SocketAddr>), Unreachable> {
        let (uri, host, port) = target(url).map_err(Unreachable::Refused)?;
        let addrs = egress::lookup(&host, port, self.dns_timeout)
            .await
            .map_err(|e| Unreachable::Unresolved(format!("{host} does not resolve: {e}")))?;
        self.reach
            .check(&host, &addrs)
            .map_err(Unreachable::Refused)?;
        Ok((uri, addrs))
    }

    /// Registration: refuses what [`Webhooks::resolve`] refuses. A host that does not resolve
    /// now is taken: every delivery resolves and checks it again. The refusal is the remote
    /// caller's: a refused address is named neither by its IP nor by the setting that would allow
    /// it (both go to the log).
    pub async fn admit(&self, url: &str) -> Result<(), String> {
        let (_, host, port) = target(url)?;
        let Ok(addrs) = egress::lookup(&host, port, self.dns_timeout).await else {
            return Ok(());
        };
        self.reach.check(&host, &addrs).map_err(|why| {
            tracing::info!(%host, %why, "refused a webhook registration");
            format!("the webhook URL is refused: {host} resolves to an internal address, which webhooks may not reach")
        })
    }
}

/// A webhook URL's form (the protocol crate's rule): its URI, host and port.
fn target(url: &str) -> Result<(http::Uri, String, u16), String> {
    let (host, port) = a2a_protocol::push::webhook(url).map_err(|e| e.message)?;
    let uri = url
        .parse()
        .map_err(|e| format!("the webhook URL is not valid: {e}"))?;
    Ok((uri, host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn internal_targets_are_refused_unless_allowed_and_metadata_always() {
        let guard = Webhooks::new(false, Duration::from_secs(2));
        for url in [
            "http://127.0.0.1:9/x",
            "http://10.0.0.1/x",
            "http://[::1]:8080/x",
            "http://169.254.169.254/latest/meta-data",
            "http://localhost:9/x",
            "http://0.0.0.0/x",
            "http://224.0.0.1/x",
        ] {
            assert!(
                matches!(guard.resolve(url).await, Err(Unreachable::Refused(_))),
                "{url}"
            );
            assert!(guard.admit(url).await.is_err(), "{url}");
        }
        for url in ["ftp://h/x", "http://u:p@h/x", "nohost"] {
            assert!(guard.admit(url).await.is_err(), "{url}");
        }
        let why = guard.admit("http://10.0.0.1/x").await.unwrap_err();
        assert!(
            why.contains("internal address") && !why.contains("allowPrivateTargets"),
            "the caller is not told the operator's settings: {why}"
        );
        let Err(Unreachable::Refused(detail)) = guard.resolve("http://10.0.0.1/x").await else {
            panic!("refused at delivery");
        };
        assert!(detail.contains("push.allowPrivateTargets"), "{detail}");
        let open = Webhooks::new(true, Duration::from_secs(2));
        let (_, addrs) = open.resolve("http://127.0.0.1:9/x").await.unwrap();
        assert_eq!(addrs, ["127.0.0.1:9".parse().unwrap()]);
        assert!(open.admit("http://localhost:9/x").await.is_ok());
        assert!(open.admit("http://169.254.169.254/").await.is_err());
        assert!(
            guard.admit("http://no-such-host.invalid/x").await.is_ok(),
            "a name that does not resolve now is checked again at delivery"
        );
        assert!(matches!(
            guard.resolve("http://no-such-host.invalid/x").await,
            Err(Unreachable::Unresolved(_))
        ));
    }
}
