//! The `openai` session backend against a local OpenAI-compatible server that streams chunks and
//! asks for a tool call: the tool reaches a remote A2A agent (a second a2a-edge) and the answer
//! carries its result; history carries across messages of one context.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use a2a_edge::config::Config;
use a2a_edge::sessions::preset::{Backend, OpenAiSettings, Preset};
use a2a_edge_tests::events::kind;
use a2a_edge_tests::{Server, instance, message};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

const KEY: &str = "test-llm-key";

/// Set once the model server saw its slow stream's client go away.
static SLOW_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A chat-completions server: answers a tool result with "The remote said: <result>", a prompt
/// containing "use the tool" with a streamed tool call (prompt "ping"), a prompt starting "slow"
/// with one chunk and then nothing until the client leaves, anything else with
/// "You said: <prompt>". Records every request body.
async fn model() -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let log = log.clone();
            let service = hyper::service::service_fn(
                move |req: hyper::Request<hyper::body::Incoming>| {
                    let log = log.clone();
                    async move {
                        let authorized = req
                            .headers()
                            .get("authorization")
                            .is_some_and(|v| v == format!("Bearer {KEY}").as_str());
                        let given = req
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        let path_ok = req.uri().path() == "/v1/chat/completions";
                        let body: Value = serde_json::from_slice(
                            &req.into_body().collect().await.unwrap().to_bytes(),
                        )
                        .unwrap_or(Value::Null);
                        log.lock().unwrap().push(body.clone());
                        if !authorized || !path_ok {
                            return Ok::<_, Infallible>(
                                hyper::Response::builder()
                                    .status(401)
                                    .body(
                                        Full::new(Bytes::from(format!(
                                            "{{\"error\":{{\"message\":\"bad key: {given}\"}}}}"
                                        )))
                                        .boxed(),
                                    )
                                    .unwrap(),
                            );
                        }
                        let messages = body["messages"].as_array().cloned().unwrap_or_default();
                        let last = messages.last().cloned().unwrap_or(Value::Null);
                        let chunk = |delta: Value, finish: Option<&str>| {
                            format!(
                                "data: {}\n\n",
                                json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                            )
                        };
                        let mut sse = String::new();
                        if last["content"].as_str().unwrap_or("").starts_with("slow") {
                            let (tx, rx) = tokio::sync::mpsc::channel::<
                                Result<hyper::body::Frame<Bytes>, Infallible>,
                            >(4);
                            tx.send(Ok(hyper::body::Frame::data(Bytes::from(chunk(
                                json!({"content": "thinking"}),
                                None,
                            )))))
                            .await
                            .unwrap();
                            tokio::spawn(async move {
                                tx.closed().await;
                                SLOW_CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
                            });
                            let body =
                                http_body_util::StreamBody::new(tokio_stream_from(rx)).boxed();
                            return Ok(hyper::Response::builder()
                                .header("content-type", "text/event-stream")
                                .body(body)
                                .unwrap());
                        }
                        if last["role"] == "tool" {
                            sse += &chunk(json!({"content": "The remote said: "}), None);
                            sse += &chunk(json!({"content": last["content"]}), Some("stop"));
                        } else if last["content"]
                            .as_str()
                            .unwrap_or("")
                            .contains("use the tool")
                        {
                            let tool = body["tools"][0]["function"]["name"]
                                .as_str()
                                .unwrap_or("none")
                                .to_owned();
                            sse += &chunk(json!({"content": "Let me ask. "}), None);
                            sse += &chunk(
                                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{\"prom"}}]}),
                                None,
                            );
                            sse += &chunk(
                                json!({"tool_calls": [{"index": 0, "function": {"arguments": "pt\": \"ping\"}"}}]}),
                                Some("tool_calls"),
                            );
                        } else {
                            sse += &chunk(json!({"content": "You said: "}), None);
                            sse += &chunk(json!({"content": last["content"]}), Some("stop"));
                        }
                        sse += "data: [DONE]\n\n";
                        Ok(hyper::Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(Full::new(Bytes::from(sse)).boxed())
                            .unwrap())
                    }
                },
            );
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (base, seen)
}

/// A receiver as a stream of body frames.
fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<hyper::body::Frame<Bytes>, Infallible>>,
) -> impl futures_util::Stream<Item = Result<hyper::body::Frame<Bytes>, Infallible>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

fn config(base: &str) -> Config {
    let settings = OpenAiSettings {
        base_url: Some(base.into()),
        model: Some("test-model".into()),
        api_key_env: Some("A2A_TEST_LLM_KEY".into()),
        system_prompt: Some("You are a test.".into()),
        ..OpenAiSettings::default()
    };
    let preset = Preset {
        id: "llm".into(),
        name: None,
        description: None,
        skills: Vec::new(),
        default: false,
        backend: Backend::OpenAi(settings),
    };
    Config {
        presets: vec![preset],
        instances: vec![instance("bot", "llm")],
        ..Config::default()
    }
}

async fn start(base: &str) -> Server {
    start_on(config(base)).await
}

/// A server on `config` holding the model key.
async fn start_on(config: Config) -> Server {
    Server::start_with(config, |dir| {
        use std::os::unix::fs::PermissionsExt;
        let file = dir.join("credentials.json");
        std::fs::write(&file, json!({"A2A_TEST_LLM_KEY": KEY}).to_string()).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_a_remote_agent_as_a_tool_and_answers_with_its_result() {
    let (base, seen) = model().await;
    let remote = Server::default().await;
    let s = start(&base).await;
    let card = format!("{}/a2a/demo/agent-card.json", remote.base());
    let (status, v) = s
        .action(json!({"action": "outbound.create", "name": "edge b", "agentCardUrl": card}))
        .await;
    assert_eq!(status, 200, "{v}");

    let events = s
        .stream(
            "/a2a/bot",
            "SendStreamingMessage",
            json!({"message": message("m-tool", "please use the tool")}),
            None,
        )
        .await;
    let events = events.all().await;
    let last = &events.last().unwrap().1["result"]["task"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED", "{last}");
    let artifacts = last["artifacts"].as_array().unwrap();
    let text = artifacts
        .iter()
        .find(|a| a["artifactId"] == "response")
        .unwrap()["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(text, "Let me ask. The remote said: ping");
    let call = artifacts
        .iter()
        .find(|a| a["artifactId"] == "tool-call-call_1")
        .unwrap_or_else(|| panic!("a tool-call artifact: {artifacts:?}"));
    assert_eq!(
        call["parts"][0]["data"]["name"], "a2a__edge_b__chat",
        "{call}"
    );
    assert!(
        events
            .iter()
            .filter(|e| kind(e) == "artifactUpdate")
            .count()
            >= 4,
        "text and tool-call deltas stream"
    );

    let requests = seen.lock().unwrap().clone();
    assert_eq!(
        requests.len(),
        2,
        "one request for the tool call, one for the answer"
    );
    assert_eq!(requests[0]["model"], "test-model");
    assert_eq!(requests[0]["stream"], true);
    assert_eq!(
        requests[0]["messages"][0],
        json!({"role": "system", "content": "You are a test."})
    );
    let tool = &requests[0]["tools"][0]["function"];
    assert_eq!(tool["name"], "a2a__edge_b__chat");
    assert_eq!(tool["parameters"]["required"], json!(["prompt"]));
    let second = requests[1]["messages"].as_array().unwrap();
    assert_eq!(
        second[second.len() - 2]["tool_calls"][0]["function"]["arguments"],
        "{\"prompt\": \"ping\"}"
    );
    assert_eq!(
        second.last().unwrap(),
        &json!({"role": "tool", "tool_call_id": "call_1", "content": "ping"})
    );
    let (_, b) = remote.get("/a2a/api").await;
    assert_eq!(
        b["tasks"][0]["parts"][0]["text"], "ping",
        "the tool call reached the remote agent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_carries_across_messages_of_a_context_and_errors_are_clear() {
    let (base, seen) = model().await;
    let mut s = start(&base).await;
    let send = |id: &'static str, text: &'static str| json!({"message": {"messageId": id, "contextId": "ctx-h", "role": "ROLE_USER", "parts": [{"text": text}]}});
    let first = s
        .ok("/a2a/bot", "SendMessage", send("h-1", "first words"))
        .await;
    assert_eq!(
        first["task"]["artifacts"][0]["parts"][0]["text"],
        "You said: first words"
    );
    s.restart().await;
    let second = s
        .ok("/a2a/bot", "SendMessage", send("h-2", "second words"))
        .await;
    assert_eq!(second["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let requests = seen.lock().unwrap().clone();
    let messages: Vec<(String, String)> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("system", "You are a test."),
        ("user", "first words"),
        ("assistant", "You said: first words"),
        ("user", "second words"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(messages, expected, "the history is rebuilt after a restart");

    // No key: FAILED; the caller is told the agent is not available, the operator which
    // secret to set.
    std::fs::write(s.dir.path().join("credentials.json"), "{}").unwrap();
    s.restart().await;
    let failed = s
        .ok(
            "/a2a/bot",
            "SendMessage",
            json!({"message": message("h-3", "x")}),
        )
        .await;
    let (said, why) = s.failure(&failed).await;
    assert_eq!(said, "the agent is not available");
    assert!(!failed.to_string().contains("A2A_TEST_LLM_KEY"), "{failed}");
    assert!(why.contains("A2A_TEST_LLM_KEY"), "{why}");
    // A wrong key: FAILED with the API's status.
    std::fs::write(
        s.dir.path().join("credentials.json"),
        json!({"A2A_TEST_LLM_KEY": "wrong-key-7f3a"}).to_string(),
    )
    .unwrap();
    s.restart().await;
    let failed = s
        .ok(
            "/a2a/bot",
            "SendMessage",
            json!({"message": message("h-4", "x")}),
        )
        .await;
    let (said, why) = s.failure(&failed).await;
    assert_eq!(said, "the agent is not available");
    assert!(!failed.to_string().contains("HTTP 401"), "{failed}");
    assert!(why.contains("HTTP 401"), "{why}");
    assert!(
        !why.contains("wrong-key-7f3a"),
        "the key the API quoted is not kept: {why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_drops_the_upstream_model_request() {
    let (base, _) = model().await;
    let s = start(&base).await;
    let r = s.ok("/a2a/bot", "SendMessage", json!({"message": message("slow-1", "slow thinking"), "configuration": {"returnImmediately": true}})).await;
    let id = r["task"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !SLOW_CLOSED.load(std::sync::atomic::Ordering::SeqCst),
        "the model request is open while the turn runs"
    );
    s.ok("/a2a/bot", "CancelTask", json!({"id": id})).await;
    s.wait_state("/a2a/bot", &id, "TASK_STATE_CANCELED", 5)
        .await;
    for _ in 0..50 {
        if SLOW_CLOSED.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("the upstream request stayed open after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_is_reached_over_tls_signed_by_the_sites_ca_through_the_proxy() {
    use a2a_edge_tests::network::{ForwardProxy, TlsFront};
    let (base, _) = model().await;
    let front = TlsFront::start().await;
    let plain: url::Url = base.parse().unwrap();
    front.forward_to(plain.socket_addrs(|| None).unwrap()[0]);
    let proxy = ForwardProxy::start().await;
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("ca.pem"), &front.ca_pem).unwrap();
    let mut c = config(&format!("https://localhost:{}/v1", front.port));
    c.egress = a2a_edge::egress::EgressSettings {
        ca_file: Some(site.path().join("ca.pem")),
        proxy: Some(proxy.url()),
        no_proxy: None,
    };
    let s = start_on(c).await;
    let r = s
        .ok(
            "/a2a/bot",
            "SendMessage",
            json!({"message": message("tls-1", "over tls")}),
        )
        .await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(
        r["task"]["artifacts"][0]["parts"][0]["text"],
        "You said: over tls"
    );
    assert_eq!(
        proxy.seen(),
        [format!("CONNECT localhost:{} HTTP/1.1", front.port)],
        "the model's URL is the operator's: asked for by name"
    );
}
