//! Agent components behind instances (docs/agents.md): the built-in `echo-agent`, the
//! `counter` example and a test-only probe, over JSON-RPC and HTTP+JSON, blocking and streamed;
//! their grants (deny by default), limits and cancel.

use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_edge::config::Config;
use a2a_edge::sessions::preset::{AgentLimits, Backend, ComponentSettings, Grants, Preset};
use a2a_edge_tests::events::kind;
use a2a_edge_tests::{AGENT_PROBE_WASM as PROBE_WASM, COUNTER_WASM, Server, instance, message};
use serde_json::{Value, json};

/// The cancel test measures a stop of at most 100 ms: it runs alone (write), the others beside
/// each other (read), so no toolchain build or spinning agent of another test takes its cores.
static CORES: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// A preset running the agent component `component` with `grants` and `limits`.
fn agent_preset(id: &str, component: &str, grants: Grants, limits: AgentLimits) -> Preset {
    Preset::new(
        id,
        Backend::Component(ComponentSettings {
            component: component.into(),
            grants,
            limits,
            config: Default::default(),
        }),
    )
}

/// A config with one instance per preset, named as its preset.
fn config(presets: Vec<Preset>) -> Config {
    Config {
        instances: presets.iter().map(|p| instance(&p.id, &p.id)).collect(),
        presets,
        ..Config::default()
    }
}

/// A server with the probe and counter components in its data directory.
async fn start(presets: Vec<Preset>) -> Server {
    Server::start_with(config(presets), |dir| {
        a2a_edge_tests::put_component(dir, "agent-probe", &std::fs::read(PROBE_WASM).unwrap());
        a2a_edge_tests::put_component(dir, "counter", &std::fs::read(COUNTER_WASM).unwrap());
    })
    .await
}

/// The grant of the test model at `base`.
fn llm(base: &str) -> Grants {
    use a2a_edge::sessions::preset::LlmGrant;
    Grants {
        llm: Some(LlmGrant {
            base_url: Some(base.to_owned()),
            model: Some("test-model".into()),
            api_key_env: Some(a2a_edge_tests::model::KEY_ENV.into()),
        }),
        ..Grants::default()
    }
}

fn key_value() -> Grants {
    Grants {
        key_value: true,
        ..Grants::default()
    }
}

/// The text of a task's artifacts.
fn text(task: &Value) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

/// The status text of a task.
fn said(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_echo_agent_answers_over_jsonrpc_and_rest_blocking_and_streamed() {
    let _cores = CORES.read().await;
    let s = ungranted("echo", "echo-agent").await;
    let r = s
        .ok(
            "/a2a/echo",
            "SendMessage",
            json!({"message": message("m1", "hello there")}),
        )
        .await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(text(&r["task"]), "echo: hello there");
    let rest = s
        .http
        .post(format!("{}/a2a/echo/message:send", s.base()))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .json(&json!({"message": message("m2", "over rest")}))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 200);
    let rest: Value = rest.json().await.unwrap();
    assert_eq!(text(&rest["task"]), "echo: over rest", "{rest}");
    let events = s
        .stream(
            "/a2a/echo",
            "SendStreamingMessage",
            json!({"message": message("m3", "streamed")}),
            None,
        )
        .await
        .all()
        .await;
    let kinds: Vec<&str> = events.iter().map(kind).collect();
    let first_artifact = kinds.iter().position(|k| *k == "artifactUpdate");
    let last_status = kinds.iter().rposition(|k| *k == "statusUpdate");
    assert!(
        first_artifact.is_some() && first_artifact < last_status,
        "the answer arrives before the end: {kinds:?}"
    );
    let end = &events[last_status.unwrap()].1["result"]["statusUpdate"];
    assert_eq!(end["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_continues_after_input_required_and_reports_progress() {
    let _cores = CORES.read().await;
    let s = start(vec![agent_preset(
        "probe",
        "agent-probe",
        key_value(),
        AgentLimits::default(),
    )])
    .await;
    let r = s
        .ok(
            "/a2a/probe",
            "SendMessage",
            json!({"message": message("a1", "ask")}),
        )
        .await;
    assert_eq!(
        r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{r}"
    );
    assert_eq!(said(&r["task"]), "what is your name?");
    let task = r["task"]["id"].as_str().unwrap();
    let mut next = message("a2", "Ada");
    next["taskId"] = json!(task);
    let r = s
        .ok("/a2a/probe", "SendMessage", json!({"message": next}))
        .await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(text(&r["task"]), "hello Ada");

    let events = s
        .stream(
            "/a2a/probe",
            "SendStreamingMessage",
            json!({"message": message("p1", "progress")}),
            None,
        )
        .await
        .all()
        .await;
    let working = events.iter().find(|e| {
        e.1["result"]["statusUpdate"]["status"]["message"]["parts"][0]["text"] == "thinking"
    });
    assert!(
        working.is_some(),
        "a WORKING status says what it does: {events:?}"
    );
    let chunks: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.1["result"].get("artifactUpdate"))
        .filter(|u| u["artifact"]["artifactId"] == "r")
        .collect();
    assert_eq!(chunks.len(), 2, "{events:?}");
    assert_eq!(
        (
            &chunks[0]["append"],
            &chunks[1]["append"],
            &chunks[1]["lastChunk"]
        ),
        (&Value::Null, &json!(true), &json!(true)),
        "the first chunk creates it, the last closes it: {chunks:?}"
    );
    let r = s
        .ok(
            "/a2a/probe",
            "GetTask",
            json!({"id": events[0].1["result"]["task"]["id"]}),
        )
        .await;
    let report = r["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["artifactId"] == "r")
        .unwrap();
    assert_eq!(report["name"], "report");
    assert_eq!(report["parts"][0]["text"], "part one, part two");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_stop_a_spinning_and_a_hoarding_agent_while_others_serve() {
    let _cores = CORES.read().await;
    let tight = AgentLimits {
        cpu_ms: 300,
        memory_mib: 32,
        ..AgentLimits::default()
    };
    let s = start(vec![
        agent_preset("probe", "agent-probe", Grants::default(), tight),
        agent_preset(
            "echo",
            "echo-agent",
            Grants::default(),
            AgentLimits::default(),
        ),
    ])
    .await;
    let spin = s
        .ok(
            "/a2a/probe",
            "SendMessage",
            json!({"message": message("s1", "spin"), "configuration": {"returnImmediately": true}}),
        )
        .await;
    let spin_id = spin["task"]["id"].as_str().unwrap().to_owned();
    // While it spins, the other instance answers.
    let r = s
        .ok(
            "/a2a/echo",
            "SendMessage",
            json!({"message": message("e1", "still here")}),
        )
        .await;
    assert_eq!(text(&r["task"]), "echo: still here");
    let failed = s
        .wait_state("/a2a/probe", &spin_id, "TASK_STATE_FAILED", 20)
        .await;
    assert!(said(&failed).contains("CPU limit"), "{failed}");
    assert!(said(&failed).contains("300 ms"), "{failed}");

    let r = s
        .ok(
            "/a2a/probe",
            "SendMessage",
            json!({"message": message("h1", "hoard")}),
        )
        .await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_FAILED", "{r}");
    assert!(said(&r["task"]).contains("memory limit"), "{r}");
    assert!(said(&r["task"]).contains("32 MiB"), "{r}");
    let r = s
        .ok(
            "/a2a/probe",
            "SendMessage",
            json!({"message": message("h2", "fine again")}),
        )
        .await;
    assert_eq!(
        text(&r["task"]),
        "echo: fine again",
        "a limit fails its own turn only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_spinning_a_waiting_and_a_model_streaming_agent_within_100_ms() {
    let _cores = CORES.write().await;
    use a2a_edge_tests::model::{KEY, hold_key, model};
    let model = model().await;
    let presets = vec![
        agent_preset(
            "probe",
            "agent-probe",
            Grants::default(),
            AgentLimits::default(),
        ),
        agent_preset(
            "thinker",
            "agent-probe",
            llm(&model.base),
            AgentLimits::default(),
        ),
    ];
    let s = Server::start_with(config(presets), |dir| {
        a2a_edge_tests::put_component(dir, "agent-probe", &std::fs::read(PROBE_WASM).unwrap());
        hold_key(dir, KEY);
    })
    .await;
    // Computing, sleeping in the host, and waiting on the model's stream (which sends one
    // chunk and then nothing).
    for (n, (path, what)) in [
        ("/a2a/probe", "spin"),
        ("/a2a/probe", "wait"),
        ("/a2a/thinker", "llm slow thinking"),
    ]
    .into_iter()
    .enumerate()
    {
        let r = s.ok(path, "SendMessage", json!({"message": message(&format!("c{n}"), what), "configuration": {"returnImmediately": true}})).await;
        let id = r["task"]["id"].as_str().unwrap().to_owned();
        if path == "/a2a/thinker" {
            model.wait_requests(1).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let t = s.ok(path, "GetTask", json!({"id": id})).await;
        assert_eq!(t["status"]["state"], "TASK_STATE_WORKING", "{what}: {t}");
        let asked = Instant::now();
        let canceled = s.ok(path, "CancelTask", json!({"id": id})).await;
        assert_eq!(
            canceled["status"]["state"], "TASK_STATE_CANCELED",
            "{what}: {canceled}"
        );
        // The turn itself is gone: the instance's running turns empty out.
        let running = |s: &Server| s.app().host.services().sessions.running_tasks();
        while !running(&s).is_empty() {
            assert!(
                asked.elapsed() < Duration::from_secs(2),
                "{what}: the turn still runs"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let took = asked.elapsed();
        assert!(
            took < Duration::from_millis(100),
            "{what}: the turn ran {took:?} after the cancel"
        );
    }
    assert!(
        model.slow_stream_closed_within(2).await,
        "the upstream model request is dropped with the turn"
    );
}

/// A loopback HTTP server answering 200 to anything; its port.
fn http_ok() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_reaches_nothing_it_was_not_granted() {
    let _cores = CORES.read().await;
    let port = http_ok();
    let to = |allow_private: bool| Grants {
        allowed_hosts: vec![format!("127.0.0.1:{port}")],
        allow_private,
        ..Grants::default()
    };
    let s = start(vec![
        agent_preset(
            "none",
            "agent-probe",
            Grants::default(),
            AgentLimits::default(),
        ),
        agent_preset("named", "agent-probe", to(false), AgentLimits::default()),
        agent_preset("private", "agent-probe", to(true), AgentLimits::default()),
    ])
    .await;
    let answer = |path: &'static str, text: &'static str| {
        let s = &s;
        async move {
            let r = s
                .ok(
                    path,
                    "SendMessage",
                    json!({"message": message(&format!("{path}-{text}"), text)}),
                )
                .await;
            assert_eq!(
                r["task"]["status"]["state"], "TASK_STATE_COMPLETED",
                "{text}: {r}"
            );
            self::text(&r["task"])
        }
    };
    let file = answer("/a2a/none", "file").await;
    assert!(file.starts_with("file error"), "{file}");
    // To a port that is open: only the sandbox can refuse it.
    let open: &'static str = Box::leak(format!("socket 127.0.0.1:{port}").into_boxed_str());
    let socket = answer("/a2a/none", open).await;
    assert!(
        socket.starts_with("socket error: Permission denied"),
        "{socket}"
    );
    assert_eq!(answer("/a2a/none", "env").await, "0 variables");
    let url: &'static str = Box::leak(format!("http http://127.0.0.1:{port}/x").into_boxed_str());
    let denied = answer("/a2a/none", url).await;
    assert!(
        denied.contains("HttpRequestDenied"),
        "deny-all by default: {denied}"
    );
    let private = answer("/a2a/named", url).await;
    assert!(
        private.contains("DestinationIpProhibited"),
        "a private address needs allowPrivate: {private}"
    );
    assert_eq!(answer("/a2a/private", url).await, "status 200");
    let other: &'static str =
        Box::leak(format!("http http://127.0.0.1:{}/x", port + 1).into_boxed_str());
    let elsewhere = answer("/a2a/private", other).await;
    assert!(
        elsewhere.contains("HttpRequestDenied"),
        "only the named port: {elsewhere}"
    );
}

/// A server whose instance `id` runs the agent `component` with no grant and the default limits.
async fn ungranted(id: &str, component: &str) -> Server {
    start(vec![agent_preset(
        id,
        component,
        Grants::default(),
        AgentLimits::default(),
    )])
    .await
}

/// Runs the probe's `text` on `path` of `s`; the answer's text, the task COMPLETED.
async fn probe(s: &Server, path: &str, text: &str) -> String {
    let id = uuid::Uuid::new_v4().to_string();
    let r = s
        .ok(path, "SendMessage", json!({"message": message(&id, text)}))
        .await;
    assert_eq!(
        r["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{text}: {r}"
    );
    self::text(&r["task"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_granted_private_addresses_never_drives_a_control_api() {
    let _cores = CORES.read().await;
    let loopback = Grants {
        allowed_hosts: vec![
            "127.0.0.1".into(),
            "localhost".into(),
            "[::ffff:127.0.0.1]".into(),
        ],
        allow_private: true,
        ..Grants::default()
    };
    let a = start(vec![agent_preset(
        "private",
        "agent-probe",
        loopback,
        AgentLimits::default(),
    )])
    .await;
    let b = Server::default().await;
    let create = r#"{"action":"inbound.create","name":"planted","description":"d","version":"1"}"#;
    let own = a.running.as_ref().unwrap().addr.port();
    // Its own runtime: the listener is never reached, by address or by name.
    for url in [
        format!("http://127.0.0.1:{own}/a2a/api"),
        format!("http://localhost:{own}/a2a/api"),
        format!("http://[::ffff:127.0.0.1]:{own}/a2a/api"),
    ] {
        let said = probe(&a, "/a2a/private", &format!("post {url} {create}")).await;
        assert!(said.contains("DestinationIpProhibited"), "{url}: {said}");
    }
    let said = probe(
        &a,
        "/a2a/private",
        &format!("http http://127.0.0.1:{own}/a2a/private/.well-known/agent-card.json"),
    )
    .await;
    assert!(
        said.contains("DestinationIpProhibited"),
        "its own instances too: {said}"
    );
    // Another runtime on the machine: reached, and its control API refuses the request.
    let other = b.running.as_ref().unwrap().addr.port();
    let said = probe(
        &a,
        "/a2a/private",
        &format!("post http://127.0.0.1:{other}/a2a/api {create}"),
    )
    .await;
    assert_eq!(said, "status 403", "the control API of another runtime");
    for s in [&a, &b] {
        let (_, list) = s.get("/a2a/api/instances").await;
        assert!(!list.to_string().contains("planted"), "{list}");
    }
    // What allowPrivate is for still works: a service on loopback.
    let port = http_ok();
    let said = probe(
        &a,
        "/a2a/private",
        &format!("http http://127.0.0.1:{port}/x"),
    )
    .await;
    assert_eq!(said, "status 200");
}

/// A server on `ip` keeping every request's bytes as they arrived (what was sent, read until
/// the sender pauses), answering each 200; its port and what it received.
fn recorder(ip: &str) -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            use std::io::{Read, Write};
            let mut stream = stream;
            let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
            let mut bytes = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stream.read(&mut buf) {
                bytes.extend_from_slice(&buf[..n]);
            }
            kept.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&bytes).into_owned());
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (port, received)
}

/// What leaves for an agent is what it asked for: its `Host` without the URL's `user@`; a body
/// written past the `content-length` it declared fails the request (wasmtime-wasi-http 48.0.8
/// fails the write in the guest but hands the bytes on, GHSA-w2v8-7333-jx5p; without the host's
/// own check the server got the body cut to its length as a whole request); and a grant of
/// `[::1]` matches `[::1]`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_request_leaves_as_one_request_of_the_host_and_length_it_named() {
    let _cores = CORES.read().await;
    let (port, received) = recorder("127.0.0.1");
    let (port6, received6) = recorder("::1");
    let grants = Grants {
        allowed_hosts: vec![format!("127.0.0.1:{port}"), "[::1]".into()],
        allow_private: true,
        ..Grants::default()
    };
    let s = start(vec![agent_preset(
        "sent",
        "agent-probe",
        grants,
        AgentLimits::default(),
    )])
    .await;
    let said = probe(
        &s,
        "/a2a/sent",
        &format!("http http://user@127.0.0.1:{port}/a"),
    )
    .await;
    assert_eq!(said, "status 200");
    let smuggled = "abcdGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n";
    let said = probe(
        &s,
        "/a2a/sent",
        &format!("declared http://127.0.0.1:{port}/b 4 {smuggled}"),
    )
    .await;
    assert!(
        said.ends_with("refused: ErrorCode::HttpProtocolError"),
        "a body past its length fails the request: {said}"
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let requests = received.lock().unwrap().clone();
    let host = requests
        .iter()
        .find(|r| r.starts_with("GET /a "))
        .expect("the GET arrived");
    assert!(
        host.to_ascii_lowercase()
            .contains(&format!("\r\nhost: 127.0.0.1:{port}\r\n")),
        "the Host header without user@: {host}"
    );
    assert!(!host.contains("user@"), "{host}");
    assert!(
        requests
            .iter()
            .all(|r| !r.contains("smuggled") && !r.contains("abcd")),
        "no request went out with the body cut to its length, nor a byte past it: {requests:?}"
    );
    let said = probe(&s, "/a2a/sent", &format!("http http://[::1]:{port6}/c")).await;
    assert_eq!(said, "status 200", "[::1] granted");
    assert_eq!(received6.lock().unwrap().len(), 1);
}

/// A loopback server whose answer's body trickles in: `chunks` bytes, 10 ms apart; its port.
fn trickle(chunks: usize) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut stream = stream;
                let _ = stream.read(&mut [0u8; 4096]);
                let head =
                    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                let _ = stream.write_all(head.as_bytes());
                for _ in 0..chunks {
                    std::thread::sleep(Duration::from_millis(10));
                    if stream.write_all(b"1\r\nx\r\n").is_err() {
                        return;
                    }
                }
                let _ = stream.write_all(b"0\r\n\r\n");
            });
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_waits_is_billed_for_its_computing_alone() {
    let _cores = CORES.read().await;
    let port = trickle(150);
    let grants = Grants {
        allowed_hosts: vec![format!("127.0.0.1:{port}")],
        allow_private: true,
        key_value: true,
        ..Grants::default()
    };
    let limits = AgentLimits {
        cpu_ms: 300,
        ..AgentLimits::default()
    };
    let s = start(vec![agent_preset("waits", "agent-probe", grants, limits)]).await;
    // 1.5 s of a body that trickles in at a fast model's token rate.
    let read = format!("read http://127.0.0.1:{port}/");
    assert_eq!(
        probe(&s, "/a2a/waits", &read).await,
        "status 200, read 150 bytes"
    );
    // 1.5 s of timer waits of 10 ms, then of 1 ms; then many small key-value writes.
    assert_eq!(probe(&s, "/a2a/waits", "naps 150 10").await, "napped");
    assert_eq!(probe(&s, "/a2a/waits", "naps 1000 1").await, "napped");
    assert_eq!(probe(&s, "/a2a/waits", "puts 2000").await, "put");
    // Computing is still billed: a spinning turn stops at its 300 ms.
    let id = uuid::Uuid::new_v4().to_string();
    let r = s
        .ok(
            "/a2a/waits",
            "SendMessage",
            json!({"message": message(&id, "spin")}),
        )
        .await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_FAILED", "{r}");
    assert!(said(&r["task"]).contains("more than 300 ms"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_an_agent_returns_is_bounded_and_checked_before_it_is_kept() {
    let _cores = CORES.read().await;
    let s = ungranted("probe", "agent-probe").await;
    let send = |text: String, stream: bool| {
        let s = &s;
        async move {
            let id = uuid::Uuid::new_v4().to_string();
            let params = json!({"message": message(&id, &text)});
            if stream {
                let mut events = s
                    .stream("/a2a/probe", "SendStreamingMessage", params, None)
                    .await;
                // The stream's last status update (a task snapshot closes it).
                let all = events.results().await;
                let update = all.iter().rev().find_map(|(_, e)| e.get("statusUpdate"));
                update
                    .unwrap_or_else(|| panic!("no status update: {all:?}"))
                    .clone()
            } else {
                s.ok("/a2a/probe", "SendMessage", params).await["task"].clone()
            }
        }
    };
    // An outcome's text past 16 KiB: the task is kept, FAILED, naming the bound.
    for kind in ["failed", "input", "auth", "unavailable"] {
        for stream in [false, true] {
            let task = send(format!("outcome {kind} {}", 9 << 20), stream).await;
            let state = &task["status"]["state"];
            assert_eq!(
                state, "TASK_STATE_FAILED",
                "{kind}, streamed {stream}: {task}"
            );
            let why = said(&task);
            assert!(
                why.contains("an outcome's text is at most 16384 bytes"),
                "{why}"
            );
        }
    }
    let short = send("outcome input 20".into(), false).await;
    assert_eq!(short["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(said(&short), "x".repeat(20));
    // Artifact parts are checked as a caller's would be; the agent reads why.
    for (parts, why) in [
        (
            r#"[{"raw":"not base64!"}]"#,
            "parts[0] raw is not valid base64",
        ),
        (
            r#"[{"text":"ok"},{"kind":"file","file":{"uri":"https://x"}}]"#,
            "parts[1] must have exactly one of text, raw, url or data",
        ),
        (r#"[{"url":"report.pdf"}]"#, "is not an absolute URL"),
    ] {
        let task = send(format!("artifact {parts}"), false).await;
        let answer = text(&task);
        assert!(answer.contains(why), "{parts}: {answer}");
    }
    let task = send(r#"artifact [{"raw":"aGk="}]"#.into(), false).await;
    assert_eq!(text(&task), "ok");
    // An agent's own `failed("canceled")` is a failure, not a cancel.
    let task = send("fail canceled".into(), false).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
    let (_, metrics) = s.get("/a2a/api/metrics").await;
    let turns = &metrics["agents"]["turns"];
    assert_eq!(turns["canceled"], 0, "{turns}");
    // The panic's message is the log's (its trap is the caller's, said once).
    let task = send("panic boom".into(), false).await;
    let why = said(&task);
    assert!(
        why.starts_with("the agent stopped: wasm trap: ") && !why.contains("wasm trap: wasm trap"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_importing_outside_its_world_is_refused_naming_the_import() {
    let _cores = CORES.read().await;
    // A component that imports the runtime's own storage interface and exports `run`.
    let wasm = wat::parse_str(
        r#"(component
            (import "a2a:edge/storage@0.1.0" (instance))
            (core module $m (func (export "f")))
            (core instance $i (instantiate $m))
            (func (export "run") (canon lift (core func $i "f"))))"#,
    )
    .unwrap();
    let mut s = ungranted("sneaky", "sneaky").await;
    s.put_component("sneaky", &wasm);
    let r = s
        .ok(
            "/a2a/sneaky",
            "SendMessage",
            json!({"message": message("x1", "hi")}),
        )
        .await;
    let (said, why) = s.failure(&r).await;
    assert_eq!(said, "the agent is not available");
    assert!(why.contains("imports `a2a:edge/storage@0.1.0`"), "{why}");
    s.restart().await;
    let r = s
        .ok(
            "/a2a/sneaky",
            "SendMessage",
            json!({"message": message("x2", "hi")}),
        )
        .await;
    let (_, why) = s.failure(&r).await;
    assert!(why.contains("which agents cannot use"), "{why}");
}

/// Sends `hi` as message `id` in context `ctx-1`; the result.
async fn send(s: &Server, path: &str, id: &str) -> Value {
    let m = json!({"messageId": id, "contextId": "ctx-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
    s.ok(path, "SendMessage", json!({"message": m})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_counter_remembers_across_turns_and_restarts_within_its_quota() {
    let _cores = CORES.read().await;
    let none = AgentLimits {
        key_value_mib: 0,
        ..AgentLimits::default()
    };
    let mut s = start(vec![
        agent_preset("counter", "counter", key_value(), AgentLimits::default()),
        agent_preset("full", "counter", key_value(), none),
        agent_preset(
            "forgetful",
            "counter",
            Grants::default(),
            AgentLimits::default(),
        ),
    ])
    .await;
    assert_eq!(
        text(&send(&s, "/a2a/counter", "k1").await["task"]),
        "message 1: hi"
    );
    assert_eq!(
        text(&send(&s, "/a2a/counter", "k2").await["task"]),
        "message 2: hi"
    );
    s.restart().await;
    assert_eq!(
        text(&send(&s, "/a2a/counter", "k3").await["task"]),
        "message 3: hi"
    );
    let full = send(&s, "/a2a/full", "k4").await;
    assert!(
        said(&full["task"]).contains("key-value store is full"),
        "{full}"
    );
    let denied = send(&s, "/a2a/forgetful", "k5").await;
    assert!(
        said(&denied["task"]).contains("AccessDenied"),
        "no grant, no bucket: {denied}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_asks_the_granted_model_without_ever_holding_its_key() {
    let _cores = CORES.read().await;
    use a2a_edge_tests::model::{KEY, hold_key, model};
    let model = model().await;
    let presets = vec![
        agent_preset(
            "granted",
            "agent-probe",
            llm(&model.base),
            AgentLimits::default(),
        ),
        agent_preset(
            "bare",
            "agent-probe",
            Grants::default(),
            AgentLimits::default(),
        ),
    ];
    let s = Server::start_with(config(presets), |dir| {
        a2a_edge_tests::put_component(dir, "agent-probe", &std::fs::read(PROBE_WASM).unwrap());
        hold_key(dir, KEY);
    })
    .await;
    let events = s
        .stream(
            "/a2a/granted",
            "SendStreamingMessage",
            json!({"message": message("l1", "llm how are you")}),
            None,
        )
        .await
        .all()
        .await;
    let kinds: Vec<&str> = events.iter().map(kind).collect();
    let answer = events.iter().position(|e| kind(e) == "artifactUpdate");
    assert!(
        answer.is_some() && answer < kinds.iter().rposition(|k| *k == "statusUpdate"),
        "{kinds:?}"
    );
    let id = events[0].1["result"]["task"]["id"].clone();
    let task = s.ok("/a2a/granted", "GetTask", json!({"id": id})).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(text(&task), "You said: how are you");
    let asked = model.requests().last().cloned().unwrap();
    assert_eq!(
        (
            asked["model"].as_str(),
            asked["messages"][0]["content"].as_str()
        ),
        (Some("test-model"), Some("how are you"))
    );
    assert!(
        !events.iter().any(|e| e.1.to_string().contains(KEY)),
        "the key reaches no answer"
    );
    let bare = s
        .ok(
            "/a2a/bare",
            "SendMessage",
            json!({"message": message("l2", "llm hi")}),
        )
        .await;
    assert_eq!(said(&bare["task"]), "Error::NotGranted", "{bare}");
}

/// The example agents in Python and JavaScript, each under a preset named for its language with
/// a key-value bucket, and again (`<lang>-llm`) with the test model granted.
async fn polyglot(model_base: String) -> Server {
    use a2a_edge_tests::model::{KEY, hold_key};
    use a2a_edge_tests::toolchains::{js_agent, python_agent};
    let built =
        tokio::task::spawn_blocking(|| [("notes-py", python_agent()), ("notes-js", js_agent())])
            .await
            .unwrap();
    let with_model = Grants {
        key_value: true,
        ..llm(&model_base)
    };
    let mut presets = Vec::new();
    for (lang, component) in [("py", "notes-py"), ("js", "notes-js")] {
        presets.push(agent_preset(
            lang,
            component,
            key_value(),
            AgentLimits::default(),
        ));
        presets.push(agent_preset(
            &format!("{lang}-llm"),
            component,
            with_model.clone(),
            AgentLimits::default(),
        ));
    }
    Server::start_with(config(presets), |dir| {
        for (name, wasm) in &built {
            a2a_edge_tests::put_component(dir, name, &std::fs::read(wasm).unwrap());
        }
        hold_key(dir, KEY);
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_in_python_and_javascript_answer_stream_continue_and_ask_the_model() {
    let _cores = CORES.read().await;
    let model = a2a_edge_tests::model::model().await;
    let s = polyglot(model.base.clone()).await;
    for lang in ["py", "js"] {
        let path = format!("/a2a/{lang}");
        let in_context = |id: &str, text: &str| json!({"message": {"messageId": format!("{lang}-{id}"), "contextId": format!("notes-{lang}"), "role": "ROLE_USER", "parts": [{"text": text}]}});
        let r = s
            .ok(&path, "SendMessage", in_context("1", "buy milk"))
            .await;
        assert_eq!(
            r["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{lang}: {r}"
        );
        assert_eq!(text(&r["task"]), "noted 1: buy milk", "{lang}");

        let rest: Value = s
            .http
            .post(format!("{}{path}/message:send", s.base()))
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .json(&in_context("2", "call mom"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(text(&rest["task"]), "noted 2: call mom", "{lang}: {rest}");

        let events = s
            .stream(
                &path,
                "SendStreamingMessage",
                in_context("3", "water plants"),
                None,
            )
            .await
            .all()
            .await;
        let kinds: Vec<&str> = events.iter().map(kind).collect();
        let status = |e: &(Option<u64>, Value)| e.1["result"]["statusUpdate"]["status"].clone();
        let taking = events
            .iter()
            .position(|e| status(e)["message"]["parts"][0]["text"] == "taking a note");
        let answer = kinds.iter().position(|k| *k == "artifactUpdate");
        let end = kinds.iter().rposition(|k| *k == "statusUpdate");
        assert!(
            taking.is_some() && taking < answer && answer < end,
            "{lang}: {kinds:?}"
        );
        assert_eq!(
            status(&events[end.unwrap()])["state"],
            "TASK_STATE_COMPLETED",
            "{lang}"
        );

        let r = s.ok(&path, "SendMessage", in_context("4", "ask")).await;
        assert_eq!(
            r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{lang}: {r}"
        );
        assert_eq!(said(&r["task"]), "What should I note?");
        let mut more = in_context("5", "feed the cat");
        more["message"]["taskId"] = r["task"]["id"].clone();
        let r = s.ok(&path, "SendMessage", more).await;
        assert_eq!(text(&r["task"]), "noted 4: feed the cat", "{lang}: {r}");

        let r = s
            .ok(
                &format!("{path}-llm"),
                "SendMessage",
                in_context("6", "what next?"),
            )
            .await;
        assert_eq!(text(&r["task"]), "You said: what next?", "{lang}: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_swapped_under_load_fails_no_request_and_new_turns_run_the_new_version() {
    let _cores = CORES.read().await;
    let s = Arc::new(
        Server::start_with(
            config(vec![agent_preset(
                "swap",
                "swap",
                key_value(),
                AgentLimits::default(),
            )]),
            |dir| {
                a2a_edge_tests::put_component(dir, "swap", &std::fs::read(PROBE_WASM).unwrap());
            },
        )
        .await,
    );
    let (_, list) = s.get("/a2a/api/components").await;
    let entry = |list: &Value, name: &str| {
        list["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap()
    };
    let kinds: Vec<(String, String)> = list["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().into(),
                c["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    for want in [
        ("a2a-server", "server"),
        ("a2a-client", "client"),
        ("swap", "agent"),
    ] {
        assert!(kinds.contains(&(want.0.into(), want.1.into())), "{kinds:?}");
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (s, stop) = (s.clone(), stop.clone());
            tokio::spawn(async move {
                let mut said = Vec::new();
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    n += 1;
                    let r = s
                        .ok(
                            "/a2a/swap",
                            "SendMessage",
                            json!({"message": message(&format!("w{c}-{n}"), "hi")}),
                        )
                        .await;
                    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
                    said.push(text(&r["task"]));
                }
                said
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    s.put_component("swap", &std::fs::read(COUNTER_WASM).unwrap());
    let (status, swapped) = s
        .action(json!({"action": "component.reload", "name": "swap"}))
        .await;
    assert_eq!(
        (status, &swapped["kind"]),
        (200, &json!("agent")),
        "{swapped}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for client in clients {
        let said = client.await.unwrap();
        let first_new = said.iter().position(|t| t.starts_with("message "));
        assert!(
            first_new.is_some(),
            "new turns run the new version: {said:?}"
        );
        assert!(
            said[..first_new.unwrap()].iter().all(|t| t == "echo: hi"),
            "{said:?}"
        );
        assert!(
            said[first_new.unwrap()..]
                .iter()
                .all(|t| t.starts_with("message ")),
            "never back: {said:?}"
        );
    }
    let (_, list) = s.get("/a2a/api/components").await;
    let agent = entry(&list, "swap");
    assert_eq!(agent["sha256"], swapped["sha256"]);
    assert!(
        agent["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i == "wasi:keyvalue/store@0.2.0-draft"),
        "{agent}"
    );
    assert_eq!(agent["presets"][0]["grants"]["keyValue"], true, "{agent}");
    assert_eq!(agent["instances"], json!(["swap"]));
    let (_, presets) = s.get("/a2a/api/presets").await;
    let preset = presets
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "swap")
        .unwrap();
    assert_eq!(preset["agent"]["component"], "swap", "{preset}");
}

/// The resident memory of this process, bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS in /proc/self/status");
    kib << 10
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_of_large_turns_goes_back_to_the_system_when_they_end() {
    // Alone: the process's resident memory is what is measured.
    let _cores = CORES.write().await;
    let s = ungranted("probe", "agent-probe").await;
    let big = |n: usize| {
        let s = &s;
        async move {
            let id = uuid::Uuid::new_v4().to_string();
            let params = json!({"message": message(&id, &format!("big {n}"))});
            let task = s.ok("/a2a/probe", "SendMessage", params).await["task"].clone();
            assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
            let kept = task["artifacts"][0].to_string().len();
            assert!(kept > n << 20, "the whole artifact: {kept} bytes");
        }
    };
    big(7).await;
    let before = resident();
    // 20 turns answering 7 MiB each (on c816994: +800 MiB, and most of it stayed).
    for _ in 0..20 {
        big(7).await;
    }
    let mut after = resident();
    for _ in 0..20 {
        if after < before + (160 << 20) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        after = resident();
    }
    let grown = after.saturating_sub(before) >> 20;
    assert!(
        grown < 160,
        "{grown} MiB stayed resident after the turns ended"
    );
}
