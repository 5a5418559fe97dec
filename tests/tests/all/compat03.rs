//! A2A 0.3 beside 1.0 over real HTTP: the same task through both, the one card read by both
//! (and at the 0.2-era well-known path), 0.3's HTTP+JSON paths (`/v1/…`) with its proto's JSON,
//! and `compat03 = false` serving a clean 1.0 agent that tells 0.3 callers what it speaks.

use a2a_edge_tests::events::Events;
use a2a_edge_tests::{Server, scripted};
use reqwest::Method;
use serde_json::{Value, json};

const TCK: &str = "/a2a/tck";

fn old_message(id: &str) -> Value {
    json!({"message": {"kind": "message", "messageId": id, "role": "user", "parts": [{"kind": "text", "text": "hi"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_3_caller_and_a_1_0_caller_share_tasks_and_the_card() {
    let mut config = scripted(|_| {});
    config.well_known_instance = Some("tck".into());
    let s = Server::start(config).await;

    let (status, sent) = s
        .rpc(TCK, "message/send", old_message("tck-complete-task-o1"))
        .await;
    assert_eq!(status, 200);
    let task = &sent["result"];
    assert_eq!(task["kind"], "task", "{sent}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(
        task["artifacts"][0]["parts"][0],
        json!({"kind": "text", "text": "Hello from TCK"})
    );
    assert_eq!(task["history"][0]["role"], "user");
    let id = task["id"].as_str().unwrap();

    // 1.0 reads the 0.3 caller's task in 1.0 shape, and 0.3 reads it back in its own.
    let v1 = s.ok(TCK, "GetTask", json!({"id": id})).await;
    assert_eq!(v1["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(v1["history"][0]["role"], "ROLE_USER");
    let (_, v03) = s.rpc(TCK, "tasks/get", json!({"id": id})).await;
    assert_eq!(v03["result"]["status"]["state"], "completed");
    // Errors keep their JSON-RPC codes.
    let (_, missing) = s.rpc(TCK, "tasks/get", json!({"id": "nope"})).await;
    assert_eq!(missing["error"]["code"], -32001);

    // One card for both, also at the 0.2-era path.
    for path in [
        "/a2a/tck/agent-card.json",
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
    ] {
        let (status, card) = s.get(path).await;
        assert_eq!(status, 200, "{path}");
        assert_eq!(card["protocolVersion"], "0.3.0", "{path}");
        assert_eq!(card["preferredTransport"], "JSONRPC");
        assert!(card["url"].as_str().unwrap().ends_with(TCK), "{card}");
        let versions: Vec<&str> = card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["protocolVersion"].as_str().unwrap())
            .collect();
        assert_eq!(versions, ["1.0", "1.0", "1.0", "0.3", "0.3"], "{path}");
    }
}

/// A 0.3 HTTP+JSON request below `/a2a/tck`, as the 0.3 SDK sends it (no `A2A-Version`).
async fn rest03(s: &Server, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut r = s.http.request(method, format!("{}{TCK}{path}", s.base()));
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// A 0.3 proto `SendMessageRequest`.
fn proto_send(id: &str, blocking: bool) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "content": [{"text": "hi"}]},
        "configuration": {"blocking": blocking}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_3_rest_caller_is_served_at_the_v1_paths_in_the_0_3_proto_json() {
    let s = Server::start(scripted(|_| {})).await;
    let send = proto_send("tck-complete-task-r1", true);
    let (status, sent) = rest03(&s, Method::POST, "/v1/message:send", Some(send)).await;
    assert_eq!(status, 200, "{sent}");
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Hello from TCK");
    assert_eq!(task["history"][0]["content"], json!([{"text": "hi"}]));
    assert!(task.get("kind").is_none() && task["history"][0].get("parts").is_none());
    let id = task["id"].as_str().unwrap();

    // The same task over 0.3 REST and 1.0 JSON-RPC.
    let (status, got) = rest03(&s, Method::GET, &format!("/v1/tasks/{id}"), None).await;
    assert_eq!((status, &got["id"]), (200, &json!(id)), "{got}");
    assert_eq!(got["history"][0]["content"][0]["text"], "hi");
    let v1 = s.ok(TCK, "GetTask", json!({"id": id})).await;
    assert_eq!(v1["history"][0]["parts"][0]["text"], "hi");

    // A stream: the 0.3 proto's StreamResponse objects, ending with a final status update
    // and no second task.
    let stream = s
        .http
        .post(format!("{}{TCK}/v1/message:stream", s.base()))
        .json(&proto_send("tck-stream-chunks-r1", true))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let events = Events::of(stream).all().await;
    let tasks = events
        .iter()
        .filter(|(_, v)| v.get("task").is_some())
        .count();
    assert_eq!(tasks, 1, "{events:?}");
    let last = &events.last().unwrap().1["statusUpdate"];
    assert_eq!(last["final"], true, "{events:?}");
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(
        events
            .iter()
            .any(|(_, v)| v["artifactUpdate"]["artifact"]["parts"][0]["text"].is_string()),
        "{events:?}"
    );

    // Push configs by name, and a cancel in 0.3's spelling of the state.
    let send = proto_send("tck-long-running-r1", false);
    let (_, running) = rest03(&s, Method::POST, "/v1/message:send", Some(send)).await;
    let id = running["task"]["id"].as_str().unwrap().to_owned();
    let configs = format!("/v1/tasks/{id}/pushNotificationConfigs");
    let create = json!({"parent": format!("tasks/{id}"), "configId": "p1",
        "config": {"pushNotificationConfig": {"url": "https://example.com/hook", "token": "t0k"}}});
    let (status, created) = rest03(&s, Method::POST, &configs, Some(create)).await;
    assert_eq!(status, 200, "{created}");
    let name = format!("tasks/{id}/pushNotificationConfigs/p1");
    assert_eq!(created["name"], name.as_str(), "{created}");
    assert_eq!(
        created["pushNotificationConfig"]["url"],
        "https://example.com/hook"
    );
    let (_, listed) = rest03(&s, Method::GET, &configs, None).await;
    assert_eq!(listed["configs"][0]["name"], name.as_str(), "{listed}");
    let one = format!("{configs}/p1");
    let (_, got) = rest03(&s, Method::GET, &one, None).await;
    assert_eq!(got["pushNotificationConfig"]["id"], "p1", "{got}");
    let (status, deleted) = rest03(&s, Method::DELETE, &one, None).await;
    assert_eq!((status, deleted), (200, json!({})));
    let cancel = Some(json!({"name": format!("tasks/{id}")}));
    let (status, canceled) =
        rest03(&s, Method::POST, &format!("/v1/tasks/{id}:cancel"), cancel).await;
    assert_eq!(status, 200, "{canceled}");
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELLED");

    // Errors keep the HTTP statuses of the binding; 0.3 at a 1.0 path is told where to go.
    let (status, missing) = rest03(&s, Method::GET, "/v1/tasks/nope", None).await;
    assert_eq!(status, 404, "{missing}");
    let (status, card) = rest03(&s, Method::GET, "/v1/card", None).await;
    assert_eq!(
        card["error"]["details"][0]["reason"],
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    );
    assert_ne!(status, 200);
    let r = s
        .http
        .post(format!("{}{TCK}/message:send", s.base()))
        .header("a2a-version", "0.3")
        .json(&proto_send("x", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]["message"].as_str().unwrap().contains("/v1/"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_request_naming_1_x_gets_the_clean_1_0_card_and_the_answer_varies() {
    let s = Server::start(scripted(|_| {})).await;
    let url = format!("{}/a2a/tck/agent-card.json", s.base());
    let card = |version: Option<&'static str>, accept: Option<&'static str>| {
        let mut r = s.http.get(&url);
        if let Some(v) = version {
            r = r.header("a2a-version", v);
        }
        if let Some(a) = accept {
            r = r.header("accept", a);
        }
        async move {
            let r = r.send().await.unwrap();
            let header = |n: &str| {
                r.headers()
                    .get(n)
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default()
            };
            let (etag, vary, media) = (header("etag"), header("vary"), header("content-type"));
            (r.json::<Value>().await.unwrap(), etag, vary, media)
        }
    };
    // Twice each, in turns: the second answers come from the runtime's card cache.
    for _ in 0..2 {
        let (both, both_etag, vary, media) = card(None, None).await;
        assert_eq!(both["protocolVersion"], "0.3.0", "{both}");
        assert_eq!(vary, "A2A-Version, Accept");
        assert_eq!(media, "application/json");
        for v in ["1.0", "1.0.1"] {
            let (clean, etag, vary, _) = card(Some(v), None).await;
            for field in [
                "protocolVersion",
                "url",
                "preferredTransport",
                "additionalInterfaces",
            ] {
                assert!(clean.get(field).is_none(), "{v}: {field} in {clean}");
            }
            assert!(
                clean["supportedInterfaces"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|i| i["protocolVersion"] == "1.0"),
                "{clean}"
            );
            assert_ne!(etag, both_etag, "each card its own ETag");
            assert_eq!(vary, "A2A-Version, Accept");
        }
        let (old, etag, _, _) = card(Some("0.3"), None).await;
        assert_eq!(
            (old["protocolVersion"].as_str(), etag),
            (Some("0.3.0"), both_etag)
        );
        let (_, _, _, media) = card(Some("1.0"), Some("application/a2a+json")).await;
        assert_eq!(media, "application/a2a+json");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_3_streaming_call_gets_its_error_as_the_streams_one_event() {
    let s = Server::start(scripted(|_| {})).await;
    let (_, done) = s
        .rpc(TCK, "message/send", old_message("tck-complete-task-e1"))
        .await;
    let id = done["result"]["id"].as_str().unwrap().to_owned();
    let mut onto_done = old_message("tck-complete-task-e2");
    onto_done["message"]["taskId"] = json!(id);
    let url = format!("{}{TCK}", s.base());
    for (method, params, code) in [
        ("tasks/resubscribe", json!({"id": "nope"}), -32001),
        ("tasks/resubscribe", json!({"id": id}), -32004),
        ("message/stream", onto_done, -32004),
    ] {
        let r = a2a_edge_tests::jsonrpc::stream_request(&s.http, &url, method, params, None)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{method}");
        assert_eq!(r.headers()["content-type"], "text/event-stream", "{method}");
        let events = Events::of(r).all().await;
        assert_eq!(events.len(), 1, "{method}: {events:?}");
        assert_eq!(events[0].1["error"]["code"], code, "{method}: {events:?}");
    }
    // 1.0 keeps the plain JSON error.
    let r = a2a_edge_tests::jsonrpc::stream_request(
        &s.http,
        &url,
        "SubscribeToTask",
        json!({"id": "nope"}),
        None,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.headers()["content-type"], "application/json");
    let plain: Value = r.json().await.unwrap();
    assert_eq!(plain["error"]["code"], -32001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_3_push_config_get_may_name_the_task_alone() {
    let s = Server::start(scripted(|_| {})).await;
    let (_, sent) = s
        .rpc(TCK, "message/send", old_message("tck-input-required-o3"))
        .await;
    let id = sent["result"]["id"].as_str().unwrap().to_owned();
    let (_, set) = s
        .rpc(
            TCK,
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"url": "https://example.com/hook"}}),
        )
        .await;
    assert!(set.get("result").is_some(), "{set}");
    let (_, got) = s
        .rpc(TCK, "tasks/pushNotificationConfig/get", json!({"id": id}))
        .await;
    let got = &got["result"];
    assert_eq!(got["taskId"], id.as_str(), "{got}");
    assert_eq!(
        got["pushNotificationConfig"]["url"],
        "https://example.com/hook"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compat03_off_serves_a_clean_1_0_card_and_names_the_successor() {
    let s = Server::start(scripted(|d| d.compat03 = Some(false))).await;
    let (_, card) = s.get("/a2a/tck/agent-card.json").await;
    for field in [
        "protocolVersion",
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "supportsAuthenticatedExtendedCard",
    ] {
        assert!(card.get(field).is_none(), "{field} in {card}");
    }
    assert!(
        card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["protocolVersion"] == "1.0"),
        "{card}"
    );
    let (_, r) = s
        .rpc(TCK, "message/send", old_message("tck-complete-task-o2"))
        .await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("SendMessage") && message.contains("A2A 0.3"),
        "{message}"
    );
    let r = s
        .http
        .post(format!("{}{TCK}", s.base()))
        .header("a2a-version", "0.3")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}))
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32009, "{v}");
}
