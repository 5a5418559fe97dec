//! Traces end to end (docs/operating.md "Traces"), on the real binary: a client's trace continues
//! through a2a-edge A, its model request and its outbound call into a2a-edge B, B's component and
//! store, and A's webhook; the collector is a loopback OTLP receiver over HTTP and gRPC. With no
//! exporter nothing leaves, and the task page's spans are still kept.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use a2a_edge_tests::binary::free_port;
use a2a_edge_tests::model::{KEY, hold_key, model};
use a2a_edge_tests::otlp::{Collector, Got};
use a2a_edge_tests::webhook::Webhook;

/// A server process on `port` over `dir` with `config`, logging at info to `dir/log`; killed when
/// dropped.
struct Edge(Child);

impl Edge {
    async fn start(dir: &Path, port: u16, config: &str) -> Edge {
        std::fs::write(dir.join("config.toml"), config).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_a2a-edge"));
        for (var, _) in std::env::vars().filter(|(v, _)| v.starts_with("OTEL_")) {
            command.env_remove(var);
        }
        let child = command
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--data-dir",
            ])
            .arg(dir)
            .arg("--config")
            .arg(dir.join("config.toml"))
            .env("RUST_LOG", "info")
            // Exports every 100 ms, so the test waits for spans, not for the default 5 s.
            .env("OTEL_BSP_SCHEDULE_DELAY", "100")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let ready = format!("http://127.0.0.1:{port}/readyz");
        while !reqwest::get(&ready)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(
                Instant::now() < deadline,
                "the server did not start: {}",
                std::fs::read_to_string(dir.join("log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Edge(child)
    }
}

impl Drop for Edge {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A JSON-RPC SendMessage to `url` carrying `traceparent`; the result.
async fn send(url: &str, traceparent: Option<&str>, params: Value) -> Value {
    let mut r = reqwest::Client::new().post(url).json(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params
    }));
    if let Some(t) = traceparent {
        r = r.header("traceparent", t);
    }
    let answer: Value = r.send().await.unwrap().json().await.unwrap();
    assert!(answer["result"].is_object(), "{answer}");
    answer["result"].clone()
}

fn message(id: &str, text: &str) -> Value {
    json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
}

/// The span of `spans` named `name` of `service`.
fn named<'a>(spans: &'a [Got], service: &str, name: &str) -> &'a Got {
    spans
        .iter()
        .find(|s| s.service == service && s.name == name)
        .unwrap_or_else(|| panic!("no span {name:?} of {service}: {spans:#?}"))
}

/// The span whose id is `id`.
fn by_id<'a>(spans: &'a [Got], id: &str) -> &'a Got {
    spans
        .iter()
        .find(|s| s.span_id == id)
        .unwrap_or_else(|| panic!("no span {id}: {spans:#?}"))
}

#[tokio::test]
async fn a_clients_trace_runs_through_both_servers_their_model_tools_stores_and_webhooks() {
    let collector = Collector::default();
    let endpoint = collector.http().await;
    let llm = model().await;
    let hook = Webhook::start().await;
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a_port, b_port) = (free_port(), free_port());
    let _b = Edge::start(
        b_dir.path(),
        b_port,
        &format!(
            "[telemetry]\notlpEndpoint = \"{endpoint}\"\nserviceName = \"edge-b\"\n\n\
             [[instances]]\nid = \"back\"\nname = \"Back\"\npreset = \"echo\"\n"
        ),
    )
    .await;
    hold_key(a_dir.path(), KEY);
    let _a = Edge::start(
        a_dir.path(),
        a_port,
        &format!(
            "[telemetry]\notlpEndpoint = \"{endpoint}\"\nserviceName = \"edge-a\"\n\n\
             [push]\nallowPrivateTargets = true\n\n\
             [[presets]]\nid = \"assistant\"\nbackend = \"openai\"\nbaseUrl = \"{base}\"\n\
             model = \"test-model\"\napiKeyEnv = \"A2A_TEST_LLM_KEY\"\n\n\
             [[instances]]\nid = \"front\"\nname = \"Front\"\npreset = \"assistant\"\n\n\
             [[connections]]\nid = \"back\"\nname = \"back\"\nallowPrivate = true\n\
             agentCardUrl = \"http://127.0.0.1:{b_port}/a2a/back/agent-card.json\"\n",
            base = llm.base
        ),
    )
    .await;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    // The receiver refuses the first notification: its attempt's span is drawn failed.
    hook.fail_next(1);
    let task = send(
        &format!("http://127.0.0.1:{a_port}/a2a/front"),
        Some(&format!("00-{trace}-{client_span}-01")),
        json!({
            "message": message("m-trace", "please use the tool"),
            "configuration": {"taskPushNotificationConfig": {"url": hook.url()}},
        }),
    )
    .await;
    let task = &task["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");

    // One trace, the client's: A's request under the client's span, the method, the component,
    // the store, the turn, the model; the outbound call; B's request under it, and B's work.
    let spans = collector
        .wait(trace, |s| {
            s.iter()
                .any(|s| s.service == "edge-b" && s.name == "SendStreamingMessage")
                && s.iter()
                    .any(|s| s.service == "edge-a" && s.name == "SendMessage")
                && s.iter().any(|s| s.name == "push delivery")
        })
        .await;
    let a_request = spans
        .iter()
        .find(|s| s.service == "edge-a" && s.parent_id == client_span)
        .unwrap_or_else(|| panic!("A's request is not the client's child: {spans:#?}"));
    assert_eq!(a_request.name, "POST");
    assert_eq!(a_request.attributes["http.response.status_code"], "200");
    let a_method = named(&spans, "edge-a", "SendMessage");
    assert_eq!(a_method.attributes["a2a.method.name"], "SendMessage");
    assert_eq!(
        a_method.attributes["a2a.task.id"],
        task["id"].as_str().unwrap()
    );
    assert_eq!(a_method.attributes["a2a.instance.id"], "front");
    let chat = named(&spans, "edge-a", "chat test-model");
    assert_eq!(chat.attributes["gen_ai.request.model"], "test-model");
    assert_eq!(chat.attributes["gen_ai.operation.name"], "chat");
    let call = named(&spans, "edge-a", "call back");
    // B serves the call's card fetch and its message (the client component streams).
    let b_method = named(&spans, "edge-b", "SendStreamingMessage");
    let b_request = by_id(&spans, &b_method.parent_id);
    assert_eq!(
        (b_request.name.as_str(), b_request.parent_id.as_str()),
        ("POST", call.span_id.as_str()),
        "B's method runs in B's request, a child of A's outbound call"
    );
    let b_store = spans
        .iter()
        .find(|s| {
            s.service == "edge-b"
                && s.attributes
                    .get("db.operation.name")
                    .is_some_and(|o| o == "create-task")
        })
        .unwrap_or_else(|| panic!("no store span of B: {spans:#?}"));
    assert_eq!(b_store.attributes["db.system.name"], "sqlite");
    let b_run = by_id(&spans, &b_store.parent_id);
    assert_eq!(
        (b_run.name.as_str(), b_run.parent_id.as_str()),
        ("run", b_method.span_id.as_str())
    );
    // B's card fetch may have left an instance that its message then runs on.
    let instantiated = spans.iter().any(|s| {
        s.service == "edge-b" && s.name == "instantiate" && s.parent_id == b_method.span_id
    });
    assert_eq!(
        b_run.attributes["a2a.component.reused"],
        (!instantiated).to_string(),
        "B's component is instantiated in its method or runs on a kept instance, which its run says"
    );

    // What left A carried the trace: the model request, the webhook.
    let parent = |t: &str| t.split('-').nth(1).unwrap_or_default().to_owned();
    assert!(
        llm.traceparents().iter().all(|t| parent(t) == trace) && !llm.traceparents().is_empty(),
        "{:?}",
        llm.traceparents()
    );
    hook.wait_for_state("TASK_STATE_COMPLETED", 20).await;
    let hit = hook.hits().into_iter().last().unwrap();
    let carried = hit.headers["traceparent"].to_str().unwrap();
    assert_eq!(parent(carried), trace, "{carried}");

    // The task records the trace that created it, and the control API shows its spans.
    let control = format!(
        "http://127.0.0.1:{a_port}/a2a/api/task?id={}",
        task["id"].as_str().unwrap()
    );
    let view: Value = reqwest::get(&control).await.unwrap().json().await.unwrap();
    assert_eq!(view["traceId"], trace, "{view}");
    let kept: Vec<&str> = view["trace"]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    for name in [
        "POST",
        "SendMessage",
        "turn",
        "chat test-model",
        "call back",
        "create-task",
    ] {
        assert!(kept.contains(&name), "{name} not kept: {kept:?}");
    }
    let refused: Vec<&Value> = view["trace"]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "push delivery" && s["error"] == "HTTP 503")
        .collect();
    assert_eq!(
        refused.len(),
        1,
        "the refused delivery is drawn failed, saying why: {}",
        view["trace"]
    );

    // A's log lines carry the trace.
    let log = std::fs::read_to_string(a_dir.path().join("log")).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("a2a request") && l.contains("trace_id") && l.contains(trace)),
        "{log}"
    );
}

#[tokio::test]
async fn spans_go_over_grpc_too_and_a_request_without_traceparent_starts_a_trace() {
    let collector = Collector::default();
    let endpoint = collector.grpc().await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _edge = Edge::start(
        dir.path(),
        port,
        &format!(
            "[telemetry]\notlpEndpoint = \"{endpoint}\"\notlpProtocol = \"grpc\"\n\n\
             [[instances]]\nid = \"echo\"\nname = \"Echo\"\npreset = \"echo\"\n"
        ),
    )
    .await;
    let task = send(
        &format!("http://127.0.0.1:{port}/a2a/echo"),
        None,
        json!({"message": message("m-grpc", "hi")}),
    )
    .await;
    let id = task["task"]["id"].as_str().unwrap().to_owned();
    let control = format!("http://127.0.0.1:{port}/a2a/api/task?id={id}");
    let view: Value = reqwest::get(&control).await.unwrap().json().await.unwrap();
    let trace = view["traceId"].as_str().expect("a new trace").to_owned();
    assert_eq!(trace.len(), 32);
    let spans = collector
        .wait(&trace, |s| s.iter().any(|s| s.name == "SendMessage"))
        .await;
    assert!(spans.iter().all(|s| s.service == "a2a-edge"), "{spans:#?}");
    let root = spans.iter().find(|s| s.parent_id.is_empty()).unwrap();
    assert_eq!(root.name, "POST");
    // With an exporter, a card read is a trace of its own too (without one it makes no span:
    // no task page could show it).
    let card = format!("http://127.0.0.1:{port}/a2a/echo/agent-card.json");
    assert!(reqwest::get(&card).await.unwrap().status().is_success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !collector.spans().iter().any(|s| {
        s.name == "GET"
            && s.attributes.get("url.path").map(String::as_str) == Some("/a2a/echo/agent-card.json")
    }) {
        assert!(
            Instant::now() < deadline,
            "no span of the card read was exported"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn with_no_exporter_nothing_leaves_and_the_task_still_shows_its_spans() {
    // Listening where an exporter with no endpoint would send by default (OTLP's 4318).
    let collector = Collector::default();
    collector.http_on(4318).await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _edge = Edge::start(
        dir.path(),
        port,
        "[[instances]]\nid = \"echo\"\nname = \"Echo\"\npreset = \"echo\"\n",
    )
    .await;
    let task = send(
        &format!("http://127.0.0.1:{port}/a2a/echo"),
        Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        json!({"message": message("m-off", "hi")}),
    )
    .await;
    let id = task["task"]["id"].as_str().unwrap();
    let control = format!("http://127.0.0.1:{port}/a2a/api/task?id={id}");
    // The method's span ends once the invocation is dropped, just after the answer.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let view: Value = reqwest::get(&control).await.unwrap().json().await.unwrap();
        assert_eq!(view["traceId"], "0af7651916cd43dd8448eb211c80319c");
        let names: Vec<String> = view["trace"]["spans"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| Some(s["name"].as_str()?.to_owned()))
            .collect();
        if ["SendMessage", "create-task", "POST"]
            .iter()
            .all(|n| names.iter().any(|m| m == n))
        {
            break;
        }
        assert!(Instant::now() < deadline, "the task's spans: {names:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(collector.spans().is_empty(), "no exporter, no spans sent");
}
