//! The runtime on PostgreSQL (`[storage] backend = "postgres"`): what a client sees is what it
//! sees on SQLite, tasks survive a restart, and two nodes on one database share tasks and the
//! message-id index.

use a2a_edge::config::{Config, StorageBackend};
use serde_json::{Value, json};

mod common;
use common::{Served, fresh_postgres};

fn on(url: &str) -> Config {
    let mut c = Config::default();
    c.storage.backend = StorageBackend::Postgres;
    c.storage.url = Some(url.to_owned());
    c
}

async fn rpc(base: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    reqwest::Client::new()
        .post(format!("{base}/a2a/demo"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn send(id: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "hello pg"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_one_database_share_tasks_and_retries() {
    let Some(url) = fresh_postgres().await else {
        return;
    };
    let a = Served::start_with(on(&url)).await;
    let b = Served::start_with(on(&url)).await;
    let sent = rpc(&a.base(), "SendMessage", send("pg-1")).await;
    let task = sent["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    let got = rpc(&b.base(), "GetTask", json!({"id": task["id"]})).await;
    assert_eq!(
        got["result"]["id"], task["id"],
        "node B reads node A's task: {got}"
    );
    let again = rpc(&b.base(), "SendMessage", send("pg-1")).await;
    assert_eq!(
        again["result"]["task"]["id"], task["id"],
        "a resend to B of a message sent to A is a retry: {again}"
    );
    let listed = rpc(&b.base(), "ListTasks", json!({})).await;
    assert_eq!(listed["result"]["totalSize"], 1, "no second task: {listed}");
    // An instance created on A is served by B at B's next look (every 250 ms; the test allows
    // a noisy machine 5 s and prints what it took).
    let created: Value = reqwest::Client::new()
        .post(format!("{}/a2a/api", a.base()))
        .json(&json!({"action": "inbound.create", "name": "Shared", "description": "d", "version": "1"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let card = format!("{}/a2a/{id}/agent-card.json", b.base());
    let started = std::time::Instant::now();
    loop {
        let status = reqwest::get(&card).await.unwrap().status();
        if status == 200 {
            println!("B served A's new instance after {:?}", started.elapsed());
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "B does not serve the instance A created after {:?} (last answer {status})",
            started.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    drop(a);
    let restarted = Served::start_with(on(&url)).await;
    let got = rpc(&restarted.base(), "GetTask", json!({"id": task["id"]})).await;
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        "hello pg"
    );
}
