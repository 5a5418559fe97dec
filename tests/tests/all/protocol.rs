//! The A2A 1.0.1 methods over real HTTP against the scripted preset: streaming and its frames,
//! subscribe and replay, cancel, list, continuation, transport rules and the gate.

use std::time::Duration;

use a2a_edge_tests::events::kind;
use a2a_edge_tests::jsonrpc::{envelope, request};
use a2a_edge_tests::{Server, message, scripted};
use serde_json::{Value, json};

const TCK: &str = "/a2a/tck";

/// Starts a long-running task without waiting; returns its id.
async fn start_long(s: &Server, message_id: &str) -> String {
    let r = s.ok(TCK, "SendMessage", json!({"message": message(message_id, "x"), "configuration": {"returnImmediately": true}})).await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_WORKING", "{r}");
    r["task"]["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_sends_task_then_updates_with_ids_then_the_settled_task() {
    let s = Server::start(scripted(|_| {})).await;
    let events = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("tck-stream-1", "x")}),
            None,
        )
        .await;
    assert_eq!(events.status(), 200);
    let events = events.all().await;
    let first = &events[0];
    let last = events.last().unwrap();
    assert_eq!((kind(first), first.0), ("task", None));
    assert_eq!((kind(last), last.0), ("task", None));
    assert_eq!(
        last.1["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(
        last.1["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "Streaming chunk one, chunk two, done."
    );
    let middle = &events[1..events.len() - 1];
    assert!(
        middle.iter().all(|e| e.0.is_some()),
        "status and artifact frames carry ids"
    );
    let ids: Vec<u64> = middle.iter().map(|e| e.0.unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    let artifacts: Vec<_> = middle
        .iter()
        .filter(|e| kind(e) == "artifactUpdate")
        .map(|e| &e.1["result"]["artifactUpdate"])
        .collect();
    assert!(artifacts.len() >= 3);
    assert_eq!(
        artifacts[0]["append"],
        serde_json::Value::Null,
        "the first chunk starts the artifact"
    );
    assert!(artifacts[1..].iter().all(|a| a["append"] == true));
    assert_eq!(artifacts.last().unwrap()["lastChunk"], true);
    assert_eq!(kind(&middle[middle.len() - 1]), "statusUpdate");
    assert!(
        events.iter().all(|e| e.1["id"] == "s"),
        "every frame echoes the request id"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_rules_for_the_streaming_path() {
    let s = Server::start(scripted(|_| {})).await;
    let frames = s
        .stream(
            TCK,
            "SendMessage",
            json!({"message": message("m1", "x")}),
            None,
        )
        .await
        .all()
        .await;
    assert_eq!(
        frames.len(),
        1,
        "SendMessage under Accept: text/event-stream is one error frame"
    );
    assert_eq!(frames[0].1["error"]["code"], -32601);
    let (_, body) = s
        .rpc(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("m2", "x")}),
        )
        .await;
    assert_eq!(body["error"]["code"], -32601);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Accept: text/event-stream")
    );
    assert_eq!(
        s.code(TCK, "SubscribeToTask", json!({"id": "x"})).await,
        -32601
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_stream_does_not_cancel_the_task() {
    let s = Server::start(scripted(|_| {})).await;
    let mut events = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("tck-long-running-1", "x")}),
            None,
        )
        .await;
    let first = events.next().await.unwrap();
    let id = first.1["result"]["task"]["id"].as_str().unwrap().to_owned();
    drop(events);
    let t = s.wait_state(TCK, &id, "TASK_STATE_COMPLETED", 15).await;
    assert_eq!(
        t["artifacts"][0]["parts"][0]["text"],
        "step 1 step 2 step 3 step 4 "
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subscribers_get_identical_ordered_frames_and_both_end_settled() {
    let s = Server::start(scripted(|_| {})).await;
    let id = start_long(&s, "tck-long-running-2").await;
    let a = s
        .stream(TCK, "SubscribeToTask", json!({"id": id}), None)
        .await;
    let b = s
        .stream(TCK, "SubscribeToTask", json!({"id": id}), None)
        .await;
    let (a, b) = tokio::join!(a.all(), b.all());
    let strip = |v: &Vec<a2a_edge_tests::events::Event>| {
        v.iter()
            .filter(|e| e.0.is_some())
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(!strip(&a).is_empty());
    assert_eq!(
        strip(&a),
        strip(&b),
        "live frames are identical and in the same order"
    );
    for v in [&a, &b] {
        assert_eq!(kind(&v[0]), "task");
        assert_eq!(
            v.last().unwrap().1["result"]["task"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_event_id_replays_status_frames_only() {
    let s = Server::start(scripted(|_| {})).await;
    let id = start_long(&s, "tck-long-running-3").await;
    let mut a = s
        .stream(TCK, "SubscribeToTask", json!({"id": id}), None)
        .await;
    let mut seen = 0;
    while seen < 2 {
        let e = a.next().await.unwrap();
        if kind(&e) == "artifactUpdate" {
            seen = e.0.unwrap();
        }
    }
    let b = s
        .stream(TCK, "SubscribeToTask", json!({"id": id}), Some(0))
        .await
        .all()
        .await;
    assert_eq!(kind(&b[0]), "task", "the snapshot comes first");
    for e in b.iter().filter(|e| e.0.is_some_and(|i| i <= seen)) {
        assert_eq!(
            kind(e),
            "statusUpdate",
            "replayed frame {e:?} must not be an artifact chunk"
        );
    }
    assert!(
        b.iter()
            .any(|e| kind(e) == "artifactUpdate" && e.0.unwrap() > seen),
        "live artifact frames follow"
    );
    assert_eq!(
        b.last().unwrap().1["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

/// The text of a task's first artifact.
fn first_text(task: &Value) -> &str {
    task["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_mid_stream_ends_the_stream_canceled_and_keeps_what_was_streamed() {
    let s = Server::start(scripted(|_| {})).await;
    let mut events = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("tck-long-running-sc", "x")}),
            None,
        )
        .await;
    let first = events.next().await.unwrap();
    let id = first.1["result"]["task"]["id"].as_str().unwrap().to_owned();
    // "step 1 " after about a second, the next chunk a second later.
    while kind(&events.next().await.expect("the stream stays open")) != "artifactUpdate" {}
    let canceled = s.ok(TCK, "CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    let rest = events.all().await;
    assert!(
        rest.iter().any(|e| kind(e) == "statusUpdate"
            && e.1["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"),
        "the stream hears the cancel: {rest:?}"
    );
    let last = &rest.last().unwrap().1["result"]["task"];
    assert_eq!(last["status"]["state"], "TASK_STATE_CANCELED", "{rest:?}");
    assert_eq!(first_text(last), "step 1 ", "{last}");
    let t = s.ok(TCK, "GetTask", json!({"id": id})).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_CANCELED");
    assert_eq!(first_text(&t), "step 1 ", "what was streamed stays: {t}");

    // returnImmediately, then a cancel after the first chunk, seen on a subscription.
    let id = start_long(&s, "tck-long-running-ri").await;
    let mut sub = s
        .stream(TCK, "SubscribeToTask", json!({"id": id}), None)
        .await;
    while kind(&sub.next().await.expect("open")) != "artifactUpdate" {}
    s.ok(TCK, "CancelTask", json!({"id": id})).await;
    sub.drain().await;
    // The run writes what it streamed back as soon as it hears of the cancel.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        let t = s.ok(TCK, "GetTask", json!({"id": id})).await;
        assert_eq!(t["status"]["state"], "TASK_STATE_CANCELED");
        if first_text(&t) == "step 1 " {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "what was streamed is lost: {t}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reaches_the_running_turn_and_is_never_overwritten() {
    let s = Server::start(scripted(|_| {})).await;
    let id = start_long(&s, "tck-long-running-4").await;
    let mut sub = s
        .stream(TCK, "SubscribeToTask", json!({"id": id}), None)
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let canceled = s.ok(TCK, "CancelTask", json!({"id": id})).await;
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED");
    let mut frames = Vec::new();
    while let Some(e) = sub.next().await {
        frames.push(e);
    }
    assert_eq!(
        frames.last().unwrap().1["result"]["task"]["status"]["state"],
        "TASK_STATE_CANCELED",
        "subscribers end at CANCELED"
    );
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let t = s.ok(TCK, "GetTask", json!({"id": id})).await;
    assert_eq!(
        t["status"]["state"], "TASK_STATE_CANCELED",
        "the turn was stopped; no late completion"
    );
    assert_eq!(s.code(TCK, "CancelTask", json!({"id": id})).await, -32002);
    assert_eq!(
        s.code(TCK, "CancelTask", json!({"id": "nope"})).await,
        -32001
    );
    let terminal = s
        .stream(TCK, "SubscribeToTask", json!({"id": id}), None)
        .await
        .json()
        .await;
    assert_eq!(
        terminal["error"]["code"], -32004,
        "subscribing to a terminal task is an error before any stream"
    );
    let unknown = s
        .stream(TCK, "SubscribeToTask", json!({"id": "nope"}), None)
        .await
        .json()
        .await;
    assert_eq!(unknown["error"]["code"], -32001);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tasks_pages_filters_and_counts() {
    let s = Server::start(scripted(|_| {})).await;
    for i in 0..5 {
        let mut m = message(&format!("tck-complete-task-{i}"), "x");
        m["contextId"] = json!("ctx-a");
        s.ok(TCK, "SendMessage", json!({"message": m})).await;
    }
    for i in 0..2 {
        s.ok(
            TCK,
            "SendMessage",
            json!({"message": message(&format!("tck-task-failure-{i}"), "x")}),
        )
        .await;
    }
    let mut token = String::new();
    let mut ids = Vec::new();
    for page in 0..3 {
        let r = s
            .ok(
                TCK,
                "ListTasks",
                json!({"contextId": "ctx-a", "pageSize": 2, "pageToken": token}),
            )
            .await;
        assert_eq!(r["totalSize"], 5);
        assert_eq!(r["pageSize"], 2);
        ids.extend(
            r["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_owned()),
        );
        assert!(
            r["tasks"][0].get("artifacts").is_none(),
            "artifacts only with includeArtifacts"
        );
        token = r["nextPageToken"].as_str().unwrap().to_owned();
        assert_eq!(
            token.is_empty(),
            page == 2,
            "only the last page has an empty token"
        );
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5, "three pages cover the context once");
    let failed = s
        .ok(
            TCK,
            "ListTasks",
            json!({"status": "TASK_STATE_FAILED", "includeArtifacts": true}),
        )
        .await;
    assert_eq!(failed["totalSize"], 2);
    let all = s.ok(TCK, "ListTasks", json!({"historyLength": 0})).await;
    assert_eq!(all["totalSize"], 7);
    assert!(all["tasks"][0].get("history").is_none());
    let stamps: Vec<&str> = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"]["timestamp"].as_str().unwrap())
        .collect();
    assert!(
        stamps.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {stamps:?}"
    );
    assert_eq!(
        s.code(TCK, "ListTasks", json!({"pageSize": 0})).await,
        -32602
    );
    assert_eq!(
        s.code(TCK, "ListTasks", json!({"pageSize": 101})).await,
        -32602
    );
    assert_eq!(
        s.code(TCK, "ListTasks", json!({"pageToken": "garbage"}))
            .await,
        -32602
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_rules() {
    let s = Server::start(scripted(|_| {})).await;
    let r = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-input-required-1", "x")}),
        )
        .await;
    let task = &r["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let id = task["id"].as_str().unwrap();
    let ctx = task["contextId"].as_str().unwrap();

    let mut wrong = message("follow-0", "tck-complete-task");
    wrong["taskId"] = json!(id);
    wrong["contextId"] = json!("another-context");
    assert_eq!(
        s.code(TCK, "SendMessage", json!({"message": wrong})).await,
        -32602
    );

    let mut follow = message("follow-1", "tck-complete-task");
    follow["taskId"] = json!(id);
    let done = s.ok(TCK, "SendMessage", json!({"message": follow})).await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(done["task"]["contextId"], ctx);
    assert_eq!(
        done["task"]["history"].as_array().unwrap().len(),
        3,
        "user, agent question, user"
    );

    let mut late = message("follow-2", "more");
    late["taskId"] = json!(id);
    assert_eq!(
        s.code(TCK, "SendMessage", json!({"message": late})).await,
        -32004,
        "a terminal task takes no messages"
    );
    let mut unknown = message("follow-3", "more");
    unknown["taskId"] = json!("no-such-task");
    assert_eq!(
        s.code(TCK, "SendMessage", json!({"message": unknown}))
            .await,
        -32001
    );

    let id2 = start_long(&s, "tck-long-running-5").await;
    let mut busy = message("follow-4", "more");
    busy["taskId"] = json!(id2);
    assert_eq!(
        s.code(TCK, "SendMessage", json!({"message": busy})).await,
        -32004,
        "a running task takes no messages"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripted_outcomes_and_direct_messages() {
    let s = Server::start(scripted(|_| {})).await;
    let state = |r: &serde_json::Value| {
        r["task"]["status"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    assert_eq!(
        state(
            &s.ok(
                TCK,
                "SendMessage",
                json!({"message": message("tck-reject-task-1", "x")})
            )
            .await
        ),
        "TASK_STATE_REJECTED"
    );
    let failed = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-task-failure-9", "x")}),
        )
        .await;
    assert_eq!(state(&failed), "TASK_STATE_FAILED");
    assert_eq!(
        failed["task"]["status"]["message"]["parts"][0]["text"],
        "Task failed as requested"
    );
    assert_eq!(
        state(
            &s.ok(
                TCK,
                "SendMessage",
                json!({"message": message("tck-auth-required-1", "x")})
            )
            .await
        ),
        "TASK_STATE_AUTH_REQUIRED"
    );
    let data = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-artifact-data-1", "x")}),
        )
        .await;
    assert_eq!(
        data["task"]["artifacts"][0]["parts"][0]["data"],
        json!({"key": "value", "count": 42})
    );
    let file = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-artifact-file-1", "x")}),
        )
        .await;
    assert_eq!(
        file["task"]["artifacts"][0]["parts"][0]["filename"],
        "output.txt"
    );
    let direct = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-message-response-1", "x")}),
        )
        .await;
    assert_eq!(direct["message"]["role"], "ROLE_AGENT", "{direct}");
    let again = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-message-response-1", "x")}),
        )
        .await;
    assert_eq!(
        again, direct,
        "a resend is answered with the same direct message"
    );
    let mut streamed = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("tck-message-response-1", "x")}),
            None,
        )
        .await
        .all()
        .await;
    assert_eq!(
        streamed.pop().map(|(_, e)| e["result"].clone()),
        Some(direct.clone()),
        "a streamed resend too"
    );
    let by_text = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("m-text", "tck-complete-task please")}),
        )
        .await;
    assert_eq!(
        by_text["task"]["artifacts"][0]["parts"][0]["text"], "Hello from TCK",
        "first text part prefixes select too"
    );
    let delayed = s.ok(TCK, "SendMessage", json!({"message": message("tck-delayed-complete-1", "x"), "configuration": {"returnImmediately": true}})).await;
    assert_eq!(
        state(&delayed),
        "TASK_STATE_WORKING",
        "returnImmediately answers before the task settles"
    );
    let blocking = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-delayed-complete-2", "x")}),
        )
        .await;
    assert_eq!(
        state(&blocking),
        "TASK_STATE_COMPLETED",
        "blocking waits for it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_of_the_json_rpc_endpoint() {
    let s = Server::start(scripted(|_| {})).await;
    let url = format!("{}{TCK}", s.base());
    let get = |url: &str| request(&s.http, url, "GetTask", json!({"id": "x"}));
    let r = get(&url).header("a2a-version", "0.2").send().await.unwrap();
    assert_eq!(r.headers()["a2a-version"], "1.0");
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32009);
    // 0.3 is spoken too (docs/protocol.md "A2A 0.3"); a 1.0 method name stays 1.0.
    let r = get(&url).header("a2a-version", "0.3").send().await.unwrap();
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32001, "{v}");
    let r = get(&format!("{url}?A2A-Version=1.0.3"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        -32001,
        "1.0.x is served"
    );
    let r = s
        .http
        .post(&url)
        .header("content-type", "text/plain")
        .body(envelope(1, "GetTask", json!({"id": "x"})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        -32005
    );
    let r = s
        .http
        .post(&url)
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        -32700
    );
    assert_eq!(
        s.code(TCK, "CreateTaskPushNotificationConfig", json!({}))
            .await,
        -32602,
        "push is on by default: a config without url and taskId is invalid"
    );
    assert_eq!(s.code(TCK, "NoSuchMethod", json!({})).await, -32601);
    assert_eq!(s.code(TCK, "GetTask", json!({"nope": 1})).await, -32602);
    assert_eq!(
        s.code(TCK, "GetExtendedAgentCard", json!({})).await,
        -32007,
        "no token, no extended card"
    );
    let (_, output_modes) = s.rpc(TCK, "SendMessage", json!({"message": message("m-modes", "x"), "configuration": {"acceptedOutputModes": ["image/png"]}})).await;
    assert_eq!(output_modes["error"]["code"], -32005);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_are_scoped_to_their_instance() {
    let mut config = scripted(|_| {});
    config
        .instances
        .push(a2a_edge_tests::instance("other", "scripted"));
    let s = Server::start(config).await;
    let r = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-complete-task-scope", "x")}),
        )
        .await;
    let id = r["task"]["id"].as_str().unwrap();
    assert_eq!(
        s.code("/a2a/other", "GetTask", json!({"id": id})).await,
        -32001
    );
    assert_eq!(
        s.code("/a2a/other", "CancelTask", json!({"id": id})).await,
        -32001
    );
    assert_eq!(
        s.ok("/a2a/other", "ListTasks", json!({})).await["totalSize"],
        0
    );
    let again = s
        .ok(
            "/a2a/other",
            "SendMessage",
            json!({"message": message("tck-complete-task-scope", "x")}),
        )
        .await;
    assert_ne!(again["task"]["id"], id, "message ids are per instance");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_rejects_unknown_skills_and_fast_callers_before_a_task_exists() {
    let s = Server::start(scripted(|d| {
        let l = d.limits.as_mut().unwrap();
        l.rate_per_second = 0.5;
        l.rate_burst = 3;
    }))
    .await;
    let mut m = message("m-skill", "x");
    m["metadata"] = json!({"skill": "astrology"});
    let (_, blocking) = s.rpc(TCK, "SendMessage", json!({"message": m})).await;
    assert_eq!(blocking["error"]["code"], -32602);
    assert!(
        blocking["error"]["message"]
            .as_str()
            .unwrap()
            .contains("astrology")
    );
    let streaming = s
        .stream(TCK, "SendStreamingMessage", json!({"message": m}), None)
        .await
        .json()
        .await;
    assert_eq!(
        streaming["error"]["code"], -32602,
        "gate rejection on the streaming path too, before any stream"
    );
    // Skill rejections come first in the gate and took no token: the bucket still holds 3.
    for i in 0..3 {
        s.ok(
            TCK,
            "SendMessage",
            json!({"message": message(&format!("tck-complete-task-r{i}"), "x")}),
        )
        .await;
    }
    let (_, fourth) = s
        .rpc(
            TCK,
            "SendMessage",
            json!({"message": message("tck-complete-task-r3", "x")}),
        )
        .await;
    assert_eq!(
        fourth["error"]["code"], -32000,
        "the bucket of 3 is empty: {fourth}"
    );
    assert!(
        fourth["error"]["message"]
            .as_str()
            .unwrap()
            .contains("retry in")
    );
    let streamed = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("tck-complete-task-r4", "x")}),
            None,
        )
        .await
        .json()
        .await;
    assert_eq!(
        streamed["error"]["code"], -32000,
        "rate limits answer -32000 on the streaming path too"
    );
    assert_eq!(
        s.ok(TCK, "ListTasks", json!({})).await["totalSize"],
        3,
        "rejections created no task"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_and_execution_timeout_end_tasks_failed_naming_the_limit() {
    let s = Server::start(scripted(|d| {
        let l = d.limits.as_mut().unwrap();
        l.max_concurrent_tasks = 1;
        l.execution_timeout_ms = 1500;
    }))
    .await;
    let first = start_long(&s, "tck-long-running-q").await;
    let second = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-complete-task-q", "x")}),
        )
        .await;
    assert_eq!(second["task"]["status"]["state"], "TASK_STATE_FAILED");
    assert!(
        second["task"]["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("concurrency quota")
    );
    let t = s.wait_state(TCK, &first, "TASK_STATE_FAILED", 10).await;
    assert!(
        t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains("execution timeout"),
        "{t}"
    );
    let after = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-complete-task-q2", "x")}),
        )
        .await;
    assert_eq!(
        after["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "the slot was released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_checked_before_any_stream_starts() {
    // SAFETY: set before the server reads it; no other test reads this variable.
    unsafe { std::env::set_var("A2A_TEST_TOKEN_STREAM", "s3cret-stream") };
    let s = Server::start(scripted(|d| {
        d.auth_token_env = Some("A2A_TEST_TOKEN_STREAM".into())
    }))
    .await;
    let events = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("m", "x")}),
            None,
        )
        .await;
    assert_eq!(events.status(), 401);
    let url = format!("{}{TCK}", s.base());
    let get = || request(&s.http, &url, "GetTask", json!({"id": "x"}));
    let r = get().send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer realm=\"tck\"");
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        -32040
    );
    let r = get().bearer_auth("s3cret-stream").send().await.unwrap();
    assert_eq!(
        r.json::<serde_json::Value>().await.unwrap()["error"]["code"],
        -32001
    );
    let (_, card) = s.get(&format!("{TCK}/agent-card.json")).await;
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    assert!(!card.to_string().contains("s3cret-stream"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_left_running_by_a_stopped_process_are_failed_on_start() {
    let mut s = Server::start(scripted(|_| {})).await;
    let id = start_long(&s, "tck-long-running-restart").await;
    s.restart().await;
    let t = s.ok(TCK, "GetTask", json!({"id": id})).await;
    assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{t}");
    assert_eq!(
        t["status"]["message"]["parts"][0]["text"],
        "interrupted by runtime restart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_answering_with_a_message_streams_that_message_alone() {
    let s = Server::start(scripted(|_| {})).await;
    let events = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("tck-message-response-s", "x")}),
            None,
        )
        .await;
    let events = events.all().await;
    assert_eq!(events.len(), 1, "one frame: {events:?}");
    assert_eq!(kind(&events[0]), "message");
    assert_eq!(events[0].1["result"]["message"]["role"], "ROLE_AGENT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_streams_get_keep_alive_comments_at_the_configured_interval() {
    let s = Server::start(scripted(|d| d.limits.as_mut().unwrap().keep_alive_ms = 400)).await;
    let mut sent = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("tck-long-running-ka", "x")}),
            None,
        )
        .await;
    let first = sent.next().await.unwrap();
    assert_eq!(
        kind(&first),
        "task",
        "a slow turn still shows its task at once"
    );
    let id = first.1["result"]["task"]["id"].as_str().unwrap().to_owned();
    let mut subscribed = s
        .stream(TCK, "SubscribeToTask", json!({"id": id}), None)
        .await;
    let (a, b) = tokio::join!(sent.drain(), subscribed.drain());
    assert_eq!(kind(a.last().unwrap()), "task");
    assert_eq!(kind(b.last().unwrap()), "task");
    // The turn stays quiet for ~4 s: at 400 ms both streams carry several keep-alives.
    assert!(
        sent.comments >= 3,
        "send stream: {} keep-alives",
        sent.comments
    );
    assert!(
        subscribed.comments >= 3,
        "subscription: {} keep-alives",
        subscribed.comments
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_come_in_the_media_type_the_request_used() {
    let s = Server::default().await;
    let body = envelope(
        1,
        "SendMessage",
        json!({"message": {"messageId": "media-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
    );
    for (sent, want) in [
        ("application/a2a+json", "application/a2a+json"),
        ("application/json", "application/json"),
    ] {
        let r = s
            .http
            .post(format!("{}/a2a/demo", s.base()))
            .header("content-type", sent)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], want, "JSON-RPC with {sent}");
        let task: Value = r.json().await.unwrap();
        let id = task["result"]["task"]["id"].as_str().unwrap().to_owned();
        // The HTTP+JSON binding, and an error, alike.
        let got = s
            .http
            .get(format!("{}/a2a/demo/tasks/{id}", s.base()))
            .header("accept", sent)
            .send()
            .await
            .unwrap();
        assert_eq!(
            got.headers()["content-type"],
            want,
            "REST GET accepting {sent}"
        );
        let missing = s
            .http
            .post(format!("{}/a2a/demo", s.base()))
            .header("content-type", sent)
            .body(envelope(2, "GetTask", json!({"id": "nope"})).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(
            missing.headers()["content-type"],
            want,
            "an error with {sent}"
        );
    }
}
