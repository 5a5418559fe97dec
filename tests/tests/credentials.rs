//! A binary of its own: it installs the process's log subscriber, to read every line written.
//!
//! The credentials layer: `inbound.setAuth` stores the token under a generated name in a file of
//! its own (0600) and only the name in the record; the token takes effect at once, survives a
//! restart, and appears in no snapshot, card, record, log line or error. And what an agent
//! component writes to the log (lines, a panic's message) stays within its own line. Its own
//! process: the tests read the process's global log subscriber.

use std::io::Write;
use std::sync::{Arc, Mutex};

use a2a_edge_tests::jsonrpc::request;
use a2a_edge_tests::{Server, message};
use serde_json::json;

const TOKEN: &str = "tok-3f9a1c2e-very-secret";

/// Every log line of this test process, at the most verbose level.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn call(s: &Server, bearer: Option<&str>) -> u16 {
    let params = json!({"message": message(&uuid(), "hi")});
    let mut r = request(
        &s.http,
        &format!("{}/a2a/demo", s.base()),
        "SendMessage",
        params,
    );
    if let Some(t) = bearer {
        r = r.bearer_auth(t);
    }
    r.send().await.unwrap().status().as_u16()
}

fn uuid() -> String {
    format!(
        "m-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_auth_stores_the_token_privately_and_it_leaks_nowhere() {
    let logs = logs();
    let mut s = Server::default().await;
    assert_eq!(call(&s, None).await, 200);

    let (status, v) = s
        .action(json!({"action": "inbound.setAuth", "id": "demo", "token": TOKEN}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(call(&s, None).await, 401, "takes effect at once");
    assert_eq!(call(&s, Some("wrong")).await, 401);
    assert_eq!(call(&s, Some(TOKEN)).await, 200);

    let file = s.dir.path().join("credentials.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(stored["A2A_INBOUND_DEMO"], TOKEN);

    let (_, snap) = s.get("/a2a/api").await;
    assert_eq!(snap["inbounds"][0]["authTokenEnv"], "A2A_INBOUND_DEMO");
    let (_, card) = s.get("/a2a/demo/agent-card.json").await;
    assert!(
        card["securitySchemes"].is_object(),
        "the card announces bearer auth: {card}"
    );
    let (_, card_read) = s.get("/a2a/api/card?id=demo").await;
    let wrong = s
        .http
        .post(format!("{}/a2a/demo", s.base()))
        .bearer_auth("wrong")
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let refused = s.action(json!({"action": "inbound.setAuth", "id": "demo", "token": format!("{TOKEN} with space")})).await.1;

    s.restart().await;
    assert_eq!(call(&s, None).await, 401, "the token survives a restart");
    assert_eq!(call(&s, Some(TOKEN)).await, 200);

    // Nowhere else: not in answers, not in the database, not in any log line.
    for (what, text) in [
        ("snapshot", snap.to_string()),
        ("card", card.to_string()),
        ("card read", card_read.to_string()),
        ("401", wrong),
        ("refusal", refused.to_string()),
    ] {
        assert!(
            !text.contains(TOKEN),
            "the token leaked into the {what}: {text}"
        );
    }
    s.app().store.flush().await.unwrap();
    for entry in std::fs::read_dir(s.dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && path != file {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                "the token is in {}",
                path.display()
            );
        }
    }
    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logged.contains("a2a_edge"), "logs were captured");
    assert!(!logged.contains(TOKEN), "the token is in the logs");

    let (status, v) = s
        .action(json!({"action": "inbound.setAuth", "id": "demo", "token": ""}))
        .await;
    assert_eq!(status, 409, "an empty token never opens the endpoint: {v}");
    assert_eq!(call(&s, None).await, 401);
    let (status, v) = s
        .action(json!({"action": "inbound.setAuth", "id": "demo"}))
        .await;
    assert_eq!(
        status, 200,
        "an omitted token clears, as the seed says: {v}"
    );
    assert_eq!(call(&s, None).await, 200, "cleared at once");
    let (status, v) = s
        .action(json!({"action": "inbound.setAuth", "id": "demo", "token": TOKEN}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(call(&s, None).await, 401);
    let (status, v) = s
        .action(json!({"action": "inbound.setAuth", "id": "demo", "clear": true}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(call(&s, None).await, 200, "cleared at once");
    let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(stored.get("A2A_INBOUND_DEMO").is_none());
    let (status, v) = s
        .action(json!({"action": "inbound.setAuth", "id": "ghost", "token": "x"}))
        .await;
    assert_eq!(status, 409, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_secret_that_is_not_set_refuses_every_call() {
    let mut config = a2a_edge_tests::config_with(&[]);
    let mut decl = a2a_edge_tests::instance("locked", "echo");
    decl.auth_token_env = Some("A2A_TEST_NEVER_SET_TOKEN".into());
    config.instances.push(decl);
    let s = Server::start(config).await;
    let url = format!("{}/a2a/locked", s.base());
    let r = request(&s.http, &url, "GetTask", json!({"id": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "fail closed");
}

/// The process's log, captured from the first call on.
fn logs() -> &'static Logs {
    static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info,a2a_edge=trace"))
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        logs
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_agent_writes_to_the_log_stays_on_its_own_line_and_a_panic_reaches_it() {
    use a2a_edge::sessions::preset::{Backend, ComponentSettings, Preset};
    let logs = logs();
    let preset = Preset::new(
        "probe",
        Backend::Component(ComponentSettings {
            component: "agent-probe".into(),
            grants: Default::default(),
            limits: Default::default(),
            config: Default::default(),
        }),
    );
    let config = a2a_edge::config::Config {
        instances: vec![a2a_edge_tests::instance("probe", "probe")],
        presets: vec![preset],
        ..Default::default()
    };
    let s = Server::start_with(config, |dir| {
        let wasm = std::fs::read(a2a_edge_tests::AGENT_PROBE_WASM).unwrap();
        a2a_edge_tests::put_component(dir, "agent-probe", &wasm);
    })
    .await;
    let forged =
        "2026-12-06T13:00:00.000000Z  INFO a2a_edge::control: inbound.setAuth by the operator";
    for text in [
        format!("log first\n{forged}\r\u{1b}[2K"),
        "panic boom at the edge".to_owned(),
    ] {
        let params = json!({"message": message(&uuid(), &text)});
        s.ok("/a2a/probe", "SendMessage", params).await;
    }
    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        logged
            .lines()
            .all(|l| !l.starts_with("2026-12-06T13:00:00")),
        "a forged line: {logged}"
    );
    let line_with = |needle: &str, what: &str| {
        let found = logged.lines().find(|l| l.contains(needle));
        found
            .unwrap_or_else(|| panic!("{what}: {logged}"))
            .to_owned()
    };
    let line = line_with("first\\n", "the agent's line");
    assert!(
        line.contains(&format!("first\\n{forged}\\r\\u{{1b}}[2K")),
        "{line}"
    );
    let panic = line_with("standard error", "the panicking turn's line");
    assert!(
        panic.contains("boom at the edge") && panic.contains("agent-probe"),
        "{panic}"
    );
}
