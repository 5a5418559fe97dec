//! A2A 0.3 beside 1.0 over real HTTP: the same task through both, the one card read by both
//! (and at the 0.2-era well-known path), and `compat03 = false` serving a clean 1.0 agent that
//! tells 0.3 callers what it speaks.

use a2a_edge_tests::{Server, scripted};
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
        assert_eq!(versions, ["1.0", "1.0", "1.0", "0.3"], "{path}");
    }
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
