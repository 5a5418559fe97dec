//! Outbound A2A (docs/outbound.md "Outbound connections") against third-party servers started here: the Python a2a-sdk 1.3
//! agent (streaming and non-streaming cards), an A2A 0.3 agent on the SDK's 0.3 line, and a second a2a-edge.

use std::time::Duration;

use a2a_edge_tests::{RemoteAgent, Server};
use serde_json::{Value, json};

async fn ok(s: &Server, body: Value) -> Value {
    let (status, v) = s.action(body.clone()).await;
    assert_eq!(status, 200, "{body} → {v}");
    v
}

async fn refused(s: &Server, body: Value) -> String {
    let (status, v) = s.action(body.clone()).await;
    assert_eq!(status, 409, "{body} → {v}");
    v["message"].as_str().unwrap().to_owned()
}

/// Creates a connection to the agent at `card_url`; its id.
async fn create(s: &Server, name: &str, card_url: &str) -> String {
    let body = json!({"action": "outbound.create", "name": name, "agentCardUrl": card_url});
    ok(s, body).await["id"].as_str().unwrap().to_owned()
}

async fn connection(s: &Server, id: &str) -> Value {
    let (_, snap) = s.get("/a2a/api").await;
    snap["outbounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no outbound {id}: {snap}"))
}

async fn call(s: &Server, id: &str, prompt: &str) -> (u16, Value) {
    call_skill(s, id, "echo", prompt).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_python_agent_discovered_connected_and_called() {
    let remote = RemoteAgent::start(&[]).await;
    let s = Server::default().await;
    let v = ok(
        &s,
        json!({"action": "outbound.discover", "agentCardUrl": remote.card_url()}),
    )
    .await;
    let p = &v["preview"];
    assert_eq!(
        (p["name"].as_str(), p["version"].as_str()),
        (Some("Python Remote"), Some("3.1.4"))
    );
    assert_eq!(p["endpoint"], format!("{}/", remote.base));
    assert_eq!(p["capabilities"]["streaming"], true);
    assert_eq!(p["skills"].as_array().unwrap().len(), 2);
    let (_, snap) = s.get("/a2a/api").await;
    assert_eq!(snap["outbounds"], json!([]), "discover creates nothing");

    let id = create(&s, "py agent", &remote.card_url()).await;
    let c = connection(&s, &id).await;
    assert_eq!(
        (
            c["state"].as_str(),
            c["agentVersion"].as_str(),
            c["toolCount"].as_u64()
        ),
        (Some("connected"), Some("3.1.4"), Some(2))
    );
    let names: Vec<&str> = c["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a2a__py_agent__echo", "a2a__py_agent__web_search"]);

    // Streaming path: chunks assembled into the artifact text.
    let (status, v) = call(&s, &id, "hello over sse").await;
    assert_eq!(
        (status, v["result"].as_str()),
        (200, Some("echo: hello over sse")),
        "{v}"
    );
    // Remote FAILED → an error carrying the remote message.
    let m = refused(
        &s,
        json!({"action": "outbound.call", "id": id, "skill": "echo", "prompt": "fail hard"}),
    )
    .await;
    assert_eq!(m, "remote failure: fail hard");
    // INPUT_REQUIRED → the marker with the task id; the model (here: we) continues with taskId.
    let (_, v) = call(&s, &id, "ask something").await;
    let text = v["result"].as_str().unwrap();
    assert!(
        text.starts_with("[remote agent TASK_STATE_INPUT_REQUIRED task=")
            && text.ends_with("] which one?"),
        "{text}"
    );
    let task = text
        .split("task=")
        .nth(1)
        .unwrap()
        .split(']')
        .next()
        .unwrap();
    let v = ok(&s, json!({"action": "outbound.call", "id": id, "skill": "echo", "prompt": "the blue one", "taskId": task})).await;
    assert_eq!(v["result"], "echo: the blue one");

    let seen = remote.hook("seen").await;
    let seen = seen.as_array().unwrap();
    assert!(
        seen.iter().all(|m| m["skill"] == "echo"),
        "metadata.skill is set: {seen:?}"
    );
    assert!(
        seen.windows(2)
            .all(|w| w[0]["contextId"] == w[1]["contextId"]),
        "one stable contextId per caller: {seen:?}"
    );

    // Overrides and disabled skills shape the tools; the card URL never changes.
    ok(&s, json!({"action": "outbound.update", "id": id, "disabledSkills": ["web.search"], "skillOverrides": {"echo": {"description": "Says it back"}}})).await;
    let c = connection(&s, &id).await;
    assert_eq!(c["toolCount"], 1);
    assert!(
        c["tools"][0]["description"]
            .as_str()
            .unwrap()
            .contains("Says it back")
    );
    let m = refused(
        &s,
        json!({"action": "outbound.call", "id": id, "skill": "web.search", "prompt": "x"}),
    )
    .await;
    assert!(m.contains("offers no skill \"web.search\""), "{m}");
    assert!(
        refused(
            &s,
            json!({"action": "outbound.update", "id": id, "agentCardUrl": "http://elsewhere/"})
        )
        .await
        .contains("never changes agentCardUrl")
    );
    assert!(refused(&s, json!({"action": "outbound.update", "id": id, "skillOverrides": {"echo": {"colour": 1}}})).await.contains("skillOverrides"));
    assert!(
        refused(
            &s,
            json!({"action": "outbound.create", "name": "x", "agentCardUrl": "ftp://x"})
        )
        .await
        .contains("http(s) URL")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polling_python_agent_with_a_token_retries_and_cancels_on_abort() {
    let remote = RemoteAgent::start(&["--no-streaming", "--token", "remote-secret"]).await;
    let s = Server::default().await;
    let id = ok(&s, json!({"action": "outbound.create", "name": "poller", "agentCardUrl": remote.card_url(), "timeoutMs": 20000})).await["id"].as_str().unwrap().to_owned();
    let m = refused(
        &s,
        json!({"action": "outbound.call", "id": id, "skill": "echo", "prompt": "hi"}),
    )
    .await;
    assert!(
        m.contains("refused the credentials") && m.contains("a2a-edge outbound auth"),
        "a wrong or missing token is a clear error: {m}"
    );
    ok(
        &s,
        json!({"action": "outbound.setAuth", "id": id, "token": "remote-secret"}),
    )
    .await;
    assert_eq!(
        connection(&s, &id).await["bearerTokenEnv"],
        format!("A2A_OUTBOUND_{}", id.to_uppercase().replace('-', "_"))
    );
    let (status, v) = call(&s, &id, "hello by polling").await;
    assert_eq!(
        (status, v["result"].as_str()),
        (200, Some("echo: hello by polling")),
        "{v}"
    );
    let m = refused(
        &s,
        json!({"action": "outbound.call", "id": id, "skill": "echo", "prompt": "fail please"}),
    )
    .await;
    assert_eq!(m, "remote failure: fail please");

    // Transport errors and 5xx are retried at most twice.
    remote.fail_next(2).await;
    assert_eq!(
        call(&s, &id, "after two 503s").await.1["result"],
        "echo: after two 503s"
    );
    remote.fail_next(3).await;
    let m = refused(
        &s,
        json!({"action": "outbound.call", "id": id, "skill": "echo", "prompt": "after three"}),
    )
    .await;
    assert!(m.contains("HTTP 503"), "{m}");

    // The caller going away aborts the call; the remote task is canceled there.
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    let r = quick
        .post(format!("{}/a2a/api", s.base()))
        .json(&json!({"action": "outbound.call", "id": id, "skill": "echo", "prompt": "slow work"}))
        .send()
        .await;
    assert!(r.is_err(), "the caller gave up");
    let mut canceled = Value::Null;
    for _ in 0..50 {
        canceled = remote.hook("cancels").await;
        if canceled.as_array().is_some_and(|c| !c.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        canceled.as_array().map(Vec::len),
        Some(1),
        "CancelTask reached the remote: {canceled}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_that_goes_down_leaves_the_connection_failed_with_its_error() {
    let mut remote = RemoteAgent::start(&[]).await;
    let mut s = Server::default().await;
    let id = ok(
        &s,
        json!({"action": "outbound.create", "name": "flaky", "agentCardUrl": remote.card_url()}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    remote.stop();
    let m = refused(&s, json!({"action": "outbound.refresh", "id": id})).await;
    assert!(m.contains("connection refused"), "{m}");
    let c = connection(&s, &id).await;
    assert_eq!(c["state"], "failed");
    assert!(
        c["lastError"]
            .as_str()
            .unwrap()
            .contains("connection refused")
    );
    assert_eq!(c["toolCount"], 0, "a failed connection offers no tools");
    ok(&s, json!({"action": "outbound.disable", "id": id})).await;
    assert_eq!(connection(&s, &id).await["state"], "disconnected");

    // Created while the remote is down: saved as failed, answered 409.
    let m = refused(
        &s,
        json!({"action": "outbound.create", "name": "down", "agentCardUrl": remote.card_url()}),
    )
    .await;
    assert!(m.contains("saved as failed"), "{m}");
    s.restart().await;
    let (_, snap) = s.get("/a2a/api").await;
    assert_eq!(
        snap["outbounds"].as_array().unwrap().len(),
        2,
        "records survive a restart"
    );
    ok(&s, json!({"action": "outbound.remove", "id": id})).await;
    assert!(
        refused(&s, json!({"action": "outbound.remove", "id": id}))
            .await
            .contains("unknown outbound id")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_a2a_edge_is_a_remote_agent_too_declared_in_the_config() {
    let b = Server::default().await;
    let (status, _) = b
        .action(
            json!({"action": "inbound.setAuth", "id": "demo", "token": "edge-b-token-0123456789"}),
        )
        .await;
    assert_eq!(status, 200);
    let mut config = a2a_edge::config::Config::default();
    let decl = json!({"id": "edge-b", "name": "edge b", "agentCardUrl": format!("{}/a2a/demo/agent-card.json", b.base())});
    config
        .connections
        .push(serde_json::from_value(decl).unwrap());
    let a = Server::start(config).await;
    let mut c = Value::Null;
    for _ in 0..50 {
        c = connection(&a, "edge-b").await;
        if c["state"] == "connected" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        c["state"], "connected",
        "declared connections connect on start: {c}"
    );
    assert_eq!(c["tools"][0]["name"], "a2a__edge_b__chat");
    ok(
        &a,
        json!({"action": "outbound.setAuth", "id": "edge-b", "token": "edge-b-token-0123456789"}),
    )
    .await;
    let v = ok(&a, json!({"action": "outbound.call", "id": "edge-b", "skill": "chat", "prompt": "hello from edge a"})).await;
    assert_eq!(v["result"], "hello from edge a");
    let (_, snap) = b.get("/a2a/api").await;
    assert_eq!(snap["taskTotal"], 1, "the task ran on edge b");
    assert_eq!(snap["tasks"][0]["parts"][0]["text"], "hello from edge a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_behind_the_sites_ca_is_reached_through_the_proxy_at_the_address_the_guard_checked()
 {
    use a2a_edge::egress::EgressSettings;
    use a2a_edge_tests::network::{ForwardProxy, TlsFront};
    // Edge B behind TLS signed by the site's own CA; its card announces the front at an
    // address of its own (127.0.0.2), the card URL names it localhost (127.0.0.1).
    let front = TlsFront::start().await;
    let behind = a2a_edge::config::Config {
        public_base_url: Some(format!("https://127.0.0.2:{}", front.port)),
        ..Default::default()
    };
    let b = Server::start(behind).await;
    front.forward_to(b.running.as_ref().unwrap().addr);
    let proxy = ForwardProxy::start().await;
    let card = format!("https://localhost:{}/a2a/demo/agent-card.json", front.port);
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("ca.pem"), &front.ca_pem).unwrap();
    let egress = |ca: bool| a2a_edge::config::Config {
        egress: EgressSettings {
            ca_file: ca.then(|| site.path().join("ca.pem")),
            proxy: Some(proxy.url()),
            no_proxy: None,
        },
        ..Default::default()
    };

    // Trusting only public roots, the site's certificate is refused.
    let a = Server::start(egress(false)).await;
    let m = refused(
        &a,
        json!({"action": "outbound.discover", "agentCardUrl": card}),
    )
    .await;
    assert!(m.contains("certificate is not trusted"), "{m}");
    drop(a);

    let a = Server::start(egress(true)).await;
    let create = |allow: bool| json!({"action": "outbound.create", "name": format!("site {allow}"), "agentCardUrl": card, "allowPrivate": allow});
    let guarded = ok(&a, create(false)).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let endpoint = format!("CONNECT 127.0.0.2:{} ", front.port);
    let to_endpoint =
        |p: &ForwardProxy| p.seen().iter().filter(|l| l.starts_with(&endpoint)).count();
    // The endpoint the card announces is internal and not the card's host: refused by the guard
    // before the proxy is asked for it.
    let (status, v) = call_skill(&a, &guarded, "chat", "hello").await;
    assert_ne!(status, 200, "{v}");
    assert!(v.to_string().contains("internal address"), "{v}");
    // A body larger than the host takes at once is still being written when the guard refuses:
    // the refusal, not the closed body stream, is what the operator reads.
    let (status, v) = call_skill(&a, &guarded, "chat", &"x".repeat(256 << 10)).await;
    assert_ne!(status, 200, "{v}");
    assert!(v.to_string().contains("internal address"), "{v}");
    assert_eq!(to_endpoint(&proxy), 0, "{:?}", proxy.seen());

    let open = ok(&a, create(true)).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, v) = call_skill(&a, &open, "chat", "through the proxy").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["result"], "through the proxy");
    let seen = proxy.seen();
    assert!(
        to_endpoint(&proxy) > 0
            && seen
                .iter()
                .all(|l| l.starts_with("CONNECT ") && !l.contains("localhost")),
        "every tunnel asked for a checked address, never the name localhost: {seen:?}"
    );

    // Plain http through the proxy: the request names the checked address, not the name.
    let c = Server::default().await;
    let plain = c.base().replace("127.0.0.1", "localhost");
    let card = format!("{plain}/a2a/demo/agent-card.json");
    let create = json!({"action": "outbound.create", "name": "plain", "agentCardUrl": card, "allowPrivate": true});
    let id = ok(&a, create).await["id"].as_str().unwrap().to_owned();
    let (status, v) = call_skill(&a, &id, "chat", "in the clear").await;
    assert_eq!((status, &v["result"]), (200, &json!("in the clear")), "{v}");
    let at = c.base().trim_start_matches("http://").to_owned();
    let seen = proxy.seen();
    assert!(
        seen.iter()
            .any(|l| *l == format!("POST http://{at}/a2a/demo HTTP/1.1")),
        "{seen:?}"
    );
}

async fn call_skill(s: &Server, id: &str, skill: &str, prompt: &str) -> (u16, Value) {
    s.action(json!({"action": "outbound.call", "id": id, "skill": skill, "prompt": prompt}))
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_0_3_agent_is_discovered_connected_and_called_in_0_3() {
    for args in [&[][..], &["--no-streaming"][..]] {
        let remote = RemoteAgent::start_03(args).await;
        let s = Server::default().await;
        let v = ok(
            &s,
            json!({"action": "outbound.discover", "agentCardUrl": remote.card_url()}),
        )
        .await;
        let p = &v["preview"];
        assert_eq!(p["protocolVersion"], "0.3", "{v}");
        assert_eq!(p["endpoint"], format!("{}/", remote.base));
        let id = create(&s, "old agent", &remote.card_url()).await;
        let c = connection(&s, &id).await;
        assert_eq!(c["state"], "connected", "{c}");
        assert_eq!(c["tools"][0]["name"], "a2a__old_agent__echo");

        // The same result contract as a 1.0 agent's: the artifacts' text, the marker for input,
        // the remote message for a failure.
        let (status, v) = call(&s, &id, "hello there").await;
        assert_eq!(status, 200, "{args:?}: {v}");
        assert_eq!(v["result"], "echo: hello there", "{args:?}");
        let (_, v) = call(&s, &id, "ask me").await;
        let asked = v["result"].as_str().unwrap();
        assert!(
            asked.starts_with("[remote agent TASK_STATE_INPUT_REQUIRED task="),
            "{asked}"
        );
        let m = refused(
            &s,
            json!({"action": "outbound.call", "id": id, "skill": "echo", "prompt": "fail now"}),
        )
        .await;
        assert_eq!(m, "remote failure: fail now");
        let seen = remote.hook("seen").await;
        assert_eq!(seen.as_array().unwrap().len(), 3, "{seen}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_chains_instances_of_its_own_runtime_but_never_reaches_its_control_listener() {
    let s = Server::start_split(a2a_edge::config::Config::default()).await;
    let own = format!("{}/a2a/demo/agent-card.json", s.base());
    let id = create(&s, "myself", &own).await;
    assert_eq!(connection(&s, &id).await["state"], "connected");
    let (status, v) = call_skill(&s, &id, "chat", "hello me").await;
    assert_eq!(status, 200, "{v}");
    assert!(v.to_string().contains("hello me"), "{v}");

    let control = format!("{}/a2a/demo/agent-card.json", s.control_base());
    let body =
        json!({"action": "outbound.discover", "agentCardUrl": control, "allowPrivate": true});
    let said = refused(&s, body).await;
    assert!(
        said.contains("this runtime's own listener for its control API"),
        "{said}"
    );
}
