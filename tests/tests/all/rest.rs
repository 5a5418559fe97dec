//! The HTTP+JSON binding over real HTTP: every route, the google.rpc.Status errors and their
//! statuses, SSE without the JSON-RPC envelope, GET and POST subscribe, the tenant prefix, and
//! the same auth, version, content-type and body-limit rules as JSON-RPC.

use a2a_edge::config::Config;
use a2a_edge_tests::events::Events;
use a2a_edge_tests::{Server, scripted};
use reqwest::Method;
use serde_json::{Value, json};

/// A REST request below `/a2a/<instance>`: (status, headers, body as JSON or null).
async fn rest(
    s: &Server,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut r = s
        .http
        .request(method, format!("{}{path}", s.base()))
        .header("a2a-version", "1.0");
    if let Some(b) = body {
        r = r.json(&b);
    }
    let r = r.send().await.unwrap();
    let (status, headers) = (r.status().as_u16(), r.headers().clone());
    (status, headers, r.json().await.unwrap_or(Value::Null))
}

fn message(id: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// The reason and status of a google.rpc.Status body.
fn reason(v: &Value) -> (&str, &str) {
    (
        v["error"]["status"].as_str().unwrap_or("?"),
        v["error"]["details"][0]["reason"].as_str().unwrap_or("?"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_as_its_json_rpc_method_does() {
    let s = Server::start(scripted(|_| {})).await;
    let (_, _, card) = rest(&s, Method::GET, "/a2a/tck/agent-card.json", None).await;
    let faces = card["supportedInterfaces"].as_array().unwrap();
    assert_eq!(faces[1]["protocolBinding"], "HTTP+JSON", "{card}");
    assert_eq!(
        faces[1]["url"], faces[0]["url"],
        "both bindings share the endpoint URL"
    );

    let (status, headers, sent) = rest(
        &s,
        Method::POST,
        "/a2a/tck/message:send",
        Some(message("r1", "hello")),
    )
    .await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(headers["content-type"], "application/json");
    assert!(sent.get("jsonrpc").is_none(), "no envelope: {sent}");
    let task = sent["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(sent["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let (_, _, again) = rest(
        &s,
        Method::POST,
        "/a2a/tck/message:send",
        Some(message("r1", "hello")),
    )
    .await;
    assert_eq!(
        again["task"]["id"],
        task.as_str(),
        "the same messageId is the same task"
    );

    let (status, _, got) = rest(
        &s,
        Method::GET,
        &format!("/a2a/tck/tasks/{task}?historyLength=1"),
        None,
    )
    .await;
    assert_eq!(
        (status, got["id"].as_str()),
        (200, Some(task.as_str())),
        "{got}"
    );
    assert_eq!(got["history"].as_array().unwrap().len(), 1);
    let (_, via_rpc) = s
        .rpc(
            "/a2a/tck",
            "GetTask",
            json!({"id": task, "historyLength": 1}),
        )
        .await;
    assert_eq!(
        got, via_rpc["result"],
        "the bindings differ only in framing"
    );

    let (status, _, list) = rest(
        &s,
        Method::GET,
        "/a2a/tck/tasks?pageSize=1&status=TASK_STATE_COMPLETED&includeArtifacts=true",
        None,
    )
    .await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(
        (list["pageSize"].clone(), list["totalSize"].clone()),
        (json!(1), json!(1)),
        "{list}"
    );
    assert!(list["tasks"][0]["artifacts"].is_array(), "{list}");

    // A long task: cancel it over REST; cancelling again is not possible.
    let (_, _, long) = rest(&s, Method::POST, "/a2a/tck/message:send", Some(json!({"message": {"messageId": "tck-long-running-1", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"returnImmediately": true}}))).await;
    let long_id = long["task"]["id"].as_str().unwrap().to_owned();
    let (status, _, canceled) = rest(
        &s,
        Method::POST,
        &format!("/a2a/tck/tasks/{long_id}:cancel"),
        None,
    )
    .await;
    assert_eq!(
        (status, canceled["status"]["state"].as_str()),
        (200, Some("TASK_STATE_CANCELED")),
        "{canceled}"
    );
    let (status, _, refused) = rest(
        &s,
        Method::POST,
        &format!("/a2a/tck/tasks/{long_id}:cancel"),
        Some(json!({})),
    )
    .await;
    assert_eq!(
        (status, reason(&refused)),
        (400, ("FAILED_PRECONDITION", "TASK_NOT_CANCELABLE")),
        "{refused}"
    );

    let (status, _, none) = rest(&s, Method::GET, "/a2a/tck/tasks/nope", None).await;
    assert_eq!(
        (status, reason(&none)),
        (404, ("NOT_FOUND", "TASK_NOT_FOUND")),
        "{none}"
    );
    assert_eq!(none["error"]["code"], 404);
    assert_eq!(none["error"]["details"][0]["domain"], "a2a-protocol.org");

    let (status, _, push) = rest(
        &s,
        Method::POST,
        &format!("/a2a/tck/tasks/{task}/pushNotificationConfigs"),
        Some(json!({"url": "https://example.com/hook"})),
    )
    .await;
    assert_eq!(
        (status, &push["id"], &push["taskId"]),
        (200, &json!(task), &json!(task)),
        "the config is created for the path's task, its id defaulting to the task's: {push}"
    );
    let (status, _, ext) = rest(&s, Method::GET, "/a2a/tck/extendedAgentCard", None).await;
    assert_eq!(
        (status, reason(&ext).1),
        (400, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
        "{ext}"
    );

    // Tenant prefix: the same routes below /{tenant}.
    let (status, _, tenant) = rest(
        &s,
        Method::GET,
        &format!("/a2a/tck/acme/tasks/{task}"),
        None,
    )
    .await;
    assert_eq!(
        (status, tenant["id"].as_str()),
        (200, Some(task.as_str())),
        "{tenant}"
    );

    let (status, headers, wrong) = rest(&s, Method::DELETE, "/a2a/tck/message:send", None).await;
    assert_eq!(
        (status, headers["allow"].to_str().unwrap()),
        (405, "POST"),
        "{wrong}"
    );
    let (status, _, nothing) = rest(&s, Method::GET, "/a2a/tck/nothing/here/at/all", None).await;
    assert_eq!(
        (status, reason(&nothing).1),
        (404, "METHOD_NOT_FOUND"),
        "{nothing}"
    );
    let (status, _, bad) = rest(&s, Method::GET, "/a2a/tck/tasks?pageSize=lots", None).await;
    assert_eq!(
        (status, reason(&bad)),
        (400, ("INVALID_ARGUMENT", "INVALID_PARAMS")),
        "{bad}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_bare_stream_responses_and_subscribe_takes_get_and_post() {
    let s = Server::start(scripted(|_| {})).await;
    let stream = s
        .http
        .post(format!("{}/a2a/tck/message:stream", s.base()))
        .header("a2a-version", "1.0")
        .json(&message("tck-stream-artifact-chunked-1", "x"))
        .send()
        .await
        .unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let events = Events::of(stream).all().await;
    let members: Vec<&str> = events
        .iter()
        .map(|(_, v)| v.as_object().unwrap().keys().next().unwrap().as_str())
        .collect();
    assert_eq!(members.first(), Some(&"task"), "{events:?}");
    assert!(
        members.contains(&"artifactUpdate") && members.contains(&"statusUpdate"),
        "{members:?}"
    );
    assert!(
        events.iter().all(|(_, v)| v.get("jsonrpc").is_none()),
        "no envelope"
    );

    for verb in [Method::POST, Method::GET] {
        let (_, _, begun) = rest(&s, Method::POST, "/a2a/tck/message:send", Some(json!({"message": {"messageId": format!("tck-long-running-{verb}"), "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"returnImmediately": true}}))).await;
        let id = begun["task"]["id"].as_str().unwrap().to_owned();
        let sub = s
            .http
            .request(
                verb.clone(),
                format!("{}/a2a/tck/tasks/{id}:subscribe", s.base()),
            )
            .header("a2a-version", "1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(sub.status(), 200, "{verb} subscribe");
        let events = Events::of(sub).all().await;
        assert_eq!(events[0].1["task"]["id"], id.as_str(), "{verb}: {events:?}");
        assert_eq!(
            events.last().unwrap().1["task"]["status"]["state"],
            "TASK_STATE_COMPLETED",
            "{verb}: {events:?}"
        );
    }
    let (status, _, done) = rest(&s, Method::GET, "/a2a/tck/tasks?pageSize=1", None).await;
    let finished = done["tasks"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(status, 200);
    let (status, _, refused) = rest(
        &s,
        Method::POST,
        &format!("/a2a/tck/tasks/{finished}:subscribe"),
        None,
    )
    .await;
    assert_eq!(
        (status, reason(&refused).1),
        (400, "UNSUPPORTED_OPERATION"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_version_content_type_and_body_limit_hold_as_for_json_rpc() {
    let mut config = Config::default();
    config.instances.push({
        let mut d = a2a_edge_tests::instance("small", "echo");
        d.limits.as_mut().unwrap().max_body_bytes = 2048;
        d
    });
    config
        .instances
        .push(a2a_edge_tests::instance("locked", "echo"));
    let s = Server::start(config).await;
    let (status, _) = s
        .action(
            json!({"action": "inbound.setAuth", "id": "locked", "token": "rest-token-0123456789"}),
        )
        .await;
    assert_eq!(status, 200);
    let (status, headers, v) = rest(&s, Method::GET, "/a2a/locked/tasks", None).await;
    assert_eq!(
        (status, headers["www-authenticate"].to_str().unwrap()),
        (401, "Bearer realm=\"locked\"")
    );
    assert_eq!(reason(&v), ("UNAUTHENTICATED", "UNAUTHORIZED"), "{v}");
    let ok = s
        .http
        .get(format!("{}/a2a/locked/tasks", s.base()))
        .header("a2a-version", "1.0")
        .bearer_auth("rest-token-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);

    let old = s
        .http
        .get(format!("{}/a2a/small/tasks", s.base()))
        .header("a2a-version", "0.3")
        .send()
        .await
        .unwrap();
    assert_eq!(old.status(), 400);
    assert_eq!(
        reason(&old.json().await.unwrap()),
        ("FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
    );
    let text = s
        .http
        .post(format!("{}/a2a/small/message:send", s.base()))
        .header("a2a-version", "1.0")
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 400);
    assert_eq!(
        reason(&text.json().await.unwrap()).1,
        "CONTENT_TYPE_NOT_SUPPORTED"
    );
    let (status, _, big) = rest(
        &s,
        Method::POST,
        "/a2a/small/message:send",
        Some(message("b", &"x".repeat(4096))),
    )
    .await;
    assert_eq!(status, 413, "{big}");
    assert_eq!(
        big["error"]["code"], 413,
        "a google.rpc.Status, not a JSON-RPC envelope: {big}"
    );
}
