//! The `openai` session backend against a local OpenAI-compatible server that streams chunks and
//! asks for a tool call: the tool reaches a remote A2A agent (a second a2a-edge) and the answer
//! carries its result; history carries across messages of one context.

use a2a_edge::config::Config;
use a2a_edge::sessions::preset::{Backend, OpenAiSettings, Preset};
use a2a_edge_tests::events::kind;
use a2a_edge_tests::model::{KEY, SLOW_CLOSED, hold_key, model};
use a2a_edge_tests::{Server, instance, message};
use serde_json::json;

fn config(base: &str) -> Config {
    let settings = OpenAiSettings {
        base_url: Some(base.into()),
        model: Some("test-model".into()),
        api_key_env: Some("A2A_TEST_LLM_KEY".into()),
        system_prompt: Some("You are a test.".into()),
        ..OpenAiSettings::default()
    };
    let preset = Preset::new("llm", Backend::OpenAi(settings));
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
    Server::start_with(config, |dir| hold_key(dir, KEY)).await
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
