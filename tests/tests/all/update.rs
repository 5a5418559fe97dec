//! The update check (docs/control.md "Control API › Reads") against local sources: the higher of the registry's and the
//! manifest's versions wins, answers are cached, `refresh=1` re-checks, and with no reachable
//! source it still answers 200 `ok:false` within a few seconds.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use a2a_edge::config::Config;
use a2a_edge_tests::Server;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// Serves `/registry` (crate JSON with `registry` as max_version; HTTP 500 when empty) and
/// `/manifest` (a workspace Cargo.toml with `manifest`).
async fn sources(registry: &'static str, manifest: &'static str) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let service = hyper::service::service_fn(
                move |req: hyper::Request<hyper::body::Incoming>| async move {
                    let (status, body) = match req.uri().path() {
                        "/registry" if !registry.is_empty() => (
                            200,
                            format!(
                                r#"{{"crate":{{"name":"a2a-edge","max_version":"{registry}","max_stable_version":"{registry}"}}}}"#
                            ),
                        ),
                        "/manifest" if !manifest.is_empty() => (
                            200,
                            format!(
                                "[workspace]\nmembers = []\n\n[workspace.package]\nversion = \"{manifest}\"\n"
                            ),
                        ),
                        _ => (500, "down".to_owned()),
                    };
                    Ok::<_, Infallible>(
                        hyper::Response::builder()
                            .status(status)
                            .body(Full::new(Bytes::from(body)))
                            .unwrap(),
                    )
                },
            );
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

fn config(registry: String, manifest: String) -> Config {
    let mut c = Config::default();
    c.update.registry_url = registry;
    c.update.manifest_url = manifest;
    c
}

async fn check(s: &Server, refresh: bool) -> Value {
    let (status, v) = s
        .get(if refresh {
            "/a2a/api/update?refresh=1"
        } else {
            "/a2a/api/update"
        })
        .await;
    assert_eq!(status, 200);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_higher_source_wins_and_answers_are_cached() {
    let at = sources("9.0.0", "0.2.0").await;
    let s = Server::start(config(
        format!("http://{at}/registry"),
        format!("http://{at}/manifest"),
    ))
    .await;
    let v = check(&s, false).await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["current"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["latest"], "9.0.0");
    assert_eq!(v["source"], "crates.io");
    assert_eq!(
        (
            v["hasUpdate"].as_bool(),
            v["ahead"].as_bool(),
            v["cached"].as_bool()
        ),
        (Some(true), Some(false), Some(false))
    );
    assert_eq!(v["error"], Value::Null);
    assert_eq!(v["packageName"], "a2a-edge");
    let lock =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock")).unwrap();
    let linked = lock
        .split("\n[[package]]\n")
        .find_map(|p| p.strip_prefix("name = \"wasmtime\"\nversion = \""))
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    assert!(linked.starts_with("48."), "{linked}");
    assert_eq!(
        v["runtime"]["wasmtime"], linked,
        "the wasmtime Cargo.lock links"
    );
    assert!(v["checkedAt"].as_u64().unwrap() > 0);

    let again = check(&s, false).await;
    assert_eq!(again["cached"], true);
    assert_eq!(again["checkedAt"], v["checkedAt"]);
    assert_eq!(s.app().update.checks(), 1, "served from the cache");
    let fresh = check(&s, true).await;
    assert_eq!(fresh["cached"], false);
    assert_eq!(
        s.app().update.checks(),
        2,
        "refresh=1 asks the sources again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_source_is_enough_and_a_newer_install_is_ahead() {
    let at = sources("", "0.0.1").await;
    let s = Server::start(config(
        format!("http://{at}/registry"),
        format!("http://{at}/manifest"),
    ))
    .await;
    let v = check(&s, false).await;
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        (v["latest"].as_str(), v["source"].as_str()),
        (Some("0.0.1"), Some("repository"))
    );
    assert_eq!(
        (v["hasUpdate"].as_bool(), v["ahead"].as_bool()),
        (Some(false), Some(true))
    );

    let same = sources(env!("CARGO_PKG_VERSION"), "").await;
    let s = Server::start(config(
        format!("http://{same}/registry"),
        format!("http://{same}/manifest"),
    ))
    .await;
    let v = check(&s, false).await;
    assert_eq!(
        (v["hasUpdate"].as_bool(), v["ahead"].as_bool()),
        (Some(false), Some(false)),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_any_source_it_answers_ok_false_within_seconds() {
    // One source refuses connections; the other accepts and never answers.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_at = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((c, _)) = silent.accept().await {
            held.push(c);
        }
    });
    let s = Server::start(config(
        format!("http://{closed}/registry"),
        format!("http://{silent_at}/manifest"),
    ))
    .await;
    let started = Instant::now();
    let v = check(&s, false).await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(v["ok"], false, "{v}");
    assert_eq!(v["latest"], Value::Null);
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("registry") && error.contains("repository manifest"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switched_off_check_contacts_nothing() {
    let at = sources("9.0.0", "9.0.0").await;
    let mut c = config(
        format!("http://{at}/registry"),
        format!("http://{at}/manifest"),
    );
    c.update.enabled = false;
    let s = Server::start(c).await;
    let v = check(&s, true).await;
    assert_eq!(
        (&v["ok"], &v["disabled"], &v["error"]),
        (&Value::Bool(false), &Value::Bool(true), &Value::Null),
        "{v}"
    );
    assert_eq!(s.app().update.checks(), 0, "no source was asked");
}
