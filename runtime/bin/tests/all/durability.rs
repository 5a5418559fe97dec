//! docs/operating.md "When things fail" against the real binary: a task acknowledged to a client is durable at that moment.
//! Sixteen clients send under load, the process is killed with SIGKILL mid-flight, and every task
//! any client heard of is there after a restart, settled, and its message is still a retry.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use a2a_edge_tests::binary::{free_port, ready, spawn_binary};
use a2a_edge_tests::events::{Events, numbered, state};
use a2a_edge_tests::jsonrpc::request;
use a2a_edge_tests::shared_cache;

/// A data directory `a2a-edge serve` runs on, restarted as a test needs, on one port.
struct Served {
    dir: tempfile::TempDir,
    port: u16,
    base: String,
    client: reqwest::Client,
}

impl Served {
    /// A data directory whose config sets the shared compile cache, then says `config`.
    fn new(config: &str) -> Served {
        let dir = tempfile::tempdir().unwrap();
        let cache = shared_cache();
        let config = format!("[runtime]\ncacheDir = {cache:?}\n{config}");
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        let port = free_port();
        Served {
            dir,
            port,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
        }
    }

    /// `a2a-edge serve` on it, once it answers.
    async fn start(&self) -> std::process::Child {
        let server = spawn_binary(env!("CARGO_BIN_EXE_a2a-edge"), self.dir.path(), self.port);
        ready(&self.client, &self.base).await;
        server
    }
}

async fn rpc(client: &reqwest::Client, base: &str, method: &str, params: Value) -> Option<Value> {
    let answer: Value = request(client, &format!("{base}/a2a/demo"), method, params)
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    answer.get("result").cloned()
}

fn message(id: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "keep me"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_task_is_lost_when_the_process_is_killed_under_load() {
    let served = Served::new("[storage]\nfsync = true\n");
    let (base, client) = (&served.base, &served.client);
    let mut server = served.start().await;

    let heard: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let senders: Vec<_> = (0..16)
        .map(|n| {
            let (client, base, heard) = (client.clone(), base.clone(), heard.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    let id = format!("kill-{n}-{i}");
                    let Some(r) = rpc(&client, &base, "SendMessage", message(&id)).await else {
                        return;
                    };
                    let task = r["task"]["id"].as_str().unwrap().to_owned();
                    heard.lock().unwrap().push((id, task));
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();
    for s in senders {
        s.await.unwrap();
    }
    let heard = std::mem::take(&mut *heard.lock().unwrap());
    assert!(heard.len() > 16, "the load ran: {} answers", heard.len());

    let mut server = served.start().await;
    for (_, task_id) in &heard {
        let task = rpc(client, base, "GetTask", json!({"id": task_id}))
            .await
            .unwrap_or_else(|| panic!("acknowledged task {task_id} is gone after SIGKILL"));
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    }
    for (message_id, task_id) in heard.iter().step_by(97) {
        let again = rpc(client, base, "SendMessage", message(message_id))
            .await
            .unwrap();
        assert_eq!(
            &again["task"]["id"], task_id,
            "the message id index survived too"
        );
    }
    server.kill().unwrap();
    server.wait().unwrap();
}

/// The frame log is in the database: a task continued after a restart goes on with the next
/// sequence ids (the ids a client resumes by never repeat), and the frames written before the
/// restart are still there to replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frame_ids_continue_across_a_restart() {
    let served = Served::new(
        "[[instances]]\nid = \"demo\"\nname = \"demo\"\n\
         [[instances]]\nid = \"tck\"\nname = \"tck\"\npreset = \"scripted\"\n",
    );
    let (base, client) = (&served.base, &served.client);
    let turn = |text: &str, task: Option<&str>| {
        json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
            "taskId": task, "parts": [{"text": text}]}})
    };
    let mut server = served.start().await;
    let first = Events::open(
        client,
        &format!("{base}/a2a/tck"),
        "SendStreamingMessage",
        turn("tck-multi-turn", None),
        None,
    )
    .await
    .results()
    .await;
    assert_eq!(state(&first.last().unwrap().1), "TASK_STATE_INPUT_REQUIRED");
    let task_id = first[0].1["task"]["id"].as_str().unwrap().to_owned();
    let before: Vec<u64> = numbered(&first).iter().map(|(id, _)| *id).collect();
    assert!(!before.is_empty(), "{first:?}");
    server.kill().unwrap();
    server.wait().unwrap();

    let mut server = served.start().await;
    let second = Events::open(
        client,
        &format!("{base}/a2a/tck"),
        "SendStreamingMessage",
        turn("done", Some(&task_id)),
        None,
    )
    .await
    .results()
    .await;
    assert_eq!(state(&second.last().unwrap().1), "TASK_STATE_COMPLETED");
    let after: Vec<u64> = numbered(&second).iter().map(|(id, _)| *id).collect();
    let last = *before.last().unwrap();
    // (The WORKING status of the continuation is logged before this stream is attached.)
    assert!(
        !after.is_empty() && after.iter().all(|id| *id > last),
        "the sequence goes on after the restart: {before:?} then {after:?}"
    );
    server.kill().unwrap();
    server.wait().unwrap();
}

/// GetTask sends a stored body as it is only when the component's build wrote it as it is now:
/// a body changed since by anyone else (which keeps the stamp it had) or stored before bodies
/// were stamped is parsed and written again, never sent stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_body_goes_out_verbatim_only_as_its_build_wrote_it() {
    let served = Served::new("");
    let (base, client) = (&served.base, &served.client);
    let mut server = served.start().await;
    let mut ids = Vec::new();
    for m in ["kept", "edited", "older"] {
        let r = rpc(client, base, "SendMessage", message(m)).await.unwrap();
        ids.push(r["task"]["id"].as_str().unwrap().to_owned());
    }
    // A listing folds the task log into `tasks`.
    rpc(client, base, "ListTasks", json!({})).await.unwrap();
    server.kill().unwrap();
    server.wait().unwrap();

    let db = rusqlite::Connection::open(served.dir.path().join("a2a-edge.db")).unwrap();
    let body = |id: &str| -> String {
        db.query_row("SELECT body FROM tasks WHERE id = ?1", [id], |r| r.get(0))
            .unwrap()
    };
    let kept = body(&ids[0]);
    // Spaced out (as no build writes it) and changed, its stamp left as it was.
    let edited: Value = serde_json::from_str(&body(&ids[1]).replace("keep me", "changed")).unwrap();
    db.execute(
        "UPDATE tasks SET body = ?2 WHERE id = ?1",
        [&ids[1], &serde_json::to_string_pretty(&edited).unwrap()],
    )
    .unwrap();
    // As a release before the stamps stored it: no stamp, and a field 1.0 does not have.
    let mut older: Value = serde_json::from_str(&body(&ids[2])).unwrap();
    older["kind"] = json!("task");
    db.execute(
        "UPDATE tasks SET body = ?2, stamp = 0 WHERE id = ?1",
        [&ids[2], &serde_json::to_string_pretty(&older).unwrap()],
    )
    .unwrap();
    drop(db);

    let mut server = served.start().await;
    let get = async |id: &str| {
        request(
            client,
            &format!("{base}/a2a/demo"),
            "GetTask",
            json!({"id": id}),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
    };
    let text = get(&ids[0]).await;
    assert!(
        text.contains(&format!(r#""result":{kept}}}"#)),
        "{text}\n{kept}"
    );
    // Both go out as their parse writes them: compact, with nothing 1.0 does not have.
    let parsed = async |id: &str| {
        let text = get(id).await;
        assert!(!text.contains(": "), "{text}");
        serde_json::from_str::<Value>(&text).unwrap()["result"].clone()
    };
    assert_eq!(parsed(&ids[1]).await, edited, "the body as changed");
    older.as_object_mut().unwrap().remove("kind");
    assert_eq!(
        parsed(&ids[2]).await,
        older,
        "the older body, without `kind`"
    );
    server.kill().unwrap();
    server.wait().unwrap();
}
