//! A test PKI made by rcgen (a CA, server and client certificates, expired ones) and a TLS
//! client that speaks HTTP/1.1 or HTTP/2 to the server with or without a client certificate.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// A certificate and its key, in PEM and DER.
pub struct Issued {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its key, PEM.
    pub key_pem: String,
    /// The certificate, DER.
    pub der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl Issued {
    /// Writes `<stem>.pem` and `<stem>.key` under `dir`; their paths.
    pub fn write(&self, dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        std::fs::write(&cert, &self.cert_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (cert, key)
    }
}

/// A certificate authority.
pub struct Ca {
    cert: Certificate,
    key: KeyPair,
}

impl Ca {
    /// A new CA called `name`.
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// Its certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A server certificate for `localhost` and `127.0.0.1`, its subject `cn`.
    pub fn server(&self, cn: &str) -> Issued {
        let mut params =
            CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.issue(params)
    }

    /// A client certificate with subject `cn` and the alternative names `sans`; `expired`
    /// ended in 2021.
    pub fn client(&self, cn: &str, sans: &[&str], expired: bool) -> Issued {
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        self.issue(params)
    }

    fn issue(&self, params: CertificateParams) -> Issued {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            der: cert.der().clone(),
            key_der: key.serialize_der(),
        }
    }
}

/// A client configuration trusting `ca_pem`, presenting `client`, offering `alpn`.
fn client_config(ca_pem: &str, client: Option<&Issued>, alpn: &[&[u8]]) -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some(c) => builder
            .with_client_auth_cert(
                vec![c.der.clone()],
                PrivateKeyDer::Pkcs8(c.key_der.clone().into()),
            )
            .unwrap(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

async fn connect(
    addr: SocketAddr,
    config: rustls::ClientConfig,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))
}

/// How the server refused the handshake of `client` (the alert it sent), or `None` when it
/// was accepted. With TLS 1.3 the client learns of a refused certificate on its first read,
/// so this reads until the alert or a second of quiet.
pub async fn refused_handshake(addr: SocketAddr, ca_pem: &str, client: &Issued) -> Option<String> {
    use tokio::io::AsyncReadExt;
    let mut tls = match connect(addr, client_config(ca_pem, Some(client), &[b"http/1.1"])).await {
        Ok(tls) => tls,
        Err(e) => return Some(e),
    };
    let mut byte = [0u8; 1];
    match tokio::time::timeout(Duration::from_secs(1), tls.read(&mut byte)).await {
        Ok(Err(e)) => Some(e.to_string()),
        Ok(Ok(0)) => Some("closed without an alert".into()),
        _ => None,
    }
}

/// Whether the server closes a TLS connection (ALPN `alpn`) on which nothing is sent, within
/// `within`.
pub async fn closes_idle(addr: SocketAddr, ca_pem: &str, alpn: &[u8], within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut tls = connect(addr, client_config(ca_pem, None, &[alpn]))
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, tls.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // A SETTINGS frame or a session ticket: read on.
            Ok(Ok(_)) => {}
        }
    }
}

/// What a TLS exchange gave: the protocol ALPN chose, the server's certificate, the status
/// and body.
pub struct Exchange {
    /// `h2` or `http/1.1`.
    pub alpn: Option<Vec<u8>>,
    /// The server's leaf certificate.
    pub server_cert: CertificateDer<'static>,
    /// Status.
    pub status: u16,
    /// Body as JSON (null if not JSON).
    pub body: serde_json::Value,
}

/// What to send: method, path, JSON body, and more headers.
pub type Ask<'a> = (
    &'a str,
    &'a str,
    Option<serde_json::Value>,
    &'a [(&'a str, &'a str)],
);

/// Sends `ask` to `addr` over TLS trusting `ca_pem`, offering `alpn`, presenting `client` if
/// given; `Err` tells how it failed.
pub async fn exchange(
    addr: SocketAddr,
    ca_pem: &str,
    client: Option<&Issued>,
    alpn: &[&[u8]],
    (method, path, body, headers): Ask<'_>,
) -> Result<Exchange, String> {
    let config = client_config(ca_pem, client, alpn);
    let tls = connect(addr, config).await?;
    let session = tls.get_ref().1;
    let chosen = session.alpn_protocol().map(<[u8]>::to_vec);
    let server_cert = session.peer_certificates().unwrap()[0].clone();
    let io = TokioIo::new(tls);
    let h2 = chosen.as_deref() == Some(b"h2");
    // HTTP/2 carries the authority as a pseudo-header, HTTP/1.1 in Host.
    let target = if h2 {
        format!("https://localhost:{}{path}", addr.port())
    } else {
        path.to_owned()
    };
    let mut request = http::Request::builder()
        .method(method)
        .uri(target)
        .header("content-type", "application/json");
    if !h2 {
        request = request.header("host", format!("localhost:{}", addr.port()));
    }
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let body = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    let request = request.body(Full::new(body)).unwrap();
    let response = if h2 {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| format!("h2: {e}"))?;
        tokio::spawn(conn);
        send.send_request(request).await
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| format!("http/1.1: {e}"))?;
        tokio::spawn(conn);
        send.send_request(request).await
    }
    .map_err(|e| format!("request: {e:?}"))?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Exchange {
        alpn: chosen,
        server_cert,
        status,
        body: serde_json::from_slice(&bytes).unwrap_or_default(),
    })
}
