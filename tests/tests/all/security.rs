//! What a stranger, a web page in the operator's browser or a proxy on the same host can and
//! cannot do, and how the control surface refuses bad input (docs/control.md "Control API",
//! docs/protocol.md "What is served", docs/outbound.md "Outbound connections").

use std::time::Duration;

use a2a_edge::config::Config;
use a2a_edge_tests::jsonrpc::request;
use a2a_edge_tests::{Server, instance, message};
use serde_json::{Value, json};

async fn instance_ids(s: &Server) -> Vec<String> {
    let (_, snap) = s.get("/a2a/api").await;
    snap["inbounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_site_requests_and_dns_rebinding_cannot_drive_the_control_api() {
    let s = Server::default().await;
    let create = r#"{"action":"inbound.create","name":"evil","description":"x","version":"1"}"#;
    let remove = r#"{"action":"inbound.remove","id":"demo"}"#;
    let post = reqwest::Method::POST;
    /// Method, headers, body, status, what the refusal must say, why.
    type Case<'a> = (
        reqwest::Method,
        Vec<(&'a str, &'a str)>,
        Option<&'a str>,
        u16,
        &'a str,
        &'a str,
    );
    let cases: [Case; 5] = [
        // A cross-site form or fetch without preflight can only send text/plain (or form types).
        (
            post.clone(),
            vec![
                ("content-type", "text/plain"),
                ("origin", "http://evil.example"),
            ],
            Some(create),
            403,
            "",
            "a text/plain POST from another origin",
        ),
        (
            post.clone(),
            vec![("content-type", "text/plain")],
            Some(remove),
            415,
            "application/json",
            "a POST must be application/json",
        ),
        (
            post.clone(),
            vec![
                ("content-type", "application/json"),
                ("origin", "http://evil.example"),
            ],
            Some(remove),
            403,
            "",
            "a JSON POST from another origin",
        ),
        (
            post,
            vec![
                ("content-type", "application/json"),
                ("sec-fetch-site", "cross-site"),
            ],
            Some(remove),
            403,
            "",
            "a JSON POST a browser marks cross-site",
        ),
        // DNS rebinding: the page's own name resolves to 127.0.0.1, so the Host header gives it
        // away.
        (
            reqwest::Method::GET,
            vec![("host", "attacker.example:3080")],
            None,
            403,
            "Host",
            "a rebound name",
        ),
    ];
    for (method, headers, body, status, says, why) in cases {
        let (got, v) = s.control(method, "/a2a/api", &headers, body).await;
        assert_eq!(got, status, "{why}: {v}");
        assert!(
            v["message"].as_str().unwrap_or("").contains(says),
            "{why}: {v}"
        );
    }
    assert_eq!(
        instance_ids(&s).await,
        ["demo"],
        "nothing was created or removed"
    );
    // The operator's own page and the CLI still work.
    let port = s.running.as_ref().unwrap().addr.port();
    let own = format!("http://localhost:{port}");
    let (status, v) = s
        .control(
            reqwest::Method::POST,
            "/a2a/api",
            &[
                ("content-type", "application/json"),
                ("host", &format!("localhost:{port}")),
                ("origin", &own),
            ],
            Some(create),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_listener_of_its_own_keeps_the_control_api_off_the_proxied_port() {
    let s = Server::start_split(Config::default()).await;
    let public = s.base();
    assert_ne!(public, s.control_base());
    for path in ["/a2a/api", "/a2a/api/metrics", "/a2a/ui"] {
        let r = s.http.get(format!("{public}{path}")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 404, "{path} on the public listener");
    }
    let r = s
        .http
        .post(format!("{public}/a2a/api"))
        .json(&json!({"action": "inbound.disable", "id": "demo"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(
        s.get("/a2a/api/metrics").await.0,
        200,
        "served on the control listener"
    );
    let card = s
        .http
        .get(format!("{}/a2a/demo/agent-card.json", s.control_base()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        card.status().as_u16(),
        404,
        "the control listener serves no agents"
    );
    assert_eq!(
        s.http
            .get(format!("{public}/a2a/demo/agent-card.json"))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    // A local proxy forwarding to the control port is refused on any listener.
    for header in [
        "x-forwarded-for",
        "forwarded",
        "x-real-ip",
        "x-forwarded-host",
    ] {
        let (status, v) = s
            .control(
                reqwest::Method::GET,
                "/a2a/api/metrics",
                &[(header, "127.0.0.2")],
                None,
            )
            .await;
        assert_eq!(status, 403, "{header}: {v}");
    }
    let single = Server::default().await;
    let (status, _) = single
        .control(
            reqwest::Method::POST,
            "/a2a/api",
            &[
                ("content-type", "application/json"),
                ("x-forwarded-for", "127.0.0.2"),
            ],
            Some(r#"{"action":"inbound.disable","id":"demo"}"#),
        )
        .await;
    assert_eq!(
        status, 403,
        "forwarding headers are refused on the shared listener too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_beyond_loopback_needs_a_public_base_url() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.runtime.cache_dir = Some(a2a_edge_tests::shared_cache());
    let listen = a2a_edge::Listen {
        public: "0.0.0.0:0".parse().unwrap(),
        control: None,
    };
    let err = a2a_edge::Running::start_on(config.clone(), dir.path().to_owned(), listen)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("publicBaseUrl"), "{err}");
    let err = a2a_edge::Running::start_on(
        config.clone(),
        dir.path().to_owned(),
        a2a_edge::Listen {
            public: "127.0.0.1:0".parse().unwrap(),
            control: Some("0.0.0.0:0".parse().unwrap()),
        },
    )
    .await
    .err()
    .expect("refused")
    .to_string();
    assert!(err.contains("loopback"), "{err}");
    config.public_base_url = Some("https://agents.example.com".into());
    let running = a2a_edge::Running::start_on(config, dir.path().to_owned(), listen)
        .await
        .unwrap();
    let card: Value = reqwest::get(format!(
        "http://127.0.0.1:{}/a2a/demo/agent-card.json",
        running.addr.port()
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "https://agents.example.com/a2a/demo"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_and_paths_never_reach_the_file_system_or_other_routes() {
    let s = Server::default().await;
    let data_dir = s.dir.path().display().to_string();
    for name in ["../../dir/x", "/etc/passwd", "a/b", "-x", "X"] {
        let (status, v) = s
            .action(json!({"action": "component.reload", "name": name}))
            .await;
        assert_eq!(status, 409, "{name}: {v}");
        let m = v["message"].as_str().unwrap();
        assert!(
            m.contains("is not valid") && !m.contains(&data_dir),
            "{name}: {m}"
        );
    }
    let (_, v) = s
        .action(json!({"action": "component.reload", "name": "absent"}))
        .await;
    let m = v["message"].as_str().unwrap();
    assert!(
        m.contains("there is no component \"absent\"")
            && !m.contains(&data_dir)
            && !m.contains("No such file"),
        "{m}"
    );
    s.put_component("garbage", b"this is not webassembly at all");
    let (_, v) = s
        .action(json!({"action": "component.reload", "name": "garbage"}))
        .await;
    let m = v["message"].as_str().unwrap();
    assert!(
        m.contains("not WebAssembly") && !m.contains("0x") && !m.contains(&data_dir),
        "refused in words: {m}"
    );

    let create = |path: &str| json!({"action": "inbound.create", "name": "p", "description": "d", "version": "1", "endpointPath": path});
    for path in [
        "/a2a/../api",
        "/a2a//api",
        "/a2a/%61pi",
        "/a2a/x;y",
        "/a2a/x\u{0}",
        "/a2a/\u{202e}x",
        "/a2a/api/x",
        "/a2a/ui",
        "/a2a/demo/x",
        "/a2a/demo/agent-card.json",
        "/a2a",
    ] {
        let (status, v) = s.action(create(path)).await;
        assert_eq!(status, 409, "{path:?} was accepted: {v}");
    }
    let (status, v) = s.action(create("/agents/v1.2/reports_~-x/")).await;
    assert_eq!(status, 200, "{v}");
    let id = v["id"].as_str().unwrap();
    let (_, snap) = s.get("/a2a/api").await;
    let made = snap["inbounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(made["endpointPath"], "/agents/v1.2/reports_~-x");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_or_weak_token_never_removes_auth() {
    let s = Server::default().await;
    let strong = "0123456789abcdef-strong";
    assert_eq!(
        s.action(json!({"action": "inbound.setAuth", "id": "demo", "token": strong}))
            .await
            .0,
        200
    );
    // An omitted token clears (the seed's contract); an empty, blank or weak one never does.
    for body in [
        json!({"token": ""}),
        json!({"token": "   "}),
        json!({"token": "short"}),
    ] {
        let mut b = body.clone();
        b["action"] = json!("inbound.setAuth");
        b["id"] = json!("demo");
        let (status, v) = s.action(b).await;
        assert_eq!(status, 409, "{body} → {v}");
    }
    let (status, _) = s.rpc("/a2a/demo", "GetTask", json!({"id": "x"})).await;
    assert_eq!(status, 401, "still protected");
    let (status, v) = s
        .action(
            json!({"action": "inbound.setAuth", "id": "demo", "token": "short", "allowWeak": true}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, _) = s
        .action(json!({"action": "inbound.setAuth", "id": "demo", "clear": true}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        s.rpc("/a2a/demo", "GetTask", json!({"id": "x"})).await.0,
        200,
        "cleared only on request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive_and_one_header_only() {
    let s = Server::default().await;
    let token = "0123456789abcdef-bearer";
    assert_eq!(
        s.action(json!({"action": "inbound.setAuth", "id": "demo", "token": token}))
            .await
            .0,
        200
    );
    let url = format!("{}/a2a/demo", s.base());
    let get = || request(&s.http, &url, "GetTask", json!({"id": "x"}));
    for scheme in ["Bearer", "bearer", "BEARER", "BeArEr"] {
        let r = get()
            .header("authorization", format!("{scheme} {token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{scheme}");
    }
    let r = get()
        .header("authorization", format!("Bearer {token}"))
        .header("authorization", "Bearer other")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], -32600);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_extended_card_needs_authentication() {
    let s = Server::default().await;
    let card: Value = s
        .http
        .get(format!("{}/a2a/demo/agent-card.json", s.base()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["extendedAgentCard"], false);
    assert_eq!(
        s.code("/a2a/demo", "GetExtendedAgentCard", json!({})).await,
        -32007
    );
    let token = "0123456789abcdef-extended";
    assert_eq!(
        s.action(json!({"action": "inbound.setAuth", "id": "demo", "token": token}))
            .await
            .0,
        200
    );
    let card: Value = s
        .http
        .get(format!("{}/a2a/demo/agent-card.json", s.base()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    let url = format!("{}/a2a/demo", s.base());
    let extended = || request(&s.http, &url, "GetExtendedAgentCard", Value::Null);
    let r = extended().send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let v: Value = extended()
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["result"]["name"], "demo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_calls_never_reach_internal_addresses_a_remote_card_announces() {
    // Edge B announces its endpoint at 127.0.0.1; A knows B's card as http://localhost:…, so the
    // announced endpoint is another host on a loopback address.
    let b = Server::default().await;
    let card_url = format!(
        "http://localhost:{}/a2a/demo/agent-card.json",
        b.running.as_ref().unwrap().addr.port()
    );
    let a = Server::default().await;
    let (status, v) = a
        .action(json!({"action": "outbound.create", "name": "b", "agentCardUrl": card_url}))
        .await;
    assert_eq!(
        status, 200,
        "the operator's card URL is trusted as given: {v}"
    );
    let id = v["id"].as_str().unwrap().to_owned();
    let (status, v) = a
        .action(json!({"action": "outbound.call", "id": id, "skill": "chat", "prompt": "hi"}))
        .await;
    assert_eq!(status, 409, "{v}");
    let (_, snap) = b.get("/a2a/api").await;
    assert_eq!(
        snap["taskTotal"], 0,
        "the announced internal endpoint was never called"
    );
    let (status, v) = a
        .action(json!({"action": "outbound.update", "id": id, "allowPrivate": true}))
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = a
        .action(json!({"action": "outbound.call", "id": id, "skill": "chat", "prompt": "hi"}))
        .await;
    assert_eq!(
        (status, v["result"].as_str()),
        (200, Some("hi")),
        "allowPrivate lets it through: {v}"
    );
    // Link-local metadata addresses are refused at once, whoever names them.
    let started = std::time::Instant::now();
    let (status, v) = a.action(json!({"action": "outbound.discover", "agentCardUrl": "http://169.254.169.254/latest/meta-data", "allowPrivate": true})).await;
    assert_eq!(status, 409, "{v}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "refused, not timed out"
    );
}

const TCK: &str = "/a2a/tck";

async fn send(s: &Server, m: Value) -> Value {
    s.ok(TCK, "SendMessage", json!({"message": m})).await["task"].clone()
}

fn with(mut m: Value, key: &str, v: &str) -> Value {
    m[key] = json!(v);
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_message_id_is_never_answered_with_a_task_it_does_not_name() {
    let mut s = Server::start(a2a_edge_tests::scripted(|_| {})).await;
    let first = message("tck-multi-turn-1", "hi");
    let a = send(&s, first.clone()).await;
    let a_id = a["id"].as_str().unwrap().to_owned();
    assert_eq!(a["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        send(&s, first.clone()).await["id"],
        a_id,
        "an identical resend is a retry"
    );
    assert_eq!(
        s.ok(TCK, "ListTasks", json!({})).await["totalSize"],
        1,
        "and runs no second turn"
    );

    let elsewhere = send(&s, with(first.clone(), "contextId", "ctx-other")).await;
    assert_ne!(
        elsewhere["id"], a_id,
        "a resend in another context is a new message"
    );
    assert_eq!(
        elsewhere["contextId"], "ctx-other",
        "the context is honoured"
    );

    let b = send(&s, message("tck-multi-turn-2", "hi")).await;
    let b_id = b["id"].as_str().unwrap().to_owned();
    let into_b = send(
        &s,
        with(message("tck-multi-turn-1", "more"), "taskId", &b_id),
    )
    .await;
    assert_eq!(
        into_b["id"], b_id,
        "a message naming task B is answered with B"
    );
    let history = s.ok(TCK, "GetTask", json!({"id": b_id})).await["history"].clone();
    assert_eq!(
        history
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "ROLE_USER")
            .count(),
        2,
        "B took the message: {history}"
    );

    let done = send(
        &s,
        with(message("tck-multi-turn-1", "done"), "taskId", &a_id),
    )
    .await;
    assert_eq!(
        (done["id"].as_str(), done["status"]["state"].as_str()),
        (Some(a_id.as_str()), Some("TASK_STATE_COMPLETED")),
        "a follow-up reusing the creating id continues"
    );

    let again = send(&s, first.clone()).await;
    assert_ne!(again["id"], a_id, "its task changed since: a new message");
    assert_eq!(again["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    s.restart().await;
    assert_eq!(
        send(&s, first.clone()).await["id"],
        again["id"],
        "retries are recognised after a restart"
    );

    // A canceled task is changed too.
    let c = send(&s, message("tck-multi-turn-3", "hi")).await;
    s.ok(TCK, "CancelTask", json!({"id": c["id"]})).await;
    let after = send(&s, message("tck-multi-turn-3", "hi")).await;
    assert_ne!(after["id"], c["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_resends_run_one_turn_and_are_answered_with_its_settled_task() {
    let s = Server::start(a2a_edge_tests::scripted(|_| {})).await;
    // A blocking send's task is written once, when it settles: resends that arrive meanwhile
    // wait for that write instead of starting a second turn, blocking or streaming alike.
    let m = message("tck-delayed-complete-once", "hi");
    let blocking = futures_util::future::join_all((0..4).map(|_| send(&s, m.clone())));
    let streaming = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        s.stream(TCK, "SendStreamingMessage", json!({"message": m}), None)
            .await
            .all()
            .await
    };
    // The turn takes 1.5 s; each waiting resend is answered once the one before it has read
    // the task, never after an idle instance's 30 s (kept instances once held the id).
    let (answers, frames) = tokio::time::timeout(Duration::from_secs(15), async {
        tokio::join!(blocking, streaming)
    })
    .await
    .expect("every resend is answered within seconds of the turn settling");
    let id = &answers[0]["id"];
    for a in &answers {
        assert_eq!(
            (&a["id"], a["status"]["state"].as_str()),
            (id, Some("TASK_STATE_COMPLETED")),
            "{a}"
        );
    }
    assert_eq!(frames.len(), 1, "a resend streams the task as it stands");
    assert_eq!(frames[0].1["result"]["task"]["id"], *id);
    assert_eq!(
        s.ok(TCK, "ListTasks", json!({})).await["totalSize"],
        1,
        "one turn ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standard_clients_without_a_skill_reach_the_first_announced_skill() {
    let preset: a2a_edge::sessions::preset::Preset = serde_json::from_value(json!({
        "id": "loud", "backend": "echo", "skills": [{"id": "shout", "description": "Shouts"}, {"id": "whisper"}]
    }))
    .unwrap();
    let config = Config {
        presets: vec![preset],
        instances: vec![instance("loud", "loud")],
        ..Config::default()
    };
    let s = Server::start(config).await;
    let t = s
        .ok(
            "/a2a/loud",
            "SendMessage",
            json!({"message": message("m1", "hello")}),
        )
        .await;
    assert_eq!(t["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
    assert_eq!(t["task"]["metadata"]["skill"], "shout");
    let mut chat = message("m2", "hello");
    chat["metadata"] = json!({"skill": "chat"});
    assert_eq!(
        s.code("/a2a/loud", "SendMessage", json!({"message": chat}))
            .await,
        -32602
    );
    let streamed = s
        .stream(
            "/a2a/loud",
            "SendStreamingMessage",
            json!({"message": chat}),
            None,
        )
        .await
        .json()
        .await;
    assert_eq!(
        streamed["error"]["code"], -32602,
        "the same on the streaming path"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_input_is_refused_and_notifications_get_no_reply() {
    let s = Server::start(a2a_edge_tests::scripted(|_| {})).await;
    let raw = json!({"messageId": "m-raw", "role": "ROLE_USER", "parts": [{"raw": "not base64!", "filename": "x.bin"}]});
    assert_eq!(
        s.code(TCK, "SendMessage", json!({"message": raw})).await,
        -32602
    );
    let good = json!({"messageId": "m-raw2", "role": "ROLE_USER", "parts": [{"raw": "aGVsbG8=", "filename": "x.bin"}]});
    s.ok(TCK, "SendMessage", json!({"message": good})).await;
    for bad in ["2026-02-31T00:00:00Z", "2026-01-01T00:00:60Z"] {
        assert_eq!(
            s.code(TCK, "ListTasks", json!({"statusTimestampAfter": bad}))
                .await,
            -32602,
            "{bad}"
        );
    }
    let notification = json!({"jsonrpc": "2.0", "method": "SendMessage", "params": {"message": message("tck-complete-task-n", "x")}});
    let r = s
        .http
        .post(format!("{}{TCK}", s.base()))
        .json(&notification)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert!(r.bytes().await.unwrap().is_empty());
    assert_eq!(
        s.ok(TCK, "ListTasks", json!({})).await["totalSize"],
        1,
        "the notification ran nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_answer_429_with_retry_after() {
    let s = Server::start(a2a_edge_tests::scripted(|d| {
        let l = d.limits.as_mut().unwrap();
        l.rate_per_second = 0.2;
        l.rate_burst = 1;
    }))
    .await;
    s.ok(
        TCK,
        "SendMessage",
        json!({"message": message("tck-complete-task-1", "x")}),
    )
    .await;
    for streaming in [false, true] {
        let method = if streaming {
            "SendStreamingMessage"
        } else {
            "SendMessage"
        };
        let params = json!({"message": message("tck-complete-task-2", "x")});
        let r = request(&s.http, &format!("{}{TCK}", s.base()), method, params)
            .header(
                "accept",
                if streaming {
                    "text/event-stream"
                } else {
                    "application/json"
                },
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 429, "streaming {streaming}");
        let after: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=5).contains(&after), "{after}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (
                v["error"]["code"].as_i64(),
                v["error"]["data"][0]["reason"].as_str()
            ),
            (Some(-32000), Some("RATE_LIMITED")),
            "{v}"
        );
    }
    let (_, m) = s.get("/a2a/api/metrics").await;
    assert!(
        m["requests"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["outcome"] == "RATE_LIMITED"),
        "{m}"
    );
    assert_eq!(m["gateRejections"]["rate"], 2, "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_records_are_reconciled_on_every_start() {
    let mut config = a2a_edge_tests::config_with(&[]);
    config.instances.push(instance("bot", "echo"));
    let mut s = Server::start(config).await;
    assert_eq!(s.action(json!({"action": "inbound.update", "id": "bot", "name": "renamed by the API", "version": "9.9"})).await.0, 200);
    s.config.instances[0].preset = Some("scripted".into());
    s.config.instances[0].name = "Bot".into();
    s.restart().await;
    let (_, snap) = s.get("/a2a/api").await;
    let bot = snap["inbounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "bot")
        .unwrap()
        .clone();
    assert_eq!(
        (
            bot["preset"].as_str(),
            bot["name"].as_str(),
            bot["version"].as_str()
        ),
        (Some("scripted"), Some("Bot"), Some("9.9")),
        "declared fields win, the others stay: {bot}"
    );

    s.running.take().unwrap().stop().await;
    s.config.instances[0].preset = Some("nope".into());
    s.config.source = Some("/etc/a2a-edge/edge.toml".into());
    let err = format!(
        "{:#}",
        s.try_boot()
            .await
            .err()
            .expect("an invalid declaration refuses the start")
    );
    assert!(
        err.contains("/etc/a2a-edge/edge.toml")
            && err.contains("[[instances]] entry 1")
            && err.contains("\"preset\"")
            && err.contains("nope"),
        "{err}"
    );
    s.config.instances[0].preset = None;
    s.config
        .connections
        .push(serde_json::from_value(json!({"name": "r", "agentCardUrl": "ftp://x"})).unwrap());
    let err = format!("{:#}", s.try_boot().await.err().expect("refused"));
    assert!(
        err.contains("[[connections]] entry 1") && err.contains("agentCardUrl"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_surface_answers_failures_in_one_shape() {
    let s = Server::start(a2a_edge_tests::config_with(&[(
        "small",
        "a2a-server",
        Some(1024),
    )]))
    .await;
    let post = |path: &str, body: String| {
        s.http
            .post(format!("{}{path}", s.base()))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    for (r, status) in [
        (post("/a2a/nobody", "{}".into()).await.unwrap(), 404),
        (
            s.http
                .get(format!("{}/a2a/small", s.base()))
                .send()
                .await
                .unwrap(),
            405,
        ),
        (post("/a2a/small", "x".repeat(4096)).await.unwrap(), 413),
    ] {
        assert_eq!(r.status().as_u16(), status);
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            v["jsonrpc"], "2.0",
            "HTTP {status} is a JSON-RPC envelope: {v}"
        );
        assert!(
            v["error"]["code"].is_i64() && v["error"]["message"].is_string(),
            "{v}"
        );
    }
    // Control reads and actions fail alike.
    for (status, v) in [
        s.get("/a2a/api/task?id=ghost").await,
        s.get("/a2a/api/nothing").await,
        s.action(json!({"action": "inbound.remove", "id": "ghost"}))
            .await,
    ] {
        assert!(
            status >= 400 && v["ok"] == false && v["message"].is_string(),
            "{status} {v}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtimes_refusals_come_in_the_json_type_the_request_used() {
    // SAFETY: set before the server reads it; no other test reads this variable.
    unsafe { std::env::set_var("A2A_TEST_TOKEN_MEDIA", "s3cret-media-0123456789") };
    let mut keyed = instance("keyed", "echo");
    keyed.auth_token_env = Some("A2A_TEST_TOKEN_MEDIA".into());
    let mut open = instance("open", "echo");
    open.limits = Some(a2a_edge::records::Limits {
        max_body_bytes: 1024,
        ..Default::default()
    });
    let s = Server::start(Config {
        instances: vec![keyed, open],
        ..Config::default()
    })
    .await;
    let post = |id: &str, media: &str, body: String| {
        s.http
            .post(format!("{}/a2a/{id}", s.base()))
            .header("content-type", media)
            .body(body)
    };
    let send = serde_json::to_string(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": message("m-media", "hi")}}))
    .unwrap();
    let huge = "x".repeat(4000);
    for media in ["application/a2a+json", "application/json"] {
        let unauthorized = post("keyed", media, send.clone()).send().await.unwrap();
        assert_eq!(unauthorized.status(), 401);
        assert_eq!(unauthorized.headers()["content-type"], media, "401");
        let too_large = post("open", media, huge.clone()).send().await.unwrap();
        assert_eq!(too_large.status(), 413);
        assert_eq!(too_large.headers()["content-type"], media, "413");
    }
}
