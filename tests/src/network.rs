//! A site's network in miniature: a TLS front signed by a private CA (the site's own, which no
//! public root store holds) and a forward proxy that records what it was asked for.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A private CA and a TLS listener on `127.0.0.1` and `127.0.0.2` (one port) with its
/// certificate for `localhost` and both addresses, forwarding what it decrypts to a plain
/// upstream.
pub struct TlsFront {
    /// Where it listens (loopback).
    pub port: u16,
    /// The CA certificate, PEM: what an operator puts in `[egress] caFile`.
    pub ca_pem: String,
    upstream: Arc<OnceLock<SocketAddr>>,
}

impl TlsFront {
    /// A front whose upstream is set later ([`TlsFront::forward_to`]): a server behind it may
    /// need the front's port before it starts.
    pub async fn start() -> TlsFront {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "a2a-edge test site CA");
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec![
            "localhost".into(),
            "127.0.0.1".into(),
            "127.0.0.2".into(),
        ])
        .unwrap()
        .signed_by(&leaf_key, &ca_cert, &ca_key)
        .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), ca_cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let second = TcpListener::bind(("127.0.0.2", port)).await.unwrap();
        let upstream: Arc<OnceLock<SocketAddr>> = Arc::default();
        let to = upstream.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    a = second.accept() => a,
                };
                let Ok((tcp, _)) = accepted else {
                    break;
                };
                let (acceptor, to) = (acceptor.clone(), to.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Some(upstream) = to.get() else {
                        return;
                    };
                    if let Ok(mut up) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                    }
                });
            }
        });
        TlsFront {
            port,
            ca_pem: ca_cert.pem(),
            upstream,
        }
    }

    /// Forwards to `upstream` from now on.
    pub fn forward_to(&self, upstream: SocketAddr) {
        self.upstream.set(upstream).expect("one upstream");
    }
}

/// An HTTP forward proxy on loopback: `CONNECT host:port` tunnels and absolute-form requests,
/// each request line recorded.
pub struct ForwardProxy {
    /// Where it listens.
    pub port: u16,
    seen: Arc<Mutex<Vec<String>>>,
}

impl ForwardProxy {
    /// Starts one.
    pub async fn start() -> ForwardProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(relay(tcp, log.clone()));
            }
        });
        ForwardProxy { port, seen }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The request lines it was sent (`CONNECT 127.0.0.1:443 HTTP/1.1`, `POST http://… HTTP/1.1`).
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serves one client connection of the proxy.
async fn relay(tcp: TcpStream, seen: Arc<Mutex<Vec<String>>>) {
    let mut client = BufReader::new(tcp);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if client.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let request_line = head.lines().next().unwrap_or_default().to_owned();
    seen.lock().unwrap().push(request_line.clone());
    let mut words = request_line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let authority = if method == "CONNECT" {
        target.to_owned()
    } else {
        let rest = target.strip_prefix("http://").unwrap_or(target);
        rest.split('/').next().unwrap_or_default().to_owned()
    };
    let Ok(mut upstream) = TcpStream::connect(&authority).await else {
        let _ = client
            .get_mut()
            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            .await;
        return;
    };
    if method == "CONNECT" {
        let _ = client
            .get_mut()
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await;
    } else {
        let _ = upstream.write_all(head.as_bytes()).await;
    }
    // Whatever the reader buffered past the head goes first.
    let mut buffered = vec![0; client.buffer().len()];
    let _ = client.read_exact(&mut buffered).await;
    let _ = upstream.write_all(&buffered).await;
    let mut client = client.into_inner();
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}
