//! Push notifications as clients and webhooks see them: the config methods on both bindings,
//! scoped to the instance and task; deliveries in order with their headers, through receiver
//! failures and a SIGKILL of the runtime; the webhook guard on and off.

use std::time::Duration;

use a2a_edge::config::{Config, InstanceDecl};
use serde_json::{Value, json};

use a2a_edge_tests::binary::{free_port, ready, spawn_binary};
use a2a_edge_tests::jsonrpc::request;
use a2a_edge_tests::webhook::Webhook;
use a2a_edge_tests::{Server, shared_cache};

fn instance(id: &str, preset: &str) -> InstanceDecl {
    InstanceDecl {
        id: Some(id.into()),
        name: id.into(),
        preset: Some(preset.into()),
        ..InstanceDecl::default()
    }
}

/// Instances `a`, `b` (scripted) and `off` (push disabled); webhooks may be internal when
/// `allow_private`, retries come fast.
fn config(allow_private: bool) -> Config {
    let mut off = instance("off", "echo");
    off.push_notifications = Some(false);
    let mut c = Config {
        instances: vec![instance("a", "scripted"), instance("b", "scripted"), off],
        ..Config::default()
    };
    c.push.allow_private_targets = allow_private;
    c.push.retry_base_ms = 50;
    c.push.retry_max_ms = 200;
    c
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    fn of(s: &Server) -> Client {
        Client {
            http: reqwest::Client::new(),
            base: s.base(),
        }
    }

    /// A JSON-RPC call on instance `id`: the result, or the error.
    async fn rpc(&self, id: &str, method: &str, params: Value) -> Result<Value, Value> {
        let url = format!("{}/a2a/{id}", self.base);
        let answer: Value = request(&self.http, &url, method, params)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        match answer.get("result") {
            Some(r) => Ok(r.clone()),
            None => Err(answer["error"].clone()),
        }
    }

    /// The JSON-RPC error code of a call that must fail.
    async fn code(&self, id: &str, method: &str, params: Value) -> i64 {
        let e = self.rpc(id, method, params).await.unwrap_err();
        e["code"].as_i64().unwrap()
    }

    /// An HTTP+JSON call below instance `id`: (status, body).
    async fn rest(&self, verb: &str, id: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut r = self.http.request(
            verb.parse().unwrap(),
            format!("{}/a2a/{id}{path}", self.base),
        );
        if let Some(b) = body {
            r = r.json(&b);
        }
        let r = r.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// Sends a message (blocking); the task.
    async fn send(&self, id: &str, message_id: &str, configuration: Value) -> Value {
        let params = json!({
            "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": configuration,
        });
        let r = self.rpc(id, "SendMessage", params).await.unwrap();
        r["task"].clone()
    }

    /// Continues `task` with a message.
    async fn follow_up(&self, id: &str, task: &str, message_id: &str) -> Value {
        let params = json!({
            "message": {"messageId": message_id, "taskId": task, "role": "ROLE_USER", "parts": [{"text": "go on"}]},
        });
        self.rpc(id, "SendMessage", params).await.unwrap()["task"].clone()
    }
}

fn states(bodies: &[Value]) -> Vec<String> {
    bodies
        .iter()
        .map(|b| {
            b["task"]["status"]["state"]
                .as_str()
                .unwrap_or("?")
                .to_owned()
        })
        .collect()
}

/// The delivered states start WORKING and end COMPLETED.
fn assert_runs_to_completion(seen: &[String]) {
    let (first, last) = (seen.first(), seen.last());
    assert_eq!(
        (first.map(String::as_str), last.map(String::as_str)),
        (Some("TASK_STATE_WORKING"), Some("TASK_STATE_COMPLETED")),
        "in order: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configs_are_kept_per_task_and_instance_on_both_bindings() {
    let s = Server::start(config(true)).await;
    let c = Client::of(&s);
    let hook = Webhook::start().await;
    for (id, push) in [("a", true), ("off", false)] {
        let (_, card) = c.rest("GET", id, "/agent-card.json", None).await;
        assert_eq!(card["capabilities"]["pushNotifications"], push, "{id}");
    }
    let task = c.send("a", "crud-1", json!({})).await;
    let t = task["id"].as_str().unwrap();

    let created = c
        .rpc(
            "a",
            "CreateTaskPushNotificationConfig",
            json!({"taskId": t, "id": "c1", "url": hook.url(), "token": "tok-1"}),
        )
        .await
        .unwrap();
    assert_eq!(
        (&created["id"], &created["taskId"], &created["token"]),
        (&json!("c1"), &json!(t), &Value::Null),
        "the token is write-only: {created}"
    );
    let defaulted = c
        .rpc(
            "a",
            "CreateTaskPushNotificationConfig",
            json!({"task_id": t, "url": hook.url()}),
        )
        .await
        .unwrap();
    assert_eq!(defaulted["id"], t, "a config's id defaults to its task's");
    let (status, rest) = c
        .rest(
            "POST",
            "a",
            &format!("/tasks/{t}/pushNotificationConfigs"),
            Some(json!({"id": "c2", "url": hook.url(), "authentication": {"scheme": "Bearer", "credentials": "cred"}})),
        )
        .await;
    assert_eq!((status, &rest["id"]), (200, &json!("c2")), "{rest}");

    let listed = c
        .rpc("a", "ListTaskPushNotificationConfigs", json!({"taskId": t}))
        .await
        .unwrap();
    let ids: Vec<&str> = listed["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1", t, "c2"], "oldest first");
    assert_eq!(listed["nextPageToken"], "");
    let path = format!("/tasks/{t}/pushNotificationConfigs");
    let (_, first) = c
        .rest("GET", "a", &format!("{path}?pageSize=2"), None)
        .await;
    assert_eq!(first["configs"].as_array().unwrap().len(), 2, "{first}");
    let token = first["nextPageToken"].as_str().unwrap();
    let (_, second) = c
        .rest(
            "GET",
            "a",
            &format!("{path}?pageSize=2&pageToken={token}"),
            None,
        )
        .await;
    assert_eq!(
        (&second["configs"][0]["id"], &second["nextPageToken"]),
        (&json!("c2"), &json!(""))
    );
    let (status, one) = c.rest("GET", "a", &format!("{path}/c2"), None).await;
    assert_eq!(
        (status, &one["authentication"]),
        (200, &json!({"scheme": "Bearer"})),
        "the credentials are write-only, the scheme is shown"
    );
    let got = c
        .rpc(
            "a",
            "GetTaskPushNotificationConfig",
            json!({"taskId": t, "id": "c1"}),
        )
        .await
        .unwrap();
    assert!(
        got["url"].is_string() && !got.to_string().contains("tok-1"),
        "no caller reads a webhook token back: {got}"
    );
    assert!(
        !listed.to_string().contains("tok-1") && !listed.to_string().contains("cred"),
        "{listed}"
    );

    // Another instance never sees the task, nor its configs.
    for method in [
        "GetTaskPushNotificationConfig",
        "DeleteTaskPushNotificationConfig",
    ] {
        assert_eq!(
            c.code("b", method, json!({"taskId": t, "id": "c1"})).await,
            -32001
        );
    }
    let on_b = json!({"taskId": t, "url": hook.url()});
    assert_eq!(
        c.code("b", "CreateTaskPushNotificationConfig", on_b).await,
        -32001
    );
    let (status, e) = c.rest("GET", "b", &format!("{path}/c1"), None).await;
    assert_eq!(
        (status, &e["error"]["status"]),
        (404, &json!("NOT_FOUND")),
        "{e}"
    );
    let unknown = json!({"taskId": "no-such-task", "url": hook.url()});
    assert_eq!(
        c.code("a", "CreateTaskPushNotificationConfig", unknown)
            .await,
        -32001
    );

    // Delete is idempotent; a deleted config is gone.
    for _ in 0..2 {
        let r = c
            .rpc(
                "a",
                "DeleteTaskPushNotificationConfig",
                json!({"taskId": t, "id": "c1"}),
            )
            .await
            .unwrap();
        assert_eq!(r, json!({}));
    }
    let gone = json!({"taskId": t, "id": "c1"});
    assert_eq!(
        c.code("a", "GetTaskPushNotificationConfig", gone).await,
        -32001
    );
    let (status, _) = c.rest("DELETE", "a", &format!("{path}/c2"), None).await;
    assert_eq!(status, 200);

    // A resend (same message: a retry, answered with the first send's task) that carries a
    // webhook registers it for that task.
    let first = c.send("a", "crud-retry", json!({})).await;
    let again = c
        .send(
            "a",
            "crud-retry",
            json!({"taskPushNotificationConfig": {"id": "late", "url": hook.url()}}),
        )
        .await;
    assert_eq!(first["id"], again["id"], "a retry");
    let listed = c
        .rpc(
            "a",
            "ListTaskPushNotificationConfigs",
            json!({"taskId": first["id"]}),
        )
        .await
        .unwrap();
    assert_eq!(listed["configs"][0]["id"], "late", "{listed}");

    // Bad configs say what is wrong; an instance without push says so.
    for bad in [
        json!({"taskId": t, "url": "ftp://h/x"}),
        json!({"url": hook.url()}),
        json!({"taskId": t, "url": hook.url(), "authentication": {"scheme": "Two words"}}),
    ] {
        assert_eq!(
            c.code("a", "CreateTaskPushNotificationConfig", bad.clone())
                .await,
            -32602,
            "{bad}"
        );
    }
    let off_task = c.send("off", "crud-off", json!({})).await;
    let off = json!({"taskId": off_task["id"], "url": hook.url()});
    assert_eq!(
        c.code("off", "CreateTaskPushNotificationConfig", off).await,
        -32003
    );
    let inline = json!({
        "message": {"messageId": "crud-off-2", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"taskPushNotificationConfig": {"url": hook.url()}},
    });
    assert_eq!(c.code("off", "SendMessage", inline).await, -32003);
    let (status, e) = c
        .rest(
            "GET",
            "off",
            &format!(
                "/tasks/{}/pushNotificationConfigs",
                off_task["id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(
        e["error"]["details"][0]["reason"],
        "PUSH_NOTIFICATION_NOT_SUPPORTED"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_is_delivered_once_in_order_with_its_headers_through_failures() {
    let s = Server::start(config(true)).await;
    let c = Client::of(&s);
    let hook = Webhook::start().await;
    hook.fail_next(2);
    let inline = json!({"taskPushNotificationConfig": {
        "url": hook.url(), "token": "tok-9",
        "authentication": {"scheme": "Bearer", "credentials": "cred-9"},
    }});
    let task = c.send("a", "tck-input-required-push-1", inline).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let t = task["id"].as_str().unwrap();
    hook.wait_for_state("TASK_STATE_INPUT_REQUIRED", 20).await;
    let done = c.follow_up("a", t, "tck-complete-task-push-1").await;
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED");
    let taken = hook.wait_for_state("TASK_STATE_COMPLETED", 20).await;

    let hits = hook.hits();
    assert_eq!(
        hits.iter().filter(|h| h.status == 503).count(),
        2,
        "the receiver failed twice"
    );
    assert_eq!(
        hits[0].body, hits[2].body,
        "the failed notification came again, first"
    );
    let seen = states(&taken);
    let distinct: std::collections::HashSet<String> = taken.iter().map(|b| b.to_string()).collect();
    assert_eq!(
        distinct.len(),
        taken.len(),
        "each write delivered once: {seen:?}"
    );
    assert_runs_to_completion(&seen);
    let at = |s: &str| seen.iter().position(|x| x == s).unwrap();
    assert!(
        at("TASK_STATE_INPUT_REQUIRED") < at("TASK_STATE_COMPLETED"),
        "in order: {seen:?}"
    );
    for b in &taken {
        assert_eq!(b["task"]["id"], t);
        assert_eq!(
            b.as_object().unwrap().len(),
            1,
            "one StreamResponse member: {b}"
        );
    }
    for h in &hits {
        let header = |n: &str| h.headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
        assert_eq!(header("content-type"), "application/a2a+json");
        assert_eq!(header("authorization"), "Bearer cred-9");
        assert_eq!(header("x-a2a-notification-token"), "tok-9");
        assert_eq!(header("a2a-notification-token"), "tok-9");
    }

    // The operator sees the deliveries, never the secrets (the last one is recorded just after
    // the receiver answered it).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let view = loop {
        let (status, view) = s.get(&format!("/a2a/api/push?id=a&taskId={t}")).await;
        assert_eq!(status, 200);
        if view["configs"][0]["pending"] == 0 || std::time::Instant::now() > deadline {
            break view;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let config = &view["configs"][0];
    assert_eq!(config["delivered"], taken.len() as u64, "{view}");
    assert_eq!(
        (&config["pending"], &config["lastStatus"]),
        (&json!(0), &json!("200"))
    );
    assert_eq!(config["hasToken"], true);
    let shown = view.to_string();
    assert!(
        !shown.contains("tok-9") && !shown.contains("cred-9"),
        "{shown}"
    );
    let (_, metrics) = s.get("/a2a/api/metrics").await;
    assert_eq!(metrics["push"]["retried"], 2, "{}", metrics["push"]);
    assert_eq!(metrics["push"]["delivered"], taken.len() as u64);
    let (_, prometheus) = text(&s, "/a2a/api/metrics?format=prometheus").await;
    assert!(
        prometheus.contains("a2a_edge_push_attempts_total{outcome=\"retried\"} 2"),
        "{prometheus}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_webhooks_of_one_instance_never_delay_another_instances_deliveries() {
    let s = Server::start(config(true)).await;
    let c = Client::of(&s);
    // A receiver that takes every connection and never answers.
    let hanging = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = hanging.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((tcp, _)) = hanging.accept().await {
            open.push(tcp);
        }
    });
    for i in 0..100 {
        let push = json!({"taskPushNotificationConfig": {"url": format!("http://{at}/hook/{i}")}});
        c.send("a", &format!("hang-{i}"), push).await;
    }
    // Instance `b`'s deliveries go to a receiver that answers, at once.
    let hook = Webhook::start().await;
    let mut tasks = std::collections::HashSet::new();
    for i in 0..10 {
        let push = json!({"taskPushNotificationConfig": {"url": hook.url()}});
        let task = c.send("b", &format!("fine-{i}"), push).await;
        tasks.insert(task["id"].as_str().unwrap().to_owned());
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let done: std::collections::HashSet<String> = hook
            .delivered()
            .iter()
            .filter(|b| b["task"]["status"]["state"] == "TASK_STATE_COMPLETED")
            .filter_map(|b| b["task"]["id"].as_str().map(str::to_owned))
            .collect();
        if done == tasks {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "instance b's deliveries waited behind a's hanging webhooks: {} of 10 within 15 s",
            done.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    held.abort();
}

async fn text(s: &Server, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("{}{path}", s.base())).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_to_internal_addresses_are_refused_unless_allowed() {
    let guarded = Server::start(config(false)).await;
    let open = Server::start(config(true)).await;
    let internal = [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.1/hook",
        "http://[::1]:9/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://localhost:9/hook",
    ];
    for (s, allowed) in [(&guarded, false), (&open, true)] {
        let c = Client::of(s);
        let t = c.send("a", "guard-1", json!({})).await["id"].clone();
        for url in internal {
            let r = c
                .rpc(
                    "a",
                    "CreateTaskPushNotificationConfig",
                    json!({"taskId": t, "url": url}),
                )
                .await;
            let metadata = url.contains("169.254");
            match r {
                Ok(_) => assert!(allowed && !metadata, "{url} was taken"),
                Err(e) => {
                    assert!(!allowed || metadata, "{url} was refused: {e}");
                    assert_eq!(e["code"], -32602, "{e}");
                    let why = e["message"].as_str().unwrap();
                    assert!(
                        why.contains("internal") || why.contains("link-local"),
                        "{why}"
                    );
                    assert!(
                        !why.contains("task store") && !why.contains("allowPrivateTargets"),
                        "the caller is told neither the store nor the operator's settings: {why}"
                    );
                }
            }
        }
    }
    // An inline config to an internal address refuses the send before any task exists.
    let c = Client::of(&guarded);
    let before = c.rpc("a", "ListTasks", json!({})).await.unwrap()["totalSize"].clone();
    let inline = json!({
        "message": {"messageId": "guard-2", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}},
    });
    assert_eq!(c.code("a", "SendMessage", inline).await, -32602);
    let after = c.rpc("a", "ListTasks", json!({})).await.unwrap()["totalSize"].clone();
    assert_eq!(before, after, "no task was created");
}

/// Even with internal webhooks allowed, a webhook never reaches this runtime's own listener:
/// its deliveries are refused before a request, given up at once, not answered by the control API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_at_the_runtimes_own_listener_is_never_delivered() {
    let s = Server::start(config(true)).await;
    let own = s.running.as_ref().unwrap().addr.port();
    let c = Client::of(&s);
    let url = format!("http://127.0.0.1:{own}/a2a/api/instances");
    let configuration = json!({"taskPushNotificationConfig": {"url": url}});
    c.send("a", "own-1", configuration).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let config = loop {
        let (_, push) = s.get("/a2a/api/push?id=a").await;
        let config = push["configs"][0].clone();
        // Each of the task's notifications is given up in its turn.
        let settled = config["failed"].as_u64().unwrap_or(0) > 0 && config["pending"] == 0;
        if settled || std::time::Instant::now() > deadline {
            break config;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let why = config["lastStatus"].as_str().unwrap_or_default();
    assert_eq!(config["delivered"], 0, "{config}");
    assert_eq!(config["pending"], 0, "given up, not retried: {config}");
    assert_eq!(config["nextRetryAt"], Value::Null, "{config}");
    assert!(
        why.contains("this runtime's own listener"),
        "refused before any request, not answered: {config}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_of_a_receiver_that_is_down_survive_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[runtime]\ncacheDir = {:?}\n[push]\nallowPrivateTargets = true\nretryBaseMs = 100\nretryMaxMs = 300\nmaxAttempts = 1000\n",
            shared_cache()
        ),
    )
    .unwrap();
    let (port, hook_port) = (free_port(), free_port());
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let mut server = spawn_binary(env!("CARGO_BIN_EXE_a2a-edge"), dir.path(), port);
    ready(&http, &base).await;
    let c = Client {
        http: http.clone(),
        base: base.clone(),
    };
    let url = format!("http://127.0.0.1:{hook_port}/hook");
    let mut sent = Vec::new();
    for i in 0..3 {
        let inline = json!({"taskPushNotificationConfig": {"url": url, "token": format!("t{i}")}});
        let task = c.send("demo", &format!("kill-push-{i}"), inline).await;
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
        sent.push(task["id"].as_str().unwrap().to_owned());
    }
    // The receiver is down: the worker has tried and keeps the notifications.
    let pending = loop {
        let view: Value = http
            .get(format!("{base}/a2a/api/push?id=demo"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let configs = view["configs"].as_array().unwrap().clone();
        if configs.len() == 3 && configs.iter().all(|c| c["attempts"].as_u64() > Some(0)) {
            break configs
                .iter()
                .map(|c| c["pending"].as_u64().unwrap())
                .sum::<u64>();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        pending >= 6,
        "a create and a completion per task wait: {pending}"
    );
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();

    let hook = Webhook::start_on(hook_port).await;
    let mut server = spawn_binary(env!("CARGO_BIN_EXE_a2a-edge"), dir.path(), port);
    ready(&http, &base).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while hook.delivered().len() < pending as usize {
        assert!(
            std::time::Instant::now() < deadline,
            "delivered {:?}",
            hook.delivered()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let taken = hook.delivered();
    assert_eq!(taken.len(), pending as usize, "nothing lost, nothing twice");
    for (i, t) in sent.iter().enumerate() {
        let of_task: Vec<Value> = taken
            .iter()
            .filter(|b| b["task"]["id"] == *t)
            .cloned()
            .collect();
        assert_runs_to_completion(&states(&of_task));
        let token = format!("t{i}");
        assert!(
            hook.hits()
                .iter()
                .filter(|h| h.body["task"]["id"] == *t)
                .all(|h| h.headers["x-a2a-notification-token"] == token.as_str())
        );
    }
    server.kill().unwrap();
    server.wait().unwrap();
}
