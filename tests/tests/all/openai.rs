//! The model-driven tool loop against a local OpenAI-compatible server that streams chunks and
//! asks for a tool call, twice: as the `openai` backend and as the `assistant` agent component
//! (docs/agents.md) granted the same model and connection. The tool reaches a remote
//! A2A agent (a second a2a-edge) and the answer carries its result; history carries across
//! messages of one context; errors reach the operator, not the caller; cancel drops the upstream
//! request.

use std::collections::BTreeMap;

use a2a_edge::config::Config;
use a2a_edge::sessions::preset::{
    AgentLimits, Backend, ComponentSettings, Grants, LlmGrant, OpenAiSettings, Preset,
};
use a2a_edge_tests::events::kind;
use a2a_edge_tests::model::{KEY, KEY_ENV, hold_key, model};
use a2a_edge_tests::{ASSISTANT_WASM, Server, instance, message};
use serde_json::json;

/// The tool loop under test.
#[derive(Clone, Copy, Debug)]
enum Loop {
    /// The host `openai` backend.
    Backend,
    /// The `assistant` agent component.
    Component,
}

const LOOPS: [Loop; 2] = [Loop::Backend, Loop::Component];

/// The connection both loops may call.
const REMOTE: &str = "edge b";

fn config(base: &str, l: Loop) -> Config {
    let system = "You are a test.";
    let backend = match l {
        Loop::Backend => Backend::OpenAi(OpenAiSettings {
            base_url: Some(base.into()),
            model: Some("test-model".into()),
            api_key_env: Some(KEY_ENV.into()),
            system_prompt: Some(system.into()),
            ..OpenAiSettings::default()
        }),
        Loop::Component => Backend::Component(ComponentSettings {
            component: "assistant".into(),
            grants: Grants {
                llm: Some(LlmGrant {
                    base_url: Some(base.into()),
                    model: Some("test-model".into()),
                    api_key_env: Some(KEY_ENV.into()),
                }),
                agents: vec![REMOTE.into()],
                ..Grants::default()
            },
            limits: AgentLimits::default(),
            config: BTreeMap::from([("systemPrompt".into(), system.into())]),
        }),
    };
    Config {
        presets: vec![Preset::new("llm", backend)],
        instances: vec![instance("bot", "llm")],
        ..Config::default()
    }
}

async fn start(base: &str, l: Loop) -> Server {
    start_on(config(base, l)).await
}

/// A server on `config` holding the model key and the assistant component.
async fn start_on(config: Config) -> Server {
    Server::start_with(config, |dir| {
        hold_key(dir, KEY);
        a2a_edge_tests::put_component(dir, "assistant", &std::fs::read(ASSISTANT_WASM).unwrap());
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_calls_a_remote_agent_as_a_tool_and_answers_with_its_result() {
    let remote = Server::default().await;
    for l in LOOPS {
        tool_call(&remote, l).await;
    }
}

async fn tool_call(remote: &Server, l: Loop) {
    let model = model().await;
    let s = start(&model.base, l).await;
    let card = format!("{}/a2a/demo/agent-card.json", remote.base());
    let (status, v) = s
        .action(json!({"action": "outbound.create", "name": REMOTE, "agentCardUrl": card}))
        .await;
    assert_eq!(status, 200, "{l:?}: {v}");

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
    assert_eq!(
        last["status"]["state"], "TASK_STATE_COMPLETED",
        "{l:?}: {last}"
    );
    let artifacts = last["artifacts"].as_array().unwrap();
    let text = artifacts
        .iter()
        .find(|a| a["artifactId"] == "response")
        .unwrap()["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(text, "Let me ask. The remote said: ping", "{l:?}");
    let call = artifacts
        .iter()
        .find(|a| a["artifactId"] == "tool-call-call_1")
        .unwrap_or_else(|| panic!("{l:?}: a tool-call artifact: {artifacts:?}"));
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
        "{l:?}: text and tool-call deltas stream"
    );

    let requests = model.requests();
    assert_eq!(
        requests.len(),
        2,
        "{l:?}: one request for the tool call, one for the answer"
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
        "{l:?}: the tool call reached the remote agent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_carries_across_messages_of_a_context_and_errors_are_clear() {
    for l in LOOPS {
        history_and_errors(l).await;
    }
}

async fn history_and_errors(l: Loop) {
    let model = model().await;
    let mut s = start(&model.base, l).await;
    let send = |id: &'static str, text: &'static str| json!({"message": {"messageId": id, "contextId": "ctx-h", "role": "ROLE_USER", "parts": [{"text": text}]}});
    let first = s
        .ok("/a2a/bot", "SendMessage", send("h-1", "first words"))
        .await;
    assert_eq!(
        first["task"]["artifacts"][0]["parts"][0]["text"], "You said: first words",
        "{l:?}: {first}"
    );
    s.restart().await;
    let second = s
        .ok("/a2a/bot", "SendMessage", send("h-2", "second words"))
        .await;
    assert_eq!(second["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let requests = model.requests();
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
    assert_eq!(
        messages, expected,
        "{l:?}: the history is rebuilt after a restart"
    );

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
    assert_eq!(said, "the agent is not available", "{l:?}");
    assert!(!failed.to_string().contains(KEY_ENV), "{l:?}: {failed}");
    assert!(why.contains(KEY_ENV), "{l:?}: {why}");
    // A wrong key: FAILED with the API's status.
    std::fs::write(
        s.dir.path().join("credentials.json"),
        json!({ KEY_ENV: "wrong-key-7f3a" }).to_string(),
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
    assert_eq!(said, "the agent is not available", "{l:?}");
    assert!(!failed.to_string().contains("HTTP 401"), "{l:?}: {failed}");
    assert!(why.contains("HTTP 401"), "{l:?}: {why}");
    assert!(
        !why.contains("wrong-key-7f3a"),
        "{l:?}: the key the API quoted is not kept: {why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_drops_the_upstream_model_request() {
    for l in LOOPS {
        let model = model().await;
        let s = start(&model.base, l).await;
        let r = s.ok("/a2a/bot", "SendMessage", json!({"message": message("slow-1", "slow thinking"), "configuration": {"returnImmediately": true}})).await;
        let id = r["task"]["id"].as_str().unwrap().to_owned();
        model.wait_requests(1).await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(
            !model.slow_stream_closed_within(0).await,
            "{l:?}: the model request is open while the turn runs"
        );
        s.ok("/a2a/bot", "CancelTask", json!({"id": id})).await;
        s.wait_state("/a2a/bot", &id, "TASK_STATE_CANCELED", 5)
            .await;
        assert!(
            model.slow_stream_closed_within(5).await,
            "{l:?}: the upstream request stayed open after the cancel"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_is_reached_over_tls_signed_by_the_sites_ca_through_the_proxy() {
    for l in LOOPS {
        over_tls(l).await;
    }
}

async fn over_tls(l: Loop) {
    use a2a_edge_tests::network::{ForwardProxy, TlsFront};
    let model = model().await;
    let front = TlsFront::start().await;
    let plain: url::Url = model.base.parse().unwrap();
    front.forward_to(plain.socket_addrs(|| None).unwrap()[0]);
    let proxy = ForwardProxy::start().await;
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("ca.pem"), &front.ca_pem).unwrap();
    let mut c = config(&format!("https://localhost:{}/v1", front.port), l);
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
    assert_eq!(
        r["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{l:?}: {r}"
    );
    assert_eq!(
        r["task"]["artifacts"][0]["parts"][0]["text"], "You said: over tls",
        "{l:?}"
    );
    assert_eq!(
        proxy.seen(),
        [format!("CONNECT localhost:{} HTTP/1.1", front.port)],
        "{l:?}: the model's URL is the operator's: asked for by name"
    );
}
