//! A binary of its own: its harness reports its tests ignored, not passed, without PostgreSQL.
//!
//! The runtime on PostgreSQL (`[storage] backend = "postgres"`): what a client sees is what it
//! sees on SQLite, tasks survive a restart, and several nodes on one database share tasks, the
//! message-id index, frame logs (streams across nodes), cancel, secrets and failover.

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_edge::config::{Config, InstanceDecl, StorageBackend};
use a2a_edge::sessions::preset::{Backend, CommandSettings, Preset};
use serde_json::{Value, json};

use a2a_edge_tests::binary::{free_port, ready, spawn_binary, spawn_logging};
use a2a_edge_tests::events::{numbered, state};
use a2a_edge_tests::faults::Fault;
use a2a_edge_tests::jsonrpc::{call, request};
use a2a_edge_tests::postgres::{behind_proxy, database, fresh_postgres, postgres_missing};
use a2a_edge_tests::trials::{self, flow};
use a2a_edge_tests::webhook::Webhook;
use a2a_edge_tests::{Server, action, flows, shared_cache};

/// The binary the node processes run.
const BIN: &str = env!("CARGO_BIN_EXE_a2a-edge");

/// The cluster key every test node reads (the same file, as every node of a cluster must).
fn key_file() -> PathBuf {
    let path = std::env::temp_dir().join("a2a-edge-test-cluster.key");
    // Written aside and renamed over: a node reading it meanwhile never sees it half written.
    let tmp = path.with_extension(format!("{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// A sleep unique to this test process, so leftovers of other runs never match.
fn nap() -> String {
    format!("41.{}", std::process::id())
}

fn command(id: &str, command: Vec<String>) -> Preset {
    Preset::new(
        id,
        Backend::Command(CommandSettings {
            command,
            working_dir: None,
            timeout_ms: None,
        }),
    )
}

/// A node's config on `url`: the demo (echo), `tck` (scripted), `slow` (a command that sleeps)
/// and `ticker` (a command that prints a line every 0.4 s for 6 s) instances, a 2 s lease.
fn on(url: &str) -> Config {
    let mut c = Config::default();
    c.storage.backend = StorageBackend::Postgres;
    c.storage.url = Some(url.to_owned());
    c.cluster.secret_key_file = Some(key_file());
    c.cluster.lease_ms = 2000;
    let ticker = "for i in $(seq 1 15); do echo tick $i; sleep 0.4; done";
    c.presets = vec![
        command("slow", vec!["sleep".into(), nap()]),
        command("ticker", vec!["sh".into(), "-c".into(), ticker.into()]),
    ];
    let decl = |id: &str, preset: &str| InstanceDecl {
        id: Some(id.into()),
        name: id.into(),
        preset: Some(preset.into()),
        ..Default::default()
    };
    c.instances = vec![
        decl("demo", "echo"),
        decl("tck", "scripted"),
        decl("slow", "slow"),
        decl("ticker", "ticker"),
    ];
    c
}

/// The same config as a file for the binary, in `dir`.
fn write_config(dir: &std::path::Path, url: &str) {
    let toml = format!(
        "[runtime]\ncacheDir = {:?}\n[storage]\nbackend = \"postgres\"\nurl = {url:?}\n\
         [cluster]\nleaseMs = 2000\nsecretKeyFile = {:?}\n\
         [[instances]]\nid = \"demo\"\nname = \"demo\"\n\
         [[instances]]\nid = \"tck\"\nname = \"tck\"\npreset = \"scripted\"\n",
        shared_cache(),
        key_file()
    );
    std::fs::write(dir.join("config.toml"), toml).unwrap();
}

/// Every test here needs PostgreSQL: without `A2A_EDGE_TEST_POSTGRES` they are reported ignored
/// (failed under `A2A_EDGE_REQUIRE_POSTGRES`).
fn main() -> std::process::ExitCode {
    let flows = flows![
        two_nodes_on_one_database_share_tasks_and_retries,
        streams_follow_a_task_across_nodes_and_node_restarts,
        a_cancel_on_one_node_stops_the_turn_on_another,
        a_token_set_on_one_node_is_enforced_on_the_others_and_sealed_at_rest,
        the_tasks_of_a_killed_node_are_settled_by_another_after_its_lease,
        round_robin_load_over_nodes_loses_no_acknowledged_task_when_one_is_killed,
        a_database_outage_at_the_end_of_turns_leaves_no_task_working,
        a_hung_database_is_answered_503_with_retry_after_and_recovers_by_itself,
        a_node_that_lost_its_lease_stops_the_turn_and_logs_nothing_after_the_final_frame,
        a_blocking_send_resent_to_another_node_runs_one_turn,
        a_node_with_another_cluster_key_is_refused_on_a_fresh_database,
        webhook_secrets_are_sealed_at_rest_and_absent_from_a_debug_log,
        an_agents_key_value_buckets_are_shared_by_every_node,
        a_key_revoked_on_one_node_is_refused_by_the_others,
        readyz_turns_503_within_2_s_of_the_database_stopping_and_200_after_it_returns,
    ];
    trials::run(
        postgres_missing(),
        "A2A_EDGE_REQUIRE_POSTGRES",
        flows,
        Vec::new(),
    )
}

async fn rpc(base: &str, method: &str, params: Value) -> Value {
    call(base, "demo", method, params).await
}

/// Two nodes in this process on a fresh database, and its URL (none: no test cluster).
async fn two_nodes() -> (String, Server, Server) {
    let url = fresh_postgres().await;
    let a = Server::start(on(&url)).await;
    let b = Server::start(on(&url)).await;
    (url, a, b)
}

fn send(id: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "hello pg"}]}})
}

async fn two_nodes_on_one_database_share_tasks_and_retries() {
    let (url, a, b) = two_nodes().await;
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
    let created: Value = action(
        &a.base(),
        json!({"action": "inbound.create", "name": "Shared", "description": "d", "version": "1"}),
    )
    .await;
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
    let restarted = Server::start(on(&url)).await;
    let got = rpc(&restarted.base(), "GetTask", json!({"id": task["id"]})).await;
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        "hello pg"
    );
}

async fn streams_follow_a_task_across_nodes_and_node_restarts() {
    let (url, a, mut b) = two_nodes().await;
    // A runs a 4 s task for its caller; B's subscriber gets every frame, in order, live.
    let long = |id: &str| json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "go"}]}});
    let mut on_a = a
        .stream(
            "/a2a/tck",
            "SendStreamingMessage",
            long("tck-long-running-x1"),
            None,
        )
        .await;
    let (_, first) = on_a.next_result().await.unwrap();
    let task_id = first["task"]["id"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let mut on_b = b
        .stream("/a2a/tck", "SubscribeToTask", json!({"id": task_id}), None)
        .await;
    let (from_a, from_b) = tokio::join!(on_a.results(), on_b.results());
    let (na, nb) = (numbered(&from_a), numbered(&from_b));
    assert!(
        nb.len() >= 5,
        "four steps and the COMPLETED status reach B: {from_b:?}"
    );
    let skipped = na.len() - nb.len();
    assert_eq!(
        nb,
        na[skipped..],
        "B gets A's frames, same ids, same order, none missing"
    );
    assert_eq!(state(&from_b.last().unwrap().1), "TASK_STATE_COMPLETED");
    println!(
        "B's subscriber saw the task settle {:?} after subscribing",
        started.elapsed()
    );

    // A subscriber on B reads part of a task, B restarts, the subscriber resumes on the new B
    // with Last-Event-ID: the status frames after it (none of the artifact chunks it had), then
    // every later frame live, ids never repeated.
    let sent = call(
        &a.base(),
        "ticker",
        "SendMessage",
        json!({"message": long("tick-1")["message"], "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let mut first_b = b
        .stream(
            "/a2a/ticker",
            "SubscribeToTask",
            json!({"id": task_id}),
            None,
        )
        .await;
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let (id, frame) = first_b
            .next_result()
            .await
            .expect("frames before the restart");
        if let Some(id) = id {
            seen.push((id, frame));
        }
    }
    drop(first_b);
    drop(b);
    b = Server::start(on(&url)).await;
    let last = seen.last().unwrap().0;
    let mut resumed = b
        .stream(
            "/a2a/ticker",
            "SubscribeToTask",
            json!({"id": task_id}),
            Some(last),
        )
        .await;
    let after = resumed.results().await;
    let ids: Vec<u64> = numbered(&after).iter().map(|(id, _)| *id).collect();
    assert!(
        !ids.is_empty() && ids.iter().all(|id| *id > last),
        "{ids:?} after {last}"
    );
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "in order: {ids:?}");
    assert_eq!(
        state(&after.last().unwrap().1),
        "TASK_STATE_COMPLETED",
        "{after:?}"
    );
    let replayed = numbered(&after)
        .iter()
        .filter(|(_, f)| f.get("artifactUpdate").is_some())
        .count();
    assert!(
        replayed > 0,
        "live chunks after the resume arrive: {after:?}"
    );
}

fn sleepers() -> usize {
    let out = std::process::Command::new("pgrep")
        .args(["-f", &format!("sleep {}", nap())])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

async fn a_cancel_on_one_node_stops_the_turn_on_another() {
    let (_, a, b) = two_nodes().await;
    let message = json!({"messageId": "slow-1", "role": "ROLE_USER", "parts": [{"text": "nap"}]});
    let sent = call(
        &a.base(),
        "slow",
        "SendMessage",
        json!({"message": message, "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    while sleepers() == 0 {
        assert!(Instant::now() < deadline, "the turn did not start on A");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let canceled = call(&b.base(), "slow", "CancelTask", json!({"id": task_id})).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let started = Instant::now();
    while sleepers() > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "A's turn (a 41 s sleep) still runs {:?} after B canceled its task",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "A stopped the turn {:?} after the cancel on B",
        started.elapsed()
    );
    let got = call(&a.base(), "slow", "GetTask", json!({"id": task_id})).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "A's turn wrote nothing over it: {got}"
    );
}

async fn a_token_set_on_one_node_is_enforced_on_the_others_and_sealed_at_rest() {
    let (url, a, b) = two_nodes().await;
    let token = "cluster-token-0123456789abcdef";
    let set: Value = action(
        &a.base(),
        json!({"action": "inbound.setAuth", "id": "demo", "token": token}),
    )
    .await;
    assert_eq!(set["ok"], true, "{set}");
    let card = format!("{}/a2a/demo", b.base());
    let get = || {
        request(
            &reqwest::Client::new(),
            &card,
            "GetTask",
            json!({"id": "none"}),
        )
    };
    let started = Instant::now();
    loop {
        let status = get().send().await.unwrap().status();
        if status == 401 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "B still answers {status} without the token A set"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("B enforced A's token after {:?}", started.elapsed());
    let with = get().bearer_auth(token).send().await.unwrap();
    assert_eq!(with.status(), 200, "and takes it");
    let db = database(&url).await;
    let rows = db
        .query(
            "SELECT name, nonce, sealed FROM secrets WHERE name <> 'a2a-edge/key-check'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let sealed: Vec<u8> = rows[0].get(2);
    assert!(
        !sealed.windows(token.len()).any(|w| w == token.as_bytes()),
        "the database never holds the token in plaintext"
    );
    let everything = db
        .query("SELECT body FROM instances", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<String>();
    assert!(!everything.contains(token));
}

/// A node process on `url` in a fresh directory.
struct Node {
    child: std::process::Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Node {
    async fn start(url: &str) -> Node {
        let dir = tempfile::tempdir().unwrap();
        write_config(dir.path(), url);
        let port = free_port();
        let child = spawn_binary(BIN, dir.path(), port);
        let base = format!("http://127.0.0.1:{port}");
        ready(&reqwest::Client::new(), &base).await;
        Node {
            child,
            base,
            _dir: dir,
        }
    }

    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn the_tasks_of_a_killed_node_are_settled_by_another_after_its_lease() {
    let url = fresh_postgres().await;
    let mut a = Node::start(&url).await;
    let b = Server::start(on(&url)).await;
    let message = json!({"messageId": "tck-long-running-kill", "role": "ROLE_USER", "parts": [{"text": "go"}]});
    let sent = call(
        &a.base,
        "tck",
        "SendMessage",
        json!({"message": message, "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task_id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.kill();
    let killed = Instant::now();
    let settled = loop {
        let got = call(&b.base(), "tck", "GetTask", json!({"id": task_id})).await;
        let state = got["result"]["status"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if state != "TASK_STATE_WORKING" {
            break got;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "still WORKING {:?} after its node died",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        settled["result"]["status"]["state"], "TASK_STATE_FAILED",
        "{settled}"
    );
    assert!(settled.to_string().contains("node lost"), "{settled}");
    println!(
        "B settled the killed node's task {:?} after the kill (lease 2 s)",
        killed.elapsed()
    );
    let metrics: Value = reqwest::get(format!("{}/a2a/api/metrics", b.base()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        metrics["cluster"]["failedOver"], 1,
        "B counts it: {metrics}"
    );
}

async fn round_robin_load_over_nodes_loses_no_acknowledged_task_when_one_is_killed() {
    let url = fresh_postgres().await;
    let nodes = vec![
        Node::start(&url).await,
        Node::start(&url).await,
        Node::start(&url).await,
    ];
    let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
    let nodes = Arc::new(Mutex::new(nodes));
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let run_for = Duration::from_secs(30);
    let started = Instant::now();
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let (bases, acked, refused) = (bases.clone(), acked.clone(), refused.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
                let mut i = 0usize;
                while started.elapsed() < run_for {
                    i += 1;
                    let base = &bases[(c + i) % bases.len()];
                    let params = json!({"message": {"messageId": format!("rr-{c}-{i}"), "role": "ROLE_USER", "parts": [{"text": "keep me"}]}});
                    let answer = request(&client, &format!("{base}/a2a/demo"), "SendMessage", params).send().await;
                    let Ok(answer) = answer else {
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    };
                    let Ok(v) = answer.json::<Value>().await else {
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    };
                    if v["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED" {
                        acked.lock().unwrap().push(v["result"]["task"]["id"].as_str().unwrap().to_owned());
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(run_for / 2).await;
    nodes.lock().unwrap()[1].kill();
    for c in clients {
        c.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 100, "the load ran: {} tasks", acked.len());
    let survivor = &bases[0];
    let mut missing = Vec::new();
    for id in &acked {
        let got = rpc(survivor, "GetTask", json!({"id": id})).await;
        if got["result"]["status"]["state"] != "TASK_STATE_COMPLETED" {
            missing.push((id.clone(), got));
        }
    }
    assert!(
        missing.is_empty(),
        "acknowledged but not stored COMPLETED: {missing:?}"
    );
    println!(
        "{} acknowledged tasks over 3 nodes in {run_for:?}, node 2 killed at {:?}; {} calls failed at the dead node; all {} found COMPLETED",
        acked.len(),
        run_for / 2,
        refused.load(std::sync::atomic::Ordering::Relaxed),
        acked.len()
    );
    // Nothing stays WORKING once the dead node's leases ran out.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let working = rpc(
        survivor,
        "ListTasks",
        json!({"status": "TASK_STATE_WORKING"}),
    )
    .await;
    assert_eq!(working["result"]["totalSize"], 0, "{working}");
}

/// A message to `instance` that is answered at once, its task WORKING.
async fn start_task(base: &str, instance: &str, id: &str) -> String {
    let sent = call(
        base,
        instance,
        "SendMessage",
        json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "go"}]},
               "configuration": {"returnImmediately": true}}),
    )
    .await;
    sent["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{sent}"))
        .to_owned()
}

/// Polls `instance`'s task at `base` until it is not WORKING (at most `secs`); its answer.
async fn settled(base: &str, instance: &str, task: &str, secs: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let got = call(base, instance, "GetTask", json!({"id": task})).await;
        let state = got["result"]["status"]["state"].as_str().unwrap_or("");
        if !state.is_empty() && state != "TASK_STATE_WORKING" {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "task {task} still WORKING: {got}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_database_outage_at_the_end_of_turns_leaves_no_task_working() {
    let url = fresh_postgres().await;
    let (proxy, a) = behind_proxy(&url, on).await;
    let mut tasks = Vec::new();
    for i in 0..3 {
        tasks.push(start_task(&a.base(), "ticker", &format!("outage-{i}")).await);
    }
    // The turns (6 s of output) end while the database is down: their final writes fail.
    tokio::time::sleep(Duration::from_secs(4)).await;
    proxy.set(Fault::Cut);
    tokio::time::sleep(Duration::from_secs(5)).await;
    proxy.set(Fault::Pass);
    for task in &tasks {
        let got = settled(&a.base(), "ticker", task, 30).await;
        assert_eq!(
            got["result"]["status"]["state"], "TASK_STATE_FAILED",
            "settled with the cause once the database answered: {got}"
        );
    }
}

async fn a_hung_database_is_answered_503_with_retry_after_and_recovers_by_itself() {
    let url = fresh_postgres().await;
    let (proxy, a) = behind_proxy(&url, on).await;
    assert_eq!(
        rpc(&a.base(), "SendMessage", send("hung-0")).await["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    proxy.set(Fault::Freeze);
    // A client that would wait a minute: every answer comes long before.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let post = |method: &str, accept: &str| {
        request(
            &client,
            &format!("{}/a2a/demo", a.base()),
            method,
            send("hung-1"),
        )
        .header("accept", accept)
        .send()
    };
    for (method, accept) in [
        ("SendMessage", "application/json"),
        ("SendStreamingMessage", "text/event-stream"),
    ] {
        let r = post(method, accept).await.expect("answered, not hung");
        assert_eq!(r.status(), 503, "{method}");
        assert!(r.headers().get("retry-after").is_some(), "{method}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["data"][0]["reason"], "UNAVAILABLE", "{body}");
        assert!(
            !body.to_string().contains("database"),
            "the cause stays in the log: {body}"
        );
    }
    let metrics = client
        .get(format!("{}/a2a/api/metrics", a.base()))
        .send()
        .await
        .expect("the metrics answer too");
    assert!(metrics.status().is_success() || metrics.status() == 503);
    proxy.set(Fault::Pass);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = rpc(&a.base(), "SendMessage", send("hung-1")).await;
        if got["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED" {
            break;
        }
        assert!(Instant::now() < deadline, "did not recover: {got}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn a_node_that_lost_its_lease_stops_the_turn_and_logs_nothing_after_the_final_frame() {
    let url = fresh_postgres().await;
    let marker = format!("zombie-{}", uuid::Uuid::new_v4().simple());
    let dir = tempfile::tempdir().unwrap();
    let ticks = "for i in $(seq 1 60); do echo tick $i; sleep 0.25; done";
    let toml = format!(
        "[runtime]\ncacheDir = {:?}\n[storage]\nbackend = \"postgres\"\nurl = {url:?}\n\
         [cluster]\nleaseMs = 2000\nsecretKeyFile = {:?}\n\
         [[presets]]\nid = \"zombie\"\nbackend = \"command\"\ncommand = [\"sh\", \"-c\", {ticks:?}, {marker:?}]\n\
         [[instances]]\nid = \"demo\"\nname = \"demo\"\n\
         [[instances]]\nid = \"zombie\"\nname = \"zombie\"\npreset = \"zombie\"\n",
        shared_cache(),
        key_file()
    );
    std::fs::write(dir.path().join("config.toml"), toml).unwrap();
    let port = free_port();
    let mut a = spawn_binary(BIN, dir.path(), port);
    let a_base = format!("http://127.0.0.1:{port}");
    ready(&reqwest::Client::new(), &a_base).await;
    let mut on_b = on(&url);
    on_b.presets.push(command(
        "zombie",
        vec!["sh".into(), "-c".into(), ticks.into(), marker.clone()],
    ));
    on_b.instances.push(InstanceDecl {
        id: Some("zombie".into()),
        name: "zombie".into(),
        preset: Some("zombie".into()),
        ..Default::default()
    });
    let b = Server::start(on_b).await;
    let task = start_task(&a_base, "zombie", "zombie-1").await;
    // And a blocking send, waiting on A for its answer.
    let blocking = tokio::spawn({
        let a_base = a_base.clone();
        async move {
            call(
                &a_base,
                "zombie",
                "SendMessage",
                json!({"message": {"messageId": "zombie-2", "role": "ROLE_USER", "parts": [{"text": "go"}]}}),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let running = || {
        Command::new("pgrep")
            .args(["-f", &marker])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    assert!(running(), "the command runs");
    // A stops past its lease; B settles the task FAILED (node lost).
    unsafe { libc::kill(a.id() as i32, libc::SIGSTOP) };
    let lost = settled(&b.base(), "zombie", &task, 30).await;
    assert!(lost.to_string().contains("node lost"), "{lost}");
    unsafe { libc::kill(a.id() as i32, libc::SIGCONT) };
    // The blocking send answers the task as B settled it.
    let answer = tokio::time::timeout(Duration::from_secs(20), blocking)
        .await
        .expect("the blocking send is answered after the thaw")
        .unwrap();
    let settled_task = &answer["result"]["task"];
    assert_eq!(
        settled_task["status"]["state"], "TASK_STATE_FAILED",
        "{answer}"
    );
    assert!(answer.to_string().contains("node lost"), "{answer}");
    // A wakes up: its next writes are refused and it stops the turn.
    let deadline = Instant::now() + Duration::from_secs(20);
    while running() {
        assert!(Instant::now() < deadline, "A kept running the command");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let db = database(&url).await;
    let frames: Vec<String> = db
        .query(
            "SELECT json FROM task_frames WHERE task_id = $1 ORDER BY seq",
            &[&task],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let failed = frames
        .iter()
        .position(|f| f.contains("TASK_STATE_FAILED"))
        .expect("the FAILED frame is logged");
    assert_eq!(
        failed,
        frames.len() - 1,
        "no frame after the final one: {:?}",
        &frames[failed..]
    );
    let after = call(&b.base(), "zombie", "GetTask", json!({"id": task})).await;
    assert_eq!(
        after["result"]["status"]["state"], "TASK_STATE_FAILED",
        "{after}"
    );
    let _ = a.kill();
    let _ = a.wait();
}

async fn a_blocking_send_resent_to_another_node_runs_one_turn() {
    let url = fresh_postgres().await;
    let runs = tempfile::NamedTempFile::new().unwrap();
    let with_counted = || {
        let mut c = on(&url);
        let script = format!("echo run >> {:?}; sleep 2; echo done", runs.path());
        c.presets
            .push(command("counted", vec!["sh".into(), "-c".into(), script]));
        c.instances.push(InstanceDecl {
            id: Some("counted".into()),
            name: "counted".into(),
            preset: Some("counted".into()),
            ..Default::default()
        });
        c
    };
    let a = Server::start(with_counted()).await;
    let b = Server::start(with_counted()).await;
    let message = || json!({"message": {"messageId": "resend-across", "role": "ROLE_USER", "parts": [{"text": "once"}]}});
    let first = tokio::spawn({
        let base = a.base();
        let m = message();
        async move { call(&base, "counted", "SendMessage", m).await }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    let resent = call(&b.base(), "counted", "SendMessage", message()).await;
    let first = first.await.unwrap();
    assert_eq!(
        first["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{first}"
    );
    assert_eq!(
        resent["result"]["task"]["id"], first["result"]["task"]["id"],
        "B answers with A's task: {resent}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lines = std::fs::read_to_string(runs.path()).unwrap();
    assert_eq!(lines.lines().count(), 1, "one turn, whatever the node");
}

async fn a_node_with_another_cluster_key_is_refused_on_a_fresh_database() {
    let url = fresh_postgres().await;
    let a = Server::start(on(&url)).await;
    let other = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        other.path(),
        "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=\n",
    )
    .unwrap();
    let mut config = on(&url);
    config.cluster.secret_key_file = Some(other.path().to_owned());
    config.runtime.cache_dir = Some(shared_cache());
    let dir = tempfile::tempdir().unwrap();
    let refused = a2a_edge::Running::start(
        config.clone(),
        dir.path().to_owned(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .err()
    .expect("refused at start")
    .to_string();
    assert!(
        refused.contains("not the key the shared database was first started with"),
        "{refused}"
    );
    // A database from before the check value: its secrets catch the other key, which writes
    // nothing.
    let token =
        json!({"action": "inbound.setAuth", "id": "demo", "token": "keycheck-token-0123456789"});
    assert_eq!(action(&a.base(), token).await["ok"], true);
    let db = database(&url).await;
    db.execute("DELETE FROM secrets WHERE name = 'a2a-edge/key-check'", &[])
        .await
        .unwrap();
    let again = a2a_edge::Running::start(
        config,
        dir.path().to_owned(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .err()
    .expect("refused at start")
    .to_string();
    assert!(again.contains("not the key"), "{again}");
    let checks = db
        .query(
            "SELECT 1 FROM secrets WHERE name = 'a2a-edge/key-check'",
            &[],
        )
        .await
        .unwrap();
    assert!(checks.is_empty(), "the refused node wrote no check value");
    drop(a);
}

async fn webhook_secrets_are_sealed_at_rest_and_absent_from_a_debug_log() {
    let url = fresh_postgres().await;
    let hook = Webhook::start().await;
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[runtime]\ncacheDir = {:?}\n[storage]\nbackend = \"postgres\"\nurl = {url:?}\n\
         [cluster]\nsecretKeyFile = {:?}\n[push]\nallowPrivateTargets = true\n\
         [[instances]]\nid = \"demo\"\nname = \"demo\"\npushNotifications = true\n",
        shared_cache(),
        key_file()
    );
    std::fs::write(dir.path().join("config.toml"), toml).unwrap();
    let log = dir.path().join("log.txt");
    let port = free_port();
    let log_file = std::fs::File::create(&log).unwrap();
    let mut node = spawn_logging(BIN, dir.path(), port, "debug", log_file);
    let base = format!("http://127.0.0.1:{port}");
    ready(&reqwest::Client::new(), &base).await;
    let (token, credentials) = (
        format!("tok-{}", uuid::Uuid::new_v4().simple()),
        format!("cred-{}", uuid::Uuid::new_v4().simple()),
    );
    let sent = call(
        &base,
        "demo",
        "SendMessage",
        json!({"message": {"messageId": "sealed-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
               "configuration": {"taskPushNotificationConfig": {"url": hook.url(), "token": token,
                   "authentication": {"scheme": "Bearer", "credentials": credentials}}}}),
    )
    .await;
    assert!(!sent.to_string().contains(&token), "{sent}");
    hook.wait_for_state("TASK_STATE_COMPLETED", 30).await;
    let delivered = hook.hits();
    assert!(
        delivered.iter().any(|h| h
            .headers
            .get("authorization")
            .is_some_and(|v| v == format!("Bearer {credentials}").as_str())
            && h.headers
                .get("x-a2a-notification-token")
                .is_some_and(|v| v == token.as_str())),
        "the webhook still gets both"
    );
    let db = database(&url).await;
    let bodies: Vec<String> = db
        .query("SELECT body FROM push_configs", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(bodies.len(), 1);
    assert!(
        !bodies[0].contains(&token) && !bodies[0].contains(&credentials),
        "sealed at rest: {}",
        bodies[0]
    );
    unsafe { libc::kill(node.id() as i32, libc::SIGTERM) };
    let _ = node.wait();
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("DEBUG"), "the log is at debug");
    assert!(
        !logged.contains(&token) && !logged.contains(&credentials),
        "no webhook secret in the debug log"
    );
}

/// A node on `url` that also serves the `counter` agent (docs/agents.md) with its
/// key-value bucket granted.
async fn counting_node(url: &str) -> Server {
    use a2a_edge::sessions::preset::{ComponentSettings, Grants};
    let mut c = on(url);
    c.presets.push(Preset::new(
        "counter",
        Backend::Component(ComponentSettings {
            component: "counter".into(),
            grants: Grants {
                key_value: true,
                ..Grants::default()
            },
            limits: Default::default(),
            config: Default::default(),
        }),
    ));
    c.instances.push(InstanceDecl {
        id: Some("counter".into()),
        name: "counter".into(),
        preset: Some("counter".into()),
        ..Default::default()
    });
    Server::start_with(c, |dir| {
        a2a_edge_tests::put_component(
            dir,
            "counter",
            &std::fs::read(a2a_edge_tests::COUNTER_WASM).unwrap(),
        )
    })
    .await
}

async fn an_agents_key_value_buckets_are_shared_by_every_node() {
    let url = fresh_postgres().await;
    let (a, b) = (counting_node(&url).await, counting_node(&url).await);
    for (n, node) in [&a, &b, &a, &b].into_iter().enumerate() {
        let m = json!({"messageId": format!("kv-{n}"), "contextId": "shared", "role": "ROLE_USER", "parts": [{"text": "hi"}]});
        let r = call(
            &node.base(),
            "counter",
            "SendMessage",
            json!({"message": m}),
        )
        .await;
        assert_eq!(
            r["result"]["task"]["artifacts"][0]["parts"][0]["text"],
            format!("message {}: hi", n + 1),
            "each node counts on from the other's count: {r}"
        );
    }
}

async fn a_key_revoked_on_one_node_is_refused_by_the_others() {
    let (url, a, b) = two_nodes().await;
    // A second client keeps the instance closed once the first is revoked.
    let keeper: Value = action(
        &a.base(),
        json!({"action": "inbound.keys.create", "id": "demo", "name": "keeper"}),
    )
    .await;
    assert_eq!(keeper["ok"], true, "{keeper}");
    let created: Value = action(
        &a.base(),
        json!({"action": "inbound.keys.create", "id": "demo", "name": "shared-bot"}),
    )
    .await;
    let key = created["key"].as_str().unwrap().to_owned();
    let list = |base: String| {
        let key = key.clone();
        async move {
            request(
                &reqwest::Client::new(),
                &format!("{base}/a2a/demo"),
                "ListTasks",
                json!({}),
            )
            .header("x-api-key", key)
            .send()
            .await
            .unwrap()
            .status()
        }
    };
    // B takes the key A created, and then refuses it once A revoked it, within its follow
    // interval (the test allows a noisy machine 5 s and prints what it took).
    for (want, then) in [(200, None), (401, Some("inbound.keys.revoke"))] {
        if let Some(action_name) = then {
            let revoked: Value = action(
                &a.base(),
                json!({"action": action_name, "id": "demo", "name": "shared-bot"}),
            )
            .await;
            assert_eq!(revoked["ok"], true, "{revoked}");
            assert_eq!(list(a.base()).await, 401, "A refuses it at once");
        }
        let started = Instant::now();
        while list(b.base()).await != want {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "B does not answer {want} after {:?}",
                started.elapsed()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!("B answered {want} after {:?}", started.elapsed());
    }
    let db = database(&url).await;
    let bodies: String = db
        .query("SELECT body FROM instances", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect();
    assert!(
        !bodies.contains(&key[4..]),
        "the database never holds the key"
    );
}

async fn readyz_turns_503_within_2_s_of_the_database_stopping_and_200_after_it_returns() {
    let url = fresh_postgres().await;
    let (proxy, a) = behind_proxy(&url, on).await;
    let probe = |path: &'static str| {
        let (client, base) = (a.http.clone(), a.base());
        async move {
            let r = client.get(format!("{base}{path}")).send().await.unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    // Ready once the notices' connection is up.
    let until = |want: u16, secs: u64| {
        let probe = &probe;
        async move {
            let deadline = Instant::now() + Duration::from_secs(secs);
            loop {
                let (status, body) = probe("/readyz").await;
                if status == want {
                    return body;
                }
                assert!(
                    Instant::now() < deadline,
                    "no {want} within {secs} s: {body}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let ready = until(200, 10).await;
    assert_eq!(ready["checks"]["cluster"]["listening"], true, "{ready}");
    proxy.set(Fault::Cut);
    let stopped = Instant::now();
    let down = until(503, 2).await;
    assert!(stopped.elapsed() < Duration::from_secs(2));
    assert_eq!(down["checks"]["store"]["ok"], false, "{down}");
    assert!(
        !down.to_string().to_lowercase().contains("postgres"),
        "no store error text: {down}"
    );
    assert_eq!(probe("/healthz").await.0, 200, "still live");
    proxy.set(Fault::Pass);
    until(200, 30).await;
}
