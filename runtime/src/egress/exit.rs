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
use rustls::pki_types::pem::PemObject;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
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
    /// `[egress] proxy` for a client of its own (unset: such a client reads the environment).
    client_proxy: Option<reqwest::Proxy>,
}

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
        let no_proxy = settings.no_proxy.clone().unwrap_or_default();
        let (proxy, client_proxy) = match &settings.proxy {
            Some(url) => {
                let uri: http::Uri = url
                    .parse()
                    .map_err(|e| anyhow::anyhow!("[egress] proxy {url:?} is not a URL: {e}"))?;
                if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                    anyhow::bail!(
                        "[egress] proxy {url:?}: give an http:// or https:// proxy URL with its host"
                    );
                }
                let client = reqwest::Proxy::all(url.as_str())
                    .map_err(|e| anyhow::anyhow!("[egress] proxy {url:?}: {e}"))?
                    .no_proxy(reqwest::NoProxy::from_string(&no_proxy));
                let matcher = Matcher::builder().all(url.clone()).no(no_proxy).build();
                (matcher, Some(client))
            }
            None if settings.no_proxy.is_some() => anyhow::bail!(
                "[egress] noProxy is set without proxy: set proxy too, or use the NO_PROXY variable with HTTPS_PROXY"
            ),
            None => (Matcher::from_env(), None),
        };
        Ok(Exit {
            tls: Arc::new(tls),
            proxy: Arc::new(proxy),
            client_proxy,
        })
    }

    /// Direct connections trusting the web roots and the system's store (tests, tools).
    pub fn direct() -> Exit {
        static DIRECT: std::sync::OnceLock<Exit> = std::sync::OnceLock::new();
        DIRECT
            .get_or_init(|| Exit {
                proxy: Arc::new(Matcher::builder().build()),
                ..Exit::new(&EgressSettings::default()).expect("no file to read")
            })
            .clone()
    }

    /// `builder` trusting these roots and going through this proxy: an HTTP client of its own
    /// (the model's), whose requests the guard does not judge (the operator gave their URL).
    pub fn client(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        let builder = builder.use_preconfigured_tls((*self.tls).clone());
        match &self.client_proxy {
            Some(proxy) => builder.proxy(proxy.clone()),
            None => builder,
        }
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
        let via = self.proxy_for(request.uri());
        let tcp = tokio::time::timeout(timeout, async {
            match &via {
                Some(proxy) => self.through(proxy, &addrs, https, timeout).await,
                None => connect(&addrs)
                    .await
                    .map(|s| Box::new(s) as Box<dyn Io>)
                    .map_err(Error::Connect),
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
        let authority = request.uri().authority().map(|a| a.as_str().to_owned());
        if let (Some(a), false) = (
            authority,
            request.headers().contains_key(http::header::HOST),
        ) && let Ok(v) = http::HeaderValue::from_str(&a)
        {
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
                let first = addrs.first().ok_or(Error::DestinationNotFound)?;
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
        let secure = match proxy.uri().scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(refused(
                    "only http:// and https:// proxies are supported".into(),
                ));
            }
        };
        let (host, port) = host_port(proxy.uri()).ok_or(Error::HttpRequestUriInvalid)?;
        let at = lookup(&host, port, timeout).await?;
        let mut last = None;
        for target in if https {
            addrs
        } else {
            &addrs[..addrs.len().min(1)]
        } {
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
    // The answer's head, read a byte at a time so nothing of the tunnel is consumed.
    let mut reader = tokio::io::BufReader::with_capacity(1, stream);
    let mut status = String::new();
    reader
        .read_line(&mut status)
        .await
        .map_err(|e| e.to_string())?;
    let mut read = status.len();
    loop {
        let mut line = String::new();
        let n = reader
            .read_line(&mut line)
            .await
            .map_err(|e| e.to_string())?;
        read += n;
        if n == 0 || read > MAX_PROXY_HEAD {
            return Err("the proxy's answer ended early or is too long".into());
        }
        if line == "\r\n" || line == "\n" {
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
const MAX_PROXY_HEAD: usize = 16 << 10;

/// The certificates of an operator's CA file.
fn ca_file(file: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| anyhow::anyhow!("[egress] caFile {} cannot be read: {e}", file.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("[egress] caFile {} is not PEM: {e}", file.display()))?;
    if certs.is_empty() {
        anyhow::bail!(
            "[egress] caFile {} holds no certificate (a PEM file of -----BEGIN CERTIFICATE----- blocks)",
            file.display()
        );
    }
    Ok(certs)
}

/// A response head and the future driving the rest of the connection.
pub type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

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
    }
}
