//! How the runtime's own requests leave the machine once the guard has checked their addresses:
//! the TLS roots they trust (the bundled web roots, the system's store and the operator's CA
//! file) and the proxy they go through (`[egress] proxy`, else `HTTPS_PROXY` / `HTTP_PROXY` /
//! `ALL_PROXY` with `NO_PROXY`). Through a proxy a request still goes to the address the guard
//! checked: the proxy is asked to `CONNECT` to that address (https) or is sent the request with
//! that address in its URL (http), never the name, so the proxy's own lookup cannot rebind it.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use http_body_util::BodyExt;
use hyper_util::client::proxy::matcher::{Intercept, Matcher};
use rustls::pki_types::CertificateDer;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, WasiBody};

use super::{host_port, lookup};

/// `[egress]`: what the runtime's own requests (outbound calls, model requests, webhooks) trust
/// and go through.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct EgressSettings {
    /// PEM file of CA certificates trusted besides the web roots and the system's store
    /// (relative to the config file's directory).
    pub ca_file: Option<PathBuf>,
    /// Proxy for every request (`http://[user:password@]host:port`); unset: the environment's
    /// `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`.
    pub proxy: Option<String>,
    /// Hosts, domains and networks reached directly (comma-separated, as `NO_PROXY`); with
    /// `proxy` unset, the environment's `NO_PROXY`.
    pub no_proxy: Option<String>,
}

/// The way out: TLS roots and proxy rules, built once at start.
#[derive(Clone)]
pub struct Exit {
    tls: Arc<rustls::ClientConfig>,
    proxy: Arc<Matcher>,
    /// The same rules for a client of its own (the model's).
    client_proxies: Vec<reqwest::Proxy>,
    /// The runtime's own listeners, set once at its start.
    own: Arc<std::sync::OnceLock<Listeners>>,
    /// Whether the A2A listener (its instances) may be reached: only for the operator's
    /// connections; the control listener is never reached.
    instances: bool,
}

/// The runtime's own listeners.
#[derive(Debug)]
struct Listeners {
    /// `--listen`: the instances, and the control API unless it has a listener of its own.
    public: SocketAddr,
    /// `--control-listen`.
    control: Option<SocketAddr>,
}

/// The `Via` every request the runtime sends carries (RFC 9110 §7.6.3), so the control API of
/// any a2a-edge refuses it as one that came through an intermediary.
pub const VIA: &str = "1.1 a2a-edge";

impl Exit {
    /// The exit `settings` describe; a CA file that cannot be read or holds no certificate is
    /// refused, naming it.
    pub fn new(settings: &EgressSettings) -> anyhow::Result<Exit> {
        let mut roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let system = rustls_native_certs::load_native_certs();
        let (taken, _) = roots.add_parsable_certificates(system.certs);
        tracing::debug!(certificates = taken, "trusting the system's CA store");
        if let Some(file) = &settings.ca_file {
            let certs = ca_file(file)?;
            for cert in certs {
                roots.add(cert).map_err(|e| {
                    anyhow::anyhow!(
                        "[egress] caFile {}: a certificate is not a usable CA: {e}",
                        file.display()
                    )
                })?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports the default TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let urls = ProxyUrls::of(settings)?;
        Ok(Exit {
            tls: Arc::new(tls),
            proxy: Arc::new(urls.matcher()),
            client_proxies: urls.for_client()?,
            own: Arc::default(),
            instances: false,
        })
    }

    /// Refuses every request to the runtime's own listeners from now on — `public` (`--listen`)
    /// and `control` (`--control-listen`) — so that a component granted private addresses never
    /// reaches its control API or its instances.
    pub fn refuse_own(&self, public: SocketAddr, control: Option<SocketAddr>) {
        let set = self.own.set(Listeners { public, control });
        assert!(
            set.is_ok(),
            "the runtime's listeners are refused once, at its start"
        );
    }

    /// This exit, reaching the runtime's own instances too (never a listener of its own for the
    /// control API): for the connections the operator configures, which may chain instances of
    /// one runtime. The control API on the A2A listener refuses them by their `Via`.
    pub fn reaching_own_instances(&self) -> Exit {
        Exit {
            instances: true,
            ..self.clone()
        }
    }

    /// Whether a connection to `peer` (from `local`, once connected) reaches one of the
    /// runtime's own listeners this exit refuses.
    fn own(&self, peer: SocketAddr, local: Option<IpAddr>) -> bool {
        let Some(own) = self.own.get() else {
            return false;
        };
        let public = Some(own.public).filter(|_| !self.instances);
        public
            .into_iter()
            .chain(own.control)
            .any(|listener| reaches_own(&[listener], peer, local))
    }

    /// Direct connections trusting the web roots and the system's store (tests, tools).
    pub fn direct() -> Exit {
        static DIRECT: std::sync::OnceLock<Exit> = std::sync::OnceLock::new();
        DIRECT
            .get_or_init(|| Exit {
                proxy: Arc::new(Matcher::builder().build()),
                client_proxies: Vec::new(),
                ..Exit::new(&EgressSettings::default()).expect("no file to read")
            })
            .clone()
    }

    /// `builder` trusting these roots and going through this proxy: an HTTP client of its own
    /// (the model's), whose requests the guard does not judge (the operator gave their URL).
    pub fn client(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        let via =
            http::HeaderMap::from_iter([(http::header::VIA, http::HeaderValue::from_static(VIA))]);
        let builder = builder
            .use_preconfigured_tls((*self.tls).clone())
            .default_headers(via)
            .no_proxy();
        self.client_proxies
            .iter()
            .fold(builder, |b, p| b.proxy(p.clone()))
    }

    /// The proxy URL a request to `uri` goes through, if any (with its credentials).
    pub fn proxy_for(&self, uri: &http::Uri) -> Option<Intercept> {
        self.proxy.intercept(uri)
    }

    /// Sends `request` over a new connection to the first of `addrs` that answers, directly or
    /// through the proxy (TLS for `https`, verified for the URI's host), within `timeout` for
    /// the connect and for the response head.
    pub async fn send(
        &self,
        mut request: Request<WasiBody>,
        addrs: Vec<SocketAddr>,
        timeout: Duration,
    ) -> Result<Sent, Error> {
        let (host, port) = host_port(request.uri()).ok_or(Error::HttpRequestUriInvalid)?;
        let https = request.uri().scheme_str() == Some("https");
        if let Some(own) = addrs.iter().find(|a| self.own(**a, None)) {
            return Err(refused_own(*own));
        }
        let via = self.proxy_for(request.uri());
        let tcp = tokio::time::timeout(timeout, async {
            match &via {
                Some(proxy) => self.through(proxy, &addrs, https, timeout).await,
                None => {
                    let s = connect(&addrs).await.map_err(Error::Connect)?;
                    // An address of this machine's own (not loopback) reaches the listeners too.
                    if let (Ok(peer), Ok(local)) = (s.peer_addr(), s.local_addr())
                        && self.own(peer, Some(local.ip()))
                    {
                        return Err(refused_own(peer));
                    }
                    Ok(Box::new(s) as Box<dyn Io>)
                }
            }
        })
        .await
        .map_err(|_| Error::ConnectionTimeout)??;
        let io: Box<dyn Io> = if https {
            let name = match host.parse::<IpAddr>() {
                Ok(ip) => rustls::pki_types::ServerName::from(ip),
                Err(_) => rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|_| Error::HttpRequestUriInvalid)?,
            };
            let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
            let tls = tokio::time::timeout(timeout, connector.connect(name, tcp))
                .await
                .map_err(|_| Error::ConnectionTimeout)?;
            Box::new(tls.map_err(tls_failed)?)
        } else {
            tcp
        };
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io)).await?;
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        // The Host header names the host and port, never `user@` of the URI: it replaces the
        // one wasmtime-wasi-http made of the whole authority (a guest may not set it).
        let authority = request
            .uri()
            .authority()
            .map(|a| a.as_str().rsplit('@').next().unwrap_or_default().to_owned());
        request
            .headers_mut()
            .append(http::header::VIA, http::HeaderValue::from_static(VIA));
        if let Some(v) = authority.and_then(|a| http::HeaderValue::from_str(&a).ok()) {
            request.headers_mut().insert(http::header::HOST, v);
        }
        // The request line carries the path (the authority travels in the Host header); a plain
        // request to a proxy carries the checked address in its URL instead of the name.
        let target = match (&via, https) {
            (Some(proxy), false) => {
                if let Some(auth) = proxy.basic_auth() {
                    request
                        .headers_mut()
                        .insert(http::header::PROXY_AUTHORIZATION, auth.clone());
                }
                let first = ipv4_first(&addrs);
                let first = first.first().ok_or(Error::DestinationNotFound)?;
                format!("http://{}{path}", SocketAddr::new(first.ip(), port))
            }
            _ => path,
        };
        *request.uri_mut() = target.parse().map_err(|_| Error::HttpRequestUriInvalid)?;
        let driver = tokio::spawn(conn);
        let response = tokio::time::timeout(timeout, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)??;
        let response = response.map(|body| body.map_err(Error::from).boxed_unsync());
        let io = async move {
            match driver.await {
                Ok(r) => r.map_err(Error::from),
                Err(_) => Err(Error::ConnectionTerminated),
            }
        };
        Ok((response, Box::new(io)))
    }

    /// A connection to the proxy: for `https`, a tunnel to the first of `addrs` it opens; for
    /// plain http, the proxy connection itself.
    async fn through(
        &self,
        proxy: &Intercept,
        addrs: &[SocketAddr],
        https: bool,
        timeout: Duration,
    ) -> Result<Box<dyn Io>, Error> {
        let refused = |why: String| {
            tracing::warn!(proxy = %proxy.uri().authority().map_or("", |a| a.as_str()), %why, "the proxy did not connect");
            Error::Connect(std::io::Error::other(why))
        };
        // Only http:// and https:// proxies are taken (`ProxyUrls::of`).
        let secure = proxy.uri().scheme_str() == Some("https");
        let (host, port) = host_port(proxy.uri()).ok_or(Error::HttpRequestUriInvalid)?;
        let at = lookup(&host, port, timeout).await?;
        let mut last = None;
        let targets = ipv4_first(addrs);
        for target in targets.iter().take(if https { targets.len() } else { 1 }) {
            let tcp = connect(&at).await.map_err(Error::Connect)?;
            let _ = tcp.set_nodelay(true);
            let mut stream: Box<dyn Io> = if secure {
                let name = rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|_| Error::HttpRequestUriInvalid)?;
                let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
                Box::new(connector.connect(name, tcp).await.map_err(tls_failed)?)
            } else {
                Box::new(tcp)
            };
            if !https {
                return Ok(stream);
            }
            match tunnel(&mut stream, *target, proxy.basic_auth()).await {
                Ok(()) => return Ok(stream),
                Err(why) => last = Some(why),
            }
        }
        Err(refused(
            last.unwrap_or_else(|| "no address to connect to".into()),
        ))
    }
}

/// Where requests are proxied: `[egress] proxy` (its `noProxy`, else `NO_PROXY`), else the
/// environment's `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and `NO_PROXY`.
struct ProxyUrls {
    http: Option<String>,
    https: Option<String>,
    all: Option<String>,
    no: String,
}

impl ProxyUrls {
    /// The rules of `settings`: a configured proxy that is not an http:// or https:// URL is
    /// refused; such a proxy in the environment (a SOCKS one other programs use) is left out,
    /// with a warning.
    fn of(settings: &EgressSettings) -> anyhow::Result<ProxyUrls> {
        let env = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|n| std::env::var(n).ok())
                .filter(|v| !v.is_empty())
        };
        let no = settings
            .no_proxy
            .clone()
            .or_else(|| env(["NO_PROXY", "no_proxy"]))
            .unwrap_or_default();
        if let Some(url) = &settings.proxy {
            if !usable(url) {
                anyhow::bail!(
                    "[egress] proxy {}: give an http:// or https:// proxy URL with its host",
                    shown(url)
                );
            }
            return Ok(ProxyUrls {
                http: None,
                https: None,
                all: Some(url.clone()),
                no,
            });
        }
        if settings.no_proxy.is_some() {
            anyhow::bail!(
                "[egress] noProxy is set without proxy: set proxy too, or use the NO_PROXY variable with HTTPS_PROXY"
            );
        }
        let from = |names: [&str; 2]| {
            env(names).filter(|url| {
                let ok = usable(url);
                if !ok {
                    tracing::warn!(variable = names[0], proxy = %shown(url), "left out: only http:// and https:// proxies are supported");
                }
                ok
            })
        };
        Ok(ProxyUrls {
            http: from(["HTTP_PROXY", "http_proxy"]),
            https: from(["HTTPS_PROXY", "https_proxy"]),
            all: from(["ALL_PROXY", "all_proxy"]),
            no,
        })
    }

    fn matcher(&self) -> Matcher {
        let mut m = Matcher::builder().no(self.no.clone());
        if let Some(u) = &self.http {
            m = m.http(u.clone());
        }
        if let Some(u) = &self.https {
            m = m.https(u.clone());
        }
        if let Some(u) = &self.all {
            m = m.all(u.clone());
        }
        m.build()
    }

    /// The same rules as reqwest proxies, the scheme-specific ones first.
    fn for_client(&self) -> anyhow::Result<Vec<reqwest::Proxy>> {
        let no = || reqwest::NoProxy::from_string(&self.no);
        let make = |url: &Option<String>, kind: fn(&str) -> reqwest::Result<reqwest::Proxy>| {
            url.as_deref()
                .map(|u| {
                    kind(u)
                        .map(|p| p.no_proxy(no()))
                        .map_err(|e| anyhow::anyhow!("proxy {}: {e}", shown(u)))
                })
                .transpose()
        };
        Ok([
            make(&self.http, |u| reqwest::Proxy::http(u))?,
            make(&self.https, |u| reqwest::Proxy::https(u))?,
            make(&self.all, |u| reqwest::Proxy::all(u))?,
        ]
        .into_iter()
        .flatten()
        .collect())
    }
}

/// Whether `url` is a proxy this runtime speaks to: http:// or https://, with a host.
fn usable(url: &str) -> bool {
    url.parse::<http::Uri>()
        .is_ok_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
}

/// A proxy URL as logs and errors show it: without its credentials.
fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    match authority.rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// `addrs`, IPv4 ones first: a proxy asked for one address is likelier to reach that.
fn ipv4_first(addrs: &[SocketAddr]) -> Vec<SocketAddr> {
    let mut ordered = addrs.to_vec();
    ordered.sort_by_key(SocketAddr::is_ipv6);
    ordered
}

/// Asks the proxy on `stream` for a tunnel to `target`; the refusal says what it answered.
async fn tunnel(
    stream: &mut Box<dyn Io>,
    target: SocketAddr,
    auth: Option<&http::HeaderValue>,
) -> Result<(), String> {
    let mut head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = auth.and_then(|a| a.to_str().ok()) {
        head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    // The answer's head, read a byte at a time so nothing of the tunnel is consumed, and at
    // most MAX_PROXY_HEAD bytes of it.
    let mut reader = tokio::io::BufReader::with_capacity(1, stream).take(MAX_PROXY_HEAD);
    let mut status = String::new();
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 || !line.ends_with('\n') {
            return Err("the proxy's answer ended early or is too long".into());
        }
        if status.is_empty() {
            status = line;
        } else if line.trim_end().is_empty() {
            break;
        }
    }
    let code = status.split_whitespace().nth(1).unwrap_or("");
    if code != "200" {
        return Err(format!(
            "the proxy answered {:?} to CONNECT {target}",
            status.trim()
        ));
    }
    Ok(())
}

/// A failed TLS handshake; a certificate that is not trusted is told apart (a site's own CA
/// goes in `[egress] caFile`).
fn tls_failed(e: std::io::Error) -> Error {
    let untrusted = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)));
    if untrusted {
        ErrorCode::TlsCertificateError.into()
    } else {
        Error::Tls(e)
    }
}

/// The longest proxy answer head read, bytes.
const MAX_PROXY_HEAD: u64 = 16 << 10;

/// The certificates of an operator's CA file.
fn ca_file(file: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    crate::pem_files::certificates(file, "[egress] caFile")
}

/// A response head and the future driving the rest of the connection.
pub type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

/// Whether `peer` is one of `own` on this machine: loopback, unspecified, or the connection's
/// own `local` address (an interface of this host), at a listener's port, bound there or to
/// every address.
fn reaches_own(own: &[SocketAddr], peer: SocketAddr, local: Option<IpAddr>) -> bool {
    let ip = super::reached(peer.ip());
    let here = ip.is_loopback() || ip.is_unspecified() || local.map(super::reached) == Some(ip);
    here && own.iter().any(|o| {
        o.port() == peer.port()
            && (o.ip().is_unspecified() || ip.is_unspecified() || super::reached(o.ip()) == ip)
    })
}

/// The refusal of a request to the runtime's own listener at `at`.
fn refused_own(at: SocketAddr) -> Error {
    tracing::warn!(%at, "refused a request to this runtime's own listener: components' requests never reach its control API or its instances, connections never its control listener");
    Error::DestinationIpProhibited
}

trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

async fn connect(addrs: &[SocketAddr]) -> std::io::Result<tokio::net::TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for a in addrs {
        match tokio::net::TcpStream::connect(a).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtimes_own_listeners_are_reached_on_loopback_and_its_own_addresses_alone() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        let loopback = [at("127.0.0.1:3080")];
        assert!(reaches_own(&loopback, at("127.0.0.1:3080"), None));
        assert!(reaches_own(&loopback, at("[::ffff:127.0.0.1]:3080"), None));
        assert!(reaches_own(&loopback, at("0.0.0.0:3080"), None));
        assert!(!reaches_own(&loopback, at("127.0.0.1:3081"), None));
        assert!(
            !reaches_own(&loopback, at("127.0.0.2:3080"), None),
            "another service on another loopback address"
        );
        let everywhere = [at("0.0.0.0:3080")];
        let lan: IpAddr = "10.0.0.5".parse().unwrap();
        assert!(reaches_own(&everywhere, at("127.0.0.9:3080"), None));
        assert!(
            reaches_own(&everywhere, at("10.0.0.5:3080"), Some(lan)),
            "this host's own address"
        );
        assert!(
            !reaches_own(&everywhere, at("10.0.0.6:3080"), Some(lan)),
            "another host"
        );
        assert!(!reaches_own(&[], at("127.0.0.1:3080"), None));
    }

    #[test]
    fn connections_reach_the_runtimes_instances_but_never_its_control_listener() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        let exit = Exit::new(&EgressSettings::default()).unwrap();
        assert!(!exit.own(at("127.0.0.1:3080"), None), "nothing set yet");
        exit.refuse_own(at("127.0.0.1:3080"), Some(at("127.0.0.1:3081")));
        let connections = exit.reaching_own_instances();
        assert!(exit.own(at("127.0.0.1:3080"), None));
        assert!(exit.own(at("127.0.0.1:3081"), None));
        assert!(!connections.own(at("127.0.0.1:3080"), None));
        assert!(connections.own(at("127.0.0.1:3081"), None));
        assert!(
            !exit
                .reaching_own_instances()
                .own(at("127.0.0.1:3082"), None)
        );
    }

    #[test]
    fn a_ca_file_that_cannot_serve_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let settings = |file: &Path| EgressSettings {
            ca_file: Some(file.to_owned()),
            ..EgressSettings::default()
        };
        let missing = dir.path().join("missing.pem");
        let e = Exit::new(&settings(&missing)).err().unwrap().to_string();
        assert!(
            e.contains("missing.pem") && e.contains("cannot be read"),
            "{e}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = Exit::new(&settings(&empty)).err().unwrap().to_string();
        assert!(
            e.contains("empty.pem") && e.contains("no certificate"),
            "{e}"
        );
        let e = Exit::new(&EgressSettings {
            no_proxy: Some("internal.example".into()),
            ..EgressSettings::default()
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("noProxy"), "{e}");
    }

    #[test]
    fn the_proxy_applies_but_to_no_proxy_hosts() {
        let exit = Exit::new(&EgressSettings {
            proxy: Some("http://user:pw@proxy.example:3128".into()),
            no_proxy: Some("direct.example, 10.0.0.0/8".into()),
            ..EgressSettings::default()
        })
        .unwrap();
        let via = |u: &str| exit.proxy_for(&u.parse().unwrap());
        let p = via("https://api.example/v1").expect("proxied");
        assert_eq!(p.uri().authority().unwrap().as_str(), "proxy.example:3128");
        assert!(p.basic_auth().is_some(), "credentials from the proxy URL");
        assert!(via("http://plain.example/").is_some());
        assert!(via("https://a.direct.example/").is_none());
        assert!(via("http://10.1.2.3/").is_none());
        assert!(
            Exit::direct()
                .proxy_for(&"https://x.example/".parse().unwrap())
                .is_none()
        );
        let socks = Exit::new(&EgressSettings {
            proxy: Some("socks5://user:secret@proxy.example:1080".into()),
            ..EgressSettings::default()
        })
        .err()
        .unwrap()
        .to_string();
        assert!(
            socks.contains("http:// or https://") && !socks.contains("secret"),
            "refused without its password: {socks}"
        );
        assert_eq!(shown("http://u:p@h:1/x@y"), "http://***@h:1/x@y");
        assert_eq!(shown("http://h:1/a@b"), "http://h:1/a@b");
    }

    #[tokio::test]
    async fn a_proxy_answer_is_read_within_its_bound_and_nothing_past_it() {
        use tokio::io::AsyncReadExt;
        let target: SocketAddr = "203.0.113.7:443".parse().unwrap();
        let talk = |answer: Vec<u8>| async move {
            let (ours, mut theirs) = tokio::io::duplex(1 << 20);
            let mut ours: Box<dyn Io> = Box::new(ours);
            let asked = tokio::spawn(async move {
                let mut head = vec![0; 64];
                let n = theirs.read(&mut head).await.unwrap();
                theirs.write_all(&answer).await.unwrap();
                (String::from_utf8_lossy(&head[..n]).into_owned(), theirs)
            });
            let result = tunnel(&mut ours, target, None).await;
            let (head, _theirs) = asked.await.unwrap();
            let mut rest = vec![0; 5];
            let next = if result.is_ok() {
                ours.read_exact(&mut rest).await.map(|_| rest).ok()
            } else {
                None
            };
            (head, result, next)
        };
        let (head, ok, after) =
            talk(b"HTTP/1.1 200 Connection established\r\nVia: p\r\n\r\nhello".to_vec()).await;
        assert!(
            head.starts_with("CONNECT 203.0.113.7:443 HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(ok.is_ok());
        assert_eq!(
            after.as_deref(),
            Some(&b"hello"[..]),
            "the tunnel's bytes are left"
        );
        let (_, refused, _) = talk(b"HTTP/1.1 403 Forbidden\r\n\r\n".to_vec()).await;
        assert!(refused.unwrap_err().contains("403"));
        let (_, endless, _) = talk(vec![b'x'; 64 << 10]).await;
        assert!(endless.unwrap_err().contains("too long"));
    }
}
