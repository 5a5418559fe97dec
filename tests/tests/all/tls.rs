//! TLS on the listener (docs/serving.md "TLS"): HTTP/2 and HTTP/1.1 by ALPN, new certificate files
//! taken up without a restart (and files that do not load keeping the running ones), and mutual
//! TLS: a client certificate the CA bundle verifies names the caller, an unknown CA or an expired
//! certificate is refused at the handshake, the card says `mutualTLS`.

use std::net::SocketAddr;
use std::time::Duration;

use a2a_edge::config::Config;
use a2a_edge::tls::TlsSettings;
use a2a_edge_tests::jsonrpc::envelope;
use a2a_edge_tests::pki::{Ca, Issued, closes_idle, exchange, refused_handshake};
use a2a_edge_tests::{Server, message, scripted};
use serde_json::{Value, json};

const H2: &[&[u8]] = &[b"h2", b"http/1.1"];
const H1: &[&[u8]] = &[b"http/1.1"];

/// The server's CA, its files, and a config serving TLS with them (client certificates checked
/// against the CA when `mutual`).
struct Site {
    ca: Ca,
    dir: tempfile::TempDir,
}

impl Site {
    fn new() -> Site {
        let site = Site {
            ca: Ca::new("a2a-edge test CA"),
            dir: tempfile::tempdir().unwrap(),
        };
        site.ca.server("first").write(site.dir.path(), "server");
        std::fs::write(site.dir.path().join("ca.pem"), site.ca.pem()).unwrap();
        site
    }

    fn tls(&self, mutual: bool) -> TlsSettings {
        let d = self.dir.path();
        TlsSettings {
            cert_file: d.join("server.pem"),
            key_file: d.join("server.key"),
            client_ca_file: mutual.then(|| d.join("ca.pem")),
            watch_ms: 100,
        }
    }
}

fn addr(s: &Server) -> SocketAddr {
    s.running.as_ref().unwrap().addr
}

/// The common name of a DER certificate's subject.
fn subject(der: &[u8]) -> String {
    let (_, c) = x509_parser::parse_x509_certificate(der).unwrap();
    let cn = c.subject().iter_common_name().next().unwrap();
    cn.as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_speaks_h2_and_http1_over_tls_and_takes_up_new_certificate_files() {
    let site = Site::new();
    let s = Server::start_split(Config {
        tls: Some(site.tls(false)),
        ..Config::default()
    })
    .await;
    let card = ("GET", "/a2a/demo/agent-card.json", None, &[][..]);
    let e = exchange(addr(&s), &site.ca.pem(), None, H2, card.clone())
        .await
        .unwrap();
    assert_eq!(
        (e.alpn.as_deref(), e.status),
        (Some(&b"h2"[..]), 200),
        "{}",
        e.body
    );
    let url = e.body["supportedInterfaces"][0]["url"].as_str().unwrap();
    assert!(url.starts_with("https://"), "the card names https: {url}");
    assert_eq!(subject(&e.server_cert), "first");
    let e = exchange(addr(&s), &site.ca.pem(), None, H1, card.clone())
        .await
        .unwrap();
    assert_eq!((e.alpn.as_deref(), e.status), (Some(&b"http/1.1"[..]), 200));
    // A call over HTTP/2 runs the component as over HTTP/1.1.
    let send = envelope(
        1,
        "SendMessage",
        json!({"message": message("h2-1", "over h2")}),
    );
    let e = exchange(
        addr(&s),
        &site.ca.pem(),
        None,
        H2,
        ("POST", "/a2a/demo", Some(send), &[]),
    )
    .await
    .unwrap();
    assert_eq!(e.status, 200, "{}", e.body);
    assert!(e.body["result"]["task"]["id"].is_string(), "{}", e.body);
    // Plain HTTP on the TLS port gets no answer.
    let plain = reqwest::get(format!("http://{}/a2a/demo/agent-card.json", addr(&s))).await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success());

    // New files are taken up by new connections, without a restart.
    site.ca.server("second").write(site.dir.path(), "server");
    let mut seen = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let e = exchange(addr(&s), &site.ca.pem(), None, H1, card.clone())
            .await
            .unwrap();
        seen = subject(&e.server_cert);
        if seen == "second" {
            break;
        }
    }
    assert_eq!(seen, "second", "the rotated certificate is served");
    // Files that do not load keep the running certificate.
    std::fs::write(site.dir.path().join("server.key"), "not a key").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let e = exchange(addr(&s), &site.ca.pem(), None, H1, card)
        .await
        .unwrap();
    assert_eq!((e.status, subject(&e.server_cert)), (200, "second".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_tls_the_control_api_answers_h2_and_https_origins_and_idle_connections_close() {
    let site = Site::new();
    let mut config = Config {
        tls: Some(site.tls(false)),
        ..Config::default()
    };
    config.runtime.idle_timeout_ms = 300;
    // One listener: the control surface is served over TLS too.
    let s = Server::start(config).await;
    let api = ("GET", "/a2a/api", None, &[][..]);
    for alpn in [H2, H1] {
        let e = exchange(addr(&s), &site.ca.pem(), None, alpn, api.clone())
            .await
            .unwrap();
        assert_eq!(e.status, 200, "{:?}: {}", e.alpn, e.body);
    }
    let origin = format!("https://localhost:{}", addr(&s).port());
    let action = json!({"action": "inbound.disable", "id": "demo"});
    let post = async |origin: &str| {
        let headers = [("origin", origin)];
        let ask = ("POST", "/a2a/api", Some(action.clone()), &headers[..]);
        exchange(addr(&s), &site.ca.pem(), None, H2, ask)
            .await
            .unwrap()
            .status
    };
    assert_eq!(post(&origin).await, 200, "the panel's own origin");
    let plain = origin.replace("https", "http");
    assert_eq!(post(&plain).await, 403, "another origin");
    // Connections that send nothing are closed, on HTTP/2 as on HTTP/1.1.
    for alpn in [&b"h2"[..], b"http/1.1"] {
        assert!(
            closes_idle(addr(&s), &site.ca.pem(), alpn, Duration::from_secs(5)).await,
            "{}",
            String::from_utf8_lossy(alpn)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_that_do_not_load_stop_the_start_naming_the_file() {
    let site = Site::new();
    let mut tls = site.tls(false);
    tls.key_file = site.dir.path().join("missing.key");
    let config = a2a_edge_tests::isolated(Config {
        tls: Some(tls),
        ..Config::default()
    });
    let e = a2a_edge::Running::start_on(
        config,
        tempfile::tempdir().unwrap().path().to_owned(),
        a2a_edge::Listen {
            public: "127.0.0.1:0".parse().unwrap(),
            control: None,
        },
    )
    .await
    .err()
    .expect("no start");
    let e = format!("{e:#}");
    assert!(
        e.contains("missing.key") && e.contains("[tls] keyFile"),
        "{e}"
    );
}

/// A SendMessage to `tck` over TLS presenting `client`.
async fn send(
    s: &Server,
    site: &Site,
    client: Option<&Issued>,
    id: &str,
) -> Result<(u16, Value), String> {
    send_with(s, site, client, id, &[]).await
}

/// [`send`] with more headers.
async fn send_with(
    s: &Server,
    site: &Site,
    client: Option<&Issued>,
    id: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, Value), String> {
    let body = envelope(1, "SendMessage", json!({"message": message(id, "hello")}));
    exchange(
        addr(s),
        &site.ca.pem(),
        client,
        H2,
        ("POST", "/a2a/tck", Some(body), headers),
    )
    .await
    .map(|e| (e.status, e.body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_names_the_caller_and_refuses_unknown_and_expired_certificates_at_the_handshake()
{
    let site = Site::new();
    let mut config = scripted(|d| d.mtls = Some(Default::default()));
    config.tls = Some(site.tls(true));
    let s = Server::start_split(config).await;

    // The card says what the instance takes.
    let e = exchange(
        addr(&s),
        &site.ca.pem(),
        None,
        H2,
        ("GET", "/a2a/tck/agent-card.json", None, &[]),
    )
    .await
    .unwrap();
    assert_eq!(
        e.body["securitySchemes"],
        json!({"mtls": {"mtlsSecurityScheme": {}, "type": "mutualTLS"}}),
        "the 1.0 member, and the 0.3 type beside it"
    );
    assert_eq!(
        e.body["securityRequirements"],
        json!([{"schemes": {"mtls": {"list": []}}}])
    );

    // A certificate of the CA names its caller; the caller sees only its own tasks.
    let alice = site.ca.client("alice", &["alice.example.com"], false);
    let (status, v) = send(&s, &site, Some(&alice), "m-1").await.unwrap();
    assert_eq!(status, 200, "{v}");
    let task = v["result"]["task"]["id"].clone();
    let bob = site.ca.client("bob", &["bob.example.com"], false);
    let get = envelope(1, "GetTask", json!({"id": task}));
    let e = exchange(
        addr(&s),
        &site.ca.pem(),
        Some(&bob),
        H1,
        ("POST", "/a2a/tck", Some(get), &[]),
    )
    .await
    .unwrap();
    assert_eq!(
        e.body["error"]["code"], -32001,
        "bob cannot see alice's task: {}",
        e.body
    );
    let (_, snap) = s.get("/a2a/api?taskPrincipal=mtls:alice").await;
    assert_eq!(snap["tasks"].as_array().unwrap().len(), 1, "{snap}");
    assert_eq!(snap["inbounds"][0]["schemes"], json!(["mtls"]));

    // A credential header decides even with a good certificate: a wrong one is refused.
    let (status, v) = send_with(
        &s,
        &site,
        Some(&alice),
        "m-1b",
        &[("authorization", "Bearer not-a-token")],
    )
    .await
    .unwrap();
    assert_eq!(status, 401, "{v}");

    // Without a certificate the handshake passes (other instances may not need one) and the
    // instance refuses the call.
    let (status, v) = send(&s, &site, None, "m-2").await.unwrap();
    assert_eq!(status, 401, "{v}");
    assert!(v.to_string().contains("client certificate"), "{v}");

    // An unknown CA and an expired certificate are refused at the handshake (a good one is
    // not).
    assert_eq!(
        refused_handshake(addr(&s), &site.ca.pem(), &alice).await,
        None
    );
    let stranger = Ca::new("someone else").client("alice", &[], false);
    let e = refused_handshake(addr(&s), &site.ca.pem(), &stranger).await;
    assert!(
        e.as_deref().is_some_and(|e| e.contains("UnknownCA")),
        "{e:?}"
    );
    let expired = site.ca.client("alice", &[], true);
    let e = refused_handshake(addr(&s), &site.ca.pem(), &expired).await;
    assert!(
        e.as_deref()
            .is_some_and(|e| e.contains("CertificateExpired")),
        "{e:?}"
    );

    // The principal may come from the first alternative name instead.
    let (status, v) = s
        .action(json!({"action": "inbound.setMtls", "id": "tck", "principalFrom": "san"}))
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = send(&s, &site, Some(&alice), "m-5").await.unwrap();
    assert_eq!(status, 200, "{v}");
    let (_, snap) = s.get("/a2a/api?taskPrincipal=mtls:alice.example.com").await;
    assert_eq!(snap["tasks"].as_array().unwrap().len(), 1, "{snap}");

    // Clearing the last credential needs open.
    let (status, v) = s
        .action(json!({"action": "inbound.setMtls", "id": "tck", "clear": true}))
        .await;
    assert_eq!(status, 409, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("last credential"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_is_refused_where_the_listener_asks_for_no_client_certificates() {
    let s = Server::default().await;
    let (status, v) = s
        .action(json!({"action": "inbound.setMtls", "id": "demo"}))
        .await;
    assert_eq!(status, 409, "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("clientCaFile"),
        "{v}"
    );
}
