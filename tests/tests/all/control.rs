//! The control API (docs/control.md "Control API") over real HTTP: every read and every inbound/task/session action,
//! with their failure statuses and field validation.

use std::time::Duration;

use a2a_edge_tests::events::kind;
use a2a_edge_tests::{Server, answer_head, instance, message, scripted};
use serde_json::{Value, json};

/// Runs an action that must succeed; its body.
async fn ok(s: &Server, body: Value) -> Value {
    let (status, v) = s.action(body.clone()).await;
    assert_eq!(status, 200, "{body} → {v}");
    assert_eq!(v["ok"], true);
    v
}

/// Runs an action that must be refused with 409; its message.
async fn refused(s: &Server, body: Value) -> String {
    let (status, v) = s.action(body.clone()).await;
    assert_eq!(status, 409, "{body} → {v}");
    assert_eq!(v["ok"], false);
    v["message"].as_str().unwrap().to_owned()
}

async fn send_test(s: &Server, id: &str, text: &str, context: Option<&str>) -> Value {
    let mut body = json!({"action": "inbound.sendTest", "id": id, "text": text});
    if let Some(c) = context {
        body["contextId"] = json!(c);
    }
    ok(s, body).await
}

async fn text(s: &Server, path: &str) -> (u16, String, String) {
    let r = s
        .http
        .get(format!("{}{path}", s.base()))
        .send()
        .await
        .unwrap();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (r.status().as_u16(), ct, r.text().await.unwrap())
}

fn two_instances() -> a2a_edge::config::Config {
    let mut c = scripted(|_| {});
    c.instances.push(instance("echo2", "echo"));
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_pages_and_filters_tasks_newest_first() {
    let s = Server::start(two_instances()).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(
            send_test(&s, "echo2", &format!("hello {i}"), Some("ctx-a")).await["taskId"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    send_test(&s, "tck", "tck-task-failure now", None).await;
    send_test(&s, "tck", "tck-input-required now", None).await;

    let (status, snap) = s.get("/a2a/api?taskLimit=2").await;
    assert_eq!(status, 200);
    for key in [
        "version",
        "inbounds",
        "outbounds",
        "tasks",
        "taskTotal",
        "taskNextOffset",
        "peers",
        "sessions",
        "metrics",
    ] {
        assert!(snap.get(key).is_some(), "snapshot has {key}");
    }
    assert_eq!(snap["taskTotal"], 5);
    assert_eq!(snap["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(snap["taskNextOffset"], 2);
    let times: Vec<u64> = snap["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["updatedAt"].as_u64().unwrap())
        .collect();
    assert!(times[0] >= times[1], "newest first");
    let (_, last) = s.get("/a2a/api?taskLimit=2&taskOffset=4").await;
    assert_eq!(last["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(last["taskNextOffset"], Value::Null, "null on the last page");

    let (_, by_server) = s.get("/a2a/api?taskServerId=echo2").await;
    assert_eq!(by_server["taskTotal"], 3);
    let (_, by_context) = s.get("/a2a/api?taskContextId=ctx-a&taskLimit=10").await;
    let mut got: Vec<String> = by_context["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].as_str().unwrap().to_owned())
        .collect();
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
    let (_, failed) = s.get("/a2a/api?taskState=failed").await;
    assert_eq!(failed["taskTotal"], 1);
    assert_eq!(failed["tasks"][0]["error"]["code"], "TASK_STATE_FAILED");
    let (_, waiting) = s.get("/a2a/api?taskState=TASK_STATE_INPUT_REQUIRED").await;
    assert_eq!(waiting["taskTotal"], 1);

    let inbound = snap["inbounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == "echo2")
        .unwrap()
        .clone();
    assert_eq!(inbound["cardPath"], "/a2a/echo2/agent-card.json");
    assert_eq!(
        inbound["cardUrl"],
        format!("{}/a2a/echo2/agent-card.json", s.base()),
        "the card's own URL"
    );
    assert_eq!(
        inbound["endpointUrl"],
        format!("{}/a2a/echo2", s.base()),
        "the endpoint the card announces"
    );
    assert_eq!(inbound["skills"][0]["id"], "chat");
    assert_eq!(snap["version"], env!("CARGO_PKG_VERSION"));

    for bad in [
        "taskLimit=x",
        "taskLimit=9999",
        "taskState=sleeping",
        "taskOffset=-1",
    ] {
        let (status, body) = s.get(&format!("/a2a/api?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presets_and_cards() {
    let s = Server::start(two_instances()).await;
    let (status, presets) = s.get("/a2a/api/presets").await;
    assert_eq!(status, 200);
    let echo = presets
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "echo")
        .unwrap();
    assert_eq!(echo["isDefault"], true);
    assert!(
        presets
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["id"] == "scripted" && p["isDefault"] == false)
    );

    let (status, card) = s.get("/a2a/api/card?id=echo2").await;
    assert_eq!(status, 200);
    let (_, served) = s.get("/a2a/echo2/agent-card.json").await;
    assert_eq!(
        card, served,
        "the control API shows the card the instance serves"
    );
    assert_eq!(s.get("/a2a/api/card?id=ghost").await.0, 404);
    assert_eq!(s.get("/a2a/api/card").await.0, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_test_makes_a_task_seen_as_task_record_and_as_protocol_task() {
    let s = Server::start(two_instances()).await;
    let sent = send_test(&s, "echo2", "hello record", None).await;
    assert_eq!(sent["state"], "TASK_STATE_COMPLETED");
    let id = sent["taskId"].as_str().unwrap();

    let (status, record) = s.get(&format!("/a2a/api/task?id={id}")).await;
    assert_eq!(status, 200);
    assert_eq!(record["taskId"], id);
    assert_eq!(record["serverId"], "echo2");
    assert_eq!(record["skill"], "chat");
    assert_eq!(record["state"], "TASK_STATE_COMPLETED");
    assert_eq!(record["parts"][0]["text"], "hello record");
    assert_eq!(record["artifacts"][0]["parts"][0]["text"], "hello record");
    assert_eq!(record["messageIds"].as_array().unwrap().len(), 1);
    assert!(
        record.get("status").is_none() && record.get("id").is_none(),
        "never the protocol shape: {record}"
    );

    let task = s.ok("/a2a/echo2", "GetTask", json!({"id": id})).await;
    assert_eq!(task["id"], id);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["contextId"], record["contextId"]);

    assert_eq!(s.get("/a2a/api/task?id=nope").await.0, 404);
    // The same gate as a remote call: an unknown skill is refused before a task exists.
    let m = refused(
        &s,
        json!({"action": "inbound.sendTest", "id": "echo2", "text": "x", "skill": "nope"}),
    )
    .await;
    assert!(m.contains("unknown skill"), "{m}");
    let m = refused(
        &s,
        json!({"action": "inbound.sendTest", "id": "ghost", "text": "x"}),
    )
    .await;
    assert!(m.contains("ghost"), "{m}");
    let m = refused(&s, json!({"action": "inbound.sendTest", "id": "echo2"})).await;
    assert_eq!(m, "missing field \"text\"");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_reads_derive_the_conversation_and_refuse_ambiguity() {
    let s = Server::start(two_instances()).await;
    send_test(&s, "echo2", "first words", Some("shared-ctx")).await;
    send_test(&s, "echo2", "second words", Some("shared-ctx")).await;
    send_test(&s, "tck", "tck-complete-task", Some("shared-ctx")).await;

    let (status, body) = s.get("/a2a/api/session?contextId=shared-ctx").await;
    assert_eq!(status, 409, "{body}");
    assert!(body["message"].as_str().unwrap().contains("serverId"));
    let (status, session) = s
        .get("/a2a/api/session?contextId=shared-ctx&serverId=echo2")
        .await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["taskCount"], 2);
    assert_eq!(session["status"], "idle");
    assert_eq!(session["live"], true);
    let texts: Vec<&str> = session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["first words", "first words", "second words", "second words"]
    );
    assert_eq!(session["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(s.get("/a2a/api/session?contextId=nope").await.0, 404);
    assert_eq!(
        s.get("/a2a/api/session?contextId=shared-ctx&serverId=ghost")
            .await
            .0,
        404
    );

    let (_, snap) = s.get("/a2a/api").await;
    let rows: Vec<&Value> = snap["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["contextId"] == "shared-ctx")
        .collect();
    assert_eq!(rows.len(), 2, "one row per (instance, context)");
    assert!(
        rows.iter()
            .all(|r| r["serverName"].is_string() && r["preset"].is_string())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_tasks_and_rejections_in_json_and_prometheus() {
    let s = Server::start(scripted(|_| {})).await;
    s.send("/a2a/tck", "m-1", "tck-complete-task").await;
    s.send("/a2a/tck", "m-2", "tck-complete-task").await;
    s.rpc("/a2a/tck", "GetTask", json!({"id": "missing"})).await;
    let params = json!({"message": {"messageId": "m-3", "role": "ROLE_USER", "parts": [{"text": "x"}], "metadata": {"skill": "nope"}}});
    s.rpc("/a2a/tck", "SendMessage", params).await;

    let (status, m) = s.get("/a2a/api/metrics").await;
    assert_eq!(status, 200);
    let count = |method: &str, outcome: &str| {
        m["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["instance"] == "tck" && r["method"] == method && r["outcome"] == outcome)
            .map(|r| r["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert!(count("SendMessage", "ok") >= 2, "{m}");
    assert_eq!(count("GetTask", "TASK_NOT_FOUND"), 1, "{m}");
    assert_eq!(m["gateRejections"]["skill"], 1, "{m}");
    assert!(m["tasksByState"]["TASK_STATE_COMPLETED"].as_u64().unwrap() >= 2);
    assert!(m["sendMessageLatency"]["count"].as_u64().unwrap() >= 2);
    let invocations = m["components"]["instantiations"].as_u64().unwrap()
        + m["components"]["reuses"].as_u64().unwrap();
    assert!(invocations >= 4, "{m}");
    assert!(m["store"]["bytes"].as_u64().unwrap() > 0);

    let (status, ct, prom) = text(&s, "/a2a/api/metrics?format=prometheus").await;
    assert_eq!(status, 200);
    assert!(
        ct.starts_with("application/openmetrics-text; version=1.0.0"),
        "{ct}"
    );
    assert!(prom.contains("a2a_edge_requests_total{instance=\"tck\",method=\"GetTask\",version=\"1.0\",outcome=\"TASK_NOT_FOUND\"} 1"), "{prom}");
    assert!(prom.contains("a2a_edge_gate_rejections_total{reason=\"skill\"} 1"));
    assert!(
        prom.contains("# TYPE a2a_edge_send_message_seconds histogram"),
        "{prom}"
    );
    assert!(
        prom.contains("a2a_edge_send_message_seconds_bucket{le=\"+Inf\"}")
            && prom.ends_with("# EOF\n"),
        "{prom}"
    );
    assert_eq!(s.get("/a2a/api/metrics?format=xml").await.0, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbound_create_validates_every_field_and_serves_at_once() {
    let s = Server::default().await;
    let v = ok(&s, json!({"action": "inbound.create", "name": "Reports Agent!", "description": "Reports", "version": "1.2.3"})).await;
    let id = v["id"].as_str().unwrap();
    assert!(
        id.starts_with("reports-agent-") && id.len() == "reports-agent-".len() + 8,
        "{id}"
    );
    assert_eq!(v["message"], "inbound server \"Reports Agent!\" created");
    let (status, card) = s.get(&format!("/a2a/{id}/agent-card.json")).await;
    assert_eq!(
        (status, card["name"].as_str()),
        (200, Some("Reports Agent!"))
    );

    let named = ok(&s, json!({"action": "inbound.create", "name": "远程", "description": "d", "version": "1", "endpointPath": "/agents/x/", "enabled": false, "preset": "scripted", "limits": {"maxConcurrentTasks": 2}})).await;
    let nid = named["id"].as_str().unwrap();
    assert!(nid.starts_with("server-"), "{nid}");
    let (_, snap) = s.get("/a2a/api").await;
    let rec = snap["inbounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == nid)
        .unwrap()
        .clone();
    assert_eq!(rec["endpointPath"], "/agents/x");
    assert_eq!(rec["enabled"], false);
    assert_eq!(rec["limits"]["maxConcurrentTasks"], 2);
    assert_eq!(
        s.get("/agents/x/agent-card.json").await.0,
        404,
        "created disabled: no routes"
    );

    let base = json!({"action": "inbound.create", "name": "n", "description": "d", "version": "1"});
    let with = |k: &str, v: Value| {
        let mut b = base.clone();
        b[k] = v;
        b
    };
    let cases = [
        (
            json!({"action": "inbound.create", "description": "d", "version": "1"}),
            "missing field \"name\"",
        ),
        (
            with("name", json!(7)),
            "field \"name\" must be a string, not a number",
        ),
        (
            with("enabled", json!("yes")),
            "field \"enabled\" must be a boolean",
        ),
        (with("endpointPath", json!("no-slash")), "must start with /"),
        (
            with("endpointPath", json!("/a2a/api/x")),
            "collides with the control surface",
        ),
        (
            with("endpointPath", json!("/agents/x")),
            "served by inbound",
        ),
        (with("endpointPath", json!("/readyz")), "is reserved"),
        (with("preset", json!("ghost")), "unknown preset \"ghost\""),
        (
            with("component", json!("ghost")),
            "component \"ghost\" was refused",
        ),
        (
            with("maxBodyBytes", json!(10)),
            "maxBodyBytes\" must be a whole number from 1024",
        ),
        (with("limits", json!({"bogus": 1})), "unknown field `bogus`"),
        (
            with("limits", json!({"maxConcurrentTasks": "many"})),
            "field \"limits\"",
        ),
        (
            with("authTokenEnv", json!("not valid")),
            "must name a secret",
        ),
        (with("colour", json!("red")), "has no field \"colour\""),
        (
            json!({"action": "inbound.explode"}),
            "unknown action \"inbound.explode\"",
        ),
        (json!({"action": 5}), "field \"action\" must be a string"),
    ];
    for (body, want) in cases {
        let m = refused(&s, body.clone()).await;
        assert!(m.contains(want), "{body}: {m:?} should say {want:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbound_update_remove_and_records_survive_a_restart() {
    let mut s = Server::default().await;
    let id = ok(
        &s,
        json!({"action": "inbound.create", "name": "Ops", "description": "d", "version": "1"}),
    )
    .await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(&s, json!({"action": "inbound.update", "id": id, "name": "Ops 2", "endpointPath": "/ops", "limits": {"rateBurst": 5}})).await;
    assert_eq!(
        s.get(&format!("/a2a/{id}/agent-card.json")).await.0,
        404,
        "the old path is gone"
    );
    let (status, card) = s.get("/ops/agent-card.json").await;
    assert_eq!((status, card["name"].as_str()), (200, Some("Ops 2")));
    assert!(
        refused(&s, json!({"action": "inbound.update", "id": "ghost"}))
            .await
            .contains("unknown inbound id \"ghost\"")
    );
    assert!(
        refused(
            &s,
            json!({"action": "inbound.update", "id": id, "enabled": false})
        )
        .await
        .contains("has no field \"enabled\"")
    );
    assert!(
        refused(
            &s,
            json!({"action": "inbound.update", "id": id, "name": ""})
        )
        .await
        .contains("must not be empty")
    );

    s.restart().await;
    let (_, snap) = s.get("/a2a/api").await;
    let rec = snap["inbounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(
        (
            rec["name"].as_str(),
            rec["endpointPath"].as_str(),
            rec["limits"]["rateBurst"].as_u64()
        ),
        (Some("Ops 2"), Some("/ops"), Some(5))
    );
    assert_eq!(s.get("/ops/agent-card.json").await.0, 200);

    ok(&s, json!({"action": "inbound.remove", "id": id})).await;
    assert_eq!(s.get("/ops/agent-card.json").await.0, 404);
    assert!(
        refused(&s, json!({"action": "inbound.remove", "id": id}))
            .await
            .contains("unknown inbound id")
    );
    s.restart().await;
    let (_, snap) = s.get("/a2a/api").await;
    assert!(
        snap["inbounds"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["id"] != id.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_removes_routes_and_ends_open_streams_enable_restores_them() {
    let s = Server::start(scripted(|_| {})).await;
    let mut events = s
        .stream(
            "/a2a/tck",
            "SendStreamingMessage",
            json!({"message": message("tck-long-running-d", "x")}),
            None,
        )
        .await;
    let first = events.next().await.unwrap();
    assert_eq!(kind(&first), "task");
    let task_id = first.1["result"]["task"]["id"].as_str().unwrap().to_owned();

    ok(&s, json!({"action": "inbound.disable", "id": "tck"})).await;
    let rest = tokio::time::timeout(Duration::from_secs(3), events.drain())
        .await
        .expect("the open stream ends at once");
    assert!(
        rest.iter().all(|e| kind(e) != "error"),
        "ended cleanly: {rest:?}"
    );
    assert_eq!(s.get("/a2a/tck/agent-card.json").await.0, 404);
    assert_eq!(
        s.rpc("/a2a/tck", "GetTask", json!({"id": task_id})).await.0,
        404
    );

    ok(&s, json!({"action": "inbound.enable", "id": "tck"})).await;
    assert_eq!(s.get("/a2a/tck/agent-card.json").await.0, 200);
    // Disabling ended the stream, not the task: it completes.
    s.wait_state("/a2a/tck", &task_id, "TASK_STATE_COMPLETED", 10)
        .await;
    let again = ok(&s, json!({"action": "inbound.enable", "id": "tck"})).await;
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .contains("already enabled")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_cancel_action_reaches_the_turn_and_refuses_what_it_cannot_cancel() {
    let s = Server::start(scripted(|_| {})).await;
    let r = s.ok("/a2a/tck", "SendMessage", json!({"message": message("tck-long-running-c", "x"), "configuration": {"returnImmediately": true}})).await;
    let id = r["task"]["id"].as_str().unwrap().to_owned();
    ok(&s, json!({"action": "task.cancel", "id": id})).await;
    let t = s
        .wait_state("/a2a/tck", &id, "TASK_STATE_CANCELED", 5)
        .await;
    assert_eq!(t["status"]["state"], "TASK_STATE_CANCELED");
    let m = refused(&s, json!({"action": "task.cancel", "id": id})).await;
    assert!(m.contains("CANCELED"), "{m}");
    assert!(
        refused(&s, json!({"action": "task.cancel", "id": "nope"}))
            .await
            .contains("unknown task id")
    );
    assert_eq!(
        refused(&s, json!({"action": "task.cancel"})).await,
        "missing field \"id\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_cancel_keeps_the_session_and_close_releases_it() {
    let s = Server::start(scripted(|_| {})).await;
    let live = |s: &Server| s.app().services().sessions.is_live("tck", "conv-1");
    let params = json!({"message": {"messageId": "tck-long-running-s1", "contextId": "conv-1", "role": "ROLE_USER", "parts": [{"text": "x"}]}, "configuration": {"returnImmediately": true}});
    let t1 = s.ok("/a2a/tck", "SendMessage", params).await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let v = ok(&s, json!({"action": "session.cancel", "id": "conv-1"})).await;
    assert_eq!(v["message"], "session conv-1: canceled 1 active task(s)");
    s.wait_state("/a2a/tck", &t1, "TASK_STATE_CANCELED", 5)
        .await;
    assert!(live(&s), "cancel keeps the session");

    let v = ok(
        &s,
        json!({"action": "session.close", "id": "conv-1", "serverId": "tck"}),
    )
    .await;
    assert_eq!(
        v["message"],
        "session conv-1: canceled 0 active task(s); closed 1 live session(s)"
    );
    assert!(!live(&s), "close releases it");
    s.ok("/a2a/tck", "SendMessage", json!({"message": {"messageId": "m-after", "contextId": "conv-1", "role": "ROLE_USER", "parts": [{"text": "again"}]}})).await;
    assert!(live(&s), "the next message starts a fresh session");
    assert!(
        refused(&s, json!({"action": "session.close", "id": "ghost"}))
            .await
            .contains("unknown session")
    );
    assert!(
        refused(
            &s,
            json!({"action": "session.cancel", "id": "conv-1", "serverId": 3})
        )
        .await
        .contains("\"serverId\" must be a string")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_are_tracked_and_closing_one_cancels_its_tasks_and_ends_its_streams() {
    let s = Server::start(scripted(|_| {})).await;
    let mut events = s
        .stream(
            "/a2a/tck",
            "SendStreamingMessage",
            json!({"message": message("tck-long-running-p", "x")}),
            None,
        )
        .await;
    let first = events.next().await.unwrap();
    let task_id = first.1["result"]["task"]["id"].as_str().unwrap().to_owned();

    let (_, snap) = s.get("/a2a/api").await;
    let peer = snap["peers"][0].clone();
    assert_eq!(peer["serverId"], "tck");
    assert_eq!(peer["source"], "127.0.0.1");
    assert_eq!(peer["streaming"], true, "{peer}");
    assert_eq!(peer["activeTaskIds"], json!([task_id]));
    assert!(peer["taskCount"].as_u64().unwrap() >= 1);
    let session = snap["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["serverId"] == "tck")
        .unwrap()
        .clone();
    assert_eq!(
        (session["status"].as_str(), session["streaming"].as_bool()),
        (Some("running"), Some(true)),
        "{session}"
    );
    assert_eq!(snap["metrics"]["openStreams"], 1);

    let v = ok(&s, json!({"action": "inbound.close", "id": peer["id"]})).await;
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("1 active task(s) canceled"),
        "{v}"
    );
    tokio::time::timeout(Duration::from_secs(3), events.drain())
        .await
        .expect("the peer's stream ends");
    s.wait_state("/a2a/tck", &task_id, "TASK_STATE_CANCELED", 5)
        .await;
    let (_, snap) = s.get("/a2a/api").await;
    assert_eq!(snap["peers"][0]["streaming"], false);
    assert_eq!(snap["peers"][0]["activeTaskIds"], json!([]));
    assert!(
        refused(&s, json!({"action": "inbound.close", "id": "nobody"}))
            .await
            .contains("unknown peer id")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_and_statuses_of_the_surface() {
    let s = Server::default().await;
    let url = format!("{}/a2a/api", s.base());
    let r = s
        .http
        .post(&url)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = s.http.post(&url).json(&json!([1, 2])).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let r = s.http.put(&url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);
    assert_eq!(r.headers()["allow"], "GET, POST");
    // Over 1 MiB by Content-Length: refused before the body is read (raw, so the client never
    // races the early answer while still sending).
    let head = format!(
        "POST /a2a/api HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        (1 << 20) + 1
    );
    let answer = answer_head(s.running.as_ref().unwrap().addr, &head).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert_eq!(s.get("/a2a/api/nothing").await.0, 404);
    let other = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    for path in [
        "/a2a/api",
        "/a2a/api/presets",
        "/a2a/api/metrics",
        "/a2a/api/update",
        "/a2a/api/task?id=x",
    ] {
        assert_eq!(
            other
                .get(format!("{}{path}", s.base()))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
            403,
            "{path}"
        );
    }
    let r = other
        .post(&url)
        .json(&json!({"action": "inbound.sendTest", "id": "demo", "text": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbound_create_takes_a_chosen_id_and_refuses_a_name_in_use() {
    let s = Server::default().await;
    let create = |extra: Value| {
        let mut b = json!({"action": "inbound.create", "name": "Reports", "description": "d", "version": "1"});
        for (k, v) in extra.as_object().unwrap() {
            b[k] = v.clone();
        }
        b
    };
    let v = ok(&s, create(json!({"id": "reports"}))).await;
    assert_eq!(v["id"], "reports");
    let card = s.get("/a2a/reports/agent-card.json").await;
    assert_eq!(card.0, 200, "served at /a2a/<chosen id>");
    let m = refused(&s, create(json!({}))).await;
    assert!(
        m.contains("taken by inbound server reports") && m.contains("allowDuplicateName"),
        "{m}"
    );
    let m = refused(
        &s,
        create(json!({"id": "reports", "allowDuplicateName": true})),
    )
    .await;
    assert!(m.contains("reports already exists"), "{m}");
    let m = refused(&s, create(json!({"id": "", "name": "Other"}))).await;
    assert!(m.contains("field \"id\" must not be empty"), "{m}");
    for bad in ["has space", "a/b", &"x".repeat(65)] {
        let m = refused(&s, create(json!({"id": bad, "name": "Other"}))).await;
        assert!(
            m.contains("field \"id\"") && m.contains("1-64 letters"),
            "{bad:?}: {m}"
        );
    }
    ok(&s, create(json!({"id": "a-b", "name": "AB"}))).await;
    let m = refused(&s, create(json!({"id": "A_B", "name": "AB2"}))).await;
    assert!(
        m.contains("would share the token secret A2A_INBOUND_A_B with inbound server a-b"),
        "{m}"
    );
    let twin = ok(&s, create(json!({"allowDuplicateName": true}))).await;
    assert!(
        twin["id"].as_str().unwrap().starts_with("reports-"),
        "a generated id: {twin}"
    );
}
