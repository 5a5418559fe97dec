//! The `a2a-edge` CLI as its users run it: the real binary against a real server, as a client
//! of the control API and of an A2A agent.

use std::process::Output;

use serde_json::Value;

use a2a_edge_tests::jsonrpc::{call, request};
use a2a_edge_tests::{Server, shared_cache};

struct Cli(Server);

impl Cli {
    async fn start() -> Cli {
        Cli(Server::default().await)
    }

    fn base(&self) -> String {
        self.0.base()
    }

    /// Runs `a2a-edge <args>` against this server, with `stdin`.
    async fn run_with(&self, args: &[&str], stdin: &str) -> Output {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
            .args(args)
            .env("A2A_EDGE_API", format!("{}/a2a/api", self.base()))
            .env_remove("A2A_TOKEN")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .await
            .unwrap();
        child.wait_with_output().await.unwrap()
    }

    /// Runs and expects success; stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run_with(args, "").await;
        assert!(
            out.status.success(),
            "a2a-edge {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs and expects failure; stderr.
    async fn fails(&self, args: &[&str]) -> String {
        let out = self.run_with(args, "").await;
        assert!(
            !out.status.success(),
            "a2a-edge {args:?} should fail: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbound_commands_manage_instances() {
    let c = Cli::start().await;
    let created = c
        .ok(&[
            "inbound",
            "create",
            "--name",
            "Docs Bot",
            "--description",
            "Answers docs",
        ])
        .await;
    assert!(
        created.contains("inbound server \"Docs Bot\" created"),
        "{created}"
    );
    let id = created
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .unwrap()
        .to_owned();
    let table = c.ok(&["inbound", "list"]).await;
    assert!(
        table.lines().next().unwrap().contains("ID")
            && table.contains(&id)
            && table.contains("Docs Bot"),
        "{table}"
    );
    let listed: Value = serde_json::from_str(&c.ok(&["inbound", "list", "--json"]).await).unwrap();
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["id"] == id.as_str())
    );

    c.ok(&["inbound", "update", &id, "--name", "Docs Bot 2"])
        .await;
    c.ok(&["inbound", "disable", &id]).await;
    let card = format!("{}/a2a/{id}/agent-card.json", c.base());
    assert_eq!(reqwest::get(&card).await.unwrap().status().as_u16(), 404);
    c.ok(&["inbound", "enable", &id]).await;
    assert_eq!(
        reqwest::get(&card)
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["name"],
        "Docs Bot 2"
    );

    let out = c
        .run_with(
            &["inbound", "auth", &id, "--token-stdin"],
            "s3cret-cli-0123456789\n",
        )
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let endpoint = format!("{}/a2a/{id}/agent-card.json", c.base());
    let refused = c.fails(&["send", &endpoint, "hi"]).await;
    assert!(refused.contains("wants a bearer token"), "{refused}");
    let wrong = c
        .fails(&["send", &endpoint, "hi", "--token", "not-the-token-at-all"])
        .await;
    assert!(
        wrong.contains("refused the credentials given (invalid credentials")
            && !wrong.contains("wants a bearer token"),
        "a wrong token is not a missing one: {wrong}"
    );
    let answer = c
        .ok(&[
            "send",
            &endpoint,
            "hi with token",
            "--token",
            "s3cret-cli-0123456789",
        ])
        .await;
    assert_eq!(answer.trim(), "hi with token");
    // A named client's key: printed once, alone on stdout; listed by name; revoked.
    let key = c.ok(&["inbound", "keys", "create", &id, "cli-bot"]).await;
    let key = key.trim();
    assert!(key.starts_with("a2a_"), "{key}");
    let listed = c.ok(&["inbound", "keys", "list", &id]).await;
    assert!(
        listed.contains("cli-bot") && listed.contains("key:cli-bot") && !listed.contains(key),
        "{listed}"
    );
    let answer = c
        .ok(&["send", &endpoint, "hi with a key", "--api-key", key])
        .await;
    assert_eq!(answer.trim(), "hi with a key");
    c.ok(&["inbound", "keys", "revoke", &id, "cli-bot"]).await;
    let refused = c.fails(&["send", &endpoint, "hi", "--api-key", key]).await;
    assert!(refused.contains("--api-key"), "{refused}");
    c.ok(&["inbound", "auth", &id, "--clear"]).await;
    // OpenID Connect: the settings checked (never HMAC), the last credential kept unless --open.
    let (issuer, audience) = ("http://127.0.0.1:9", "edge");
    let set = [
        "inbound",
        "oidc",
        &id,
        "--issuer",
        issuer,
        "--audience",
        audience,
    ];
    let bad = c
        .fails(&[&set[..], &["--algorithm", "HS256"]].concat())
        .await;
    assert!(bad.contains("never none or HMAC"), "{bad}");
    let done = c.ok(&[&set[..], &["--scope", "a2a:call"]].concat()).await;
    assert!(
        done.contains("OpenID Connect tokens from http://127.0.0.1:9"),
        "{done}"
    );
    let last = c.fails(&["inbound", "oidc", &id, "--clear"]).await;
    assert!(last.contains("last credential"), "{last}");
    c.ok(&["inbound", "oidc", &id, "--clear", "--open"]).await;
    // Mutual TLS needs a listener asking for client certificates.
    let mtls = c.fails(&["inbound", "mtls", &id, "--from", "san"]).await;
    assert!(mtls.contains("clientCaFile"), "{mtls}");
    assert!(
        c.fails(&["inbound", "auth", &id])
            .await
            .contains("--token-stdin")
    );

    c.ok(&["inbound", "remove", &id]).await;
    let err = c.fails(&["inbound", "remove", &id]).await;
    // In words: the HTTP status only with --json.
    assert!(
        err.contains("unknown inbound id") && !err.contains("409"),
        "{err}"
    );
    let err = c
        .fails(&[
            "inbound",
            "create",
            "--name",
            "x",
            "--description",
            "d",
            "--preset",
            "ghost",
        ])
        .await;
    assert!(err.contains("unknown preset \"ghost\""), "{err}");
    // A chosen id; a name in use is refused unless asked for.
    let chosen = c
        .ok(&[
            "inbound",
            "create",
            "--id",
            "docs",
            "--name",
            "Docs",
            "--description",
            "d",
        ])
        .await;
    assert!(chosen.contains("id: docs"), "{chosen}");
    let twice = c
        .fails(&["inbound", "create", "--name", "Docs", "--description", "d"])
        .await;
    assert!(twice.contains("taken by inbound server docs"), "{twice}");
    c.ok(&[
        "inbound",
        "create",
        "--name",
        "Docs",
        "--description",
        "d",
        "--allow-duplicate-name",
    ])
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streams_text_and_task_session_metrics_commands_read_it_back() {
    let c = Cli::start().await;
    let card = format!("{}/a2a/demo/agent-card.json", c.base());
    let out = c
        .run_with(
            &[
                "send",
                &card,
                "streamed words arrive",
                "--stream",
                "--context",
                "cli-ctx",
            ],
            "",
        )
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "streamed words arrive"
    );
    let status = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(status.contains("COMPLETED (context cli-ctx)"), "{status}");
    let frames = c
        .ok(&["send", &card, "as json", "--stream", "--json"])
        .await;
    assert!(
        frames.lines().count() >= 3
            && frames
                .lines()
                .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "{frames}"
    );

    let tasks = c.ok(&["task", "list", "--context", "cli-ctx"]).await;
    assert!(
        tasks.contains("completed") && tasks.contains("1 task(s) in all"),
        "{tasks}"
    );
    let page: Value =
        serde_json::from_str(&c.ok(&["task", "list", "--json", "--limit", "1"]).await).unwrap();
    assert_eq!(page["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(page["taskNextOffset"], 1);
    let id = page["tasks"][0]["taskId"].as_str().unwrap().to_owned();
    let shown = c.ok(&["task", "get", &id]).await;
    assert!(
        shown.contains(&id) && shown.contains("TASK_STATE_COMPLETED"),
        "{shown}"
    );
    assert!(
        c.fails(&["task", "cancel", &id])
            .await
            .contains("COMPLETED")
    );
    let err = c.fails(&["task", "get", "nope"]).await;
    assert!(err.contains("nope") && !err.contains("404"), "{err}");

    let sessions = c.ok(&["session", "list"]).await;
    assert!(
        sessions.contains("cli-ctx") && sessions.contains("idle"),
        "{sessions}"
    );
    assert!(
        c.ok(&["session", "close", "cli-ctx"])
            .await
            .contains("closed 1 live session(s)")
    );
    assert!(
        c.fails(&["session", "cancel", "ghost"])
            .await
            .contains("unknown session")
    );

    let metrics = c.ok(&["metrics"]).await;
    assert!(
        metrics.contains("SendMessage") && metrics.contains("active tasks"),
        "{metrics}"
    );
    let prom = c.ok(&["metrics", "--prometheus"]).await;
    assert!(prom.contains("a2a_edge_requests_total"));
    let err = c.fails(&["update"]).await;
    assert!(err.contains("the update check failed"), "{err}");
    let err = c
        .fails(&["send", "http://127.0.0.1:9/agent-card.json", "x"])
        .await;
    assert!(err.contains("cannot reach"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_token_on_stdin_never_clears_auth_and_json_failures_are_json() {
    let c = Cli::start().await;
    let strong = "0123456789abcdef-cli-strong\n";
    assert!(
        c.run_with(&["inbound", "auth", "demo", "--token-stdin"], strong)
            .await
            .status
            .success()
    );
    // `echo "$UNSET" | a2a-edge inbound auth demo --token-stdin`
    let out = c
        .run_with(&["inbound", "auth", "demo", "--token-stdin"], "\n")
        .await;
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is empty"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let card = format!("{}/a2a/demo/agent-card.json", c.base());
    assert!(
        c.fails(&["send", &card, "hi"])
            .await
            .contains("wants a bearer token"),
        "still protected"
    );
    let weak = c
        .run_with(&["inbound", "auth", "demo", "--token-stdin"], "short\n")
        .await;
    let weak = String::from_utf8_lossy(&weak.stderr);
    assert!(
        weak.contains("at least 16")
            && weak.contains("--allow-weak")
            && !weak.contains("allowWeak"),
        "in the CLI's words: {weak}"
    );
    let unknown = c
        .fails(&["inbound", "update", "nobody", "--name", "x"])
        .await;
    assert!(
        unknown.contains("a2a-edge inbound list") && !unknown.contains("GET /a2a/api"),
        "{unknown}"
    );
    assert!(
        c.run_with(
            &["inbound", "auth", "demo", "--token-stdin", "--allow-weak"],
            "short\n"
        )
        .await
        .status
        .success()
    );
    c.ok(&["inbound", "auth", "demo", "--clear"]).await;

    let out = c
        .run_with(&["inbound", "remove", "ghost", "--json"], "")
        .await;
    assert!(!out.status.success());
    let failure: Value = serde_json::from_slice(&out.stdout).expect("a JSON failure on stdout");
    assert_eq!(failure["ok"], false);
    assert!(
        failure["message"]
            .as_str()
            .unwrap()
            .contains("unknown inbound id"),
        "{failure}"
    );

    assert!(
        c.ok(&["inbound", "test", "demo", "hello skill", "--skill", "chat"])
            .await
            .contains("hello skill")
    );
    assert!(
        c.fails(&["inbound", "test", "demo", "x", "--skill", "astrology"])
            .await
            .contains("unknown skill")
    );
}

/// Starts `a2a-edge serve` with `args` on the data directory `dir`; the child and its base URL.
async fn serve(dir: &std::path::Path, args: &[&str]) -> (tokio::process::Child, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .args(args);
    started(cmd).await
}

/// Spawns a `serve` command (stdout and stderr piped); the child and the base URL it printed.
async fn started(mut cmd: tokio::process::Command) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = cmd
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let base = loop {
        let line = stdout
            .next_line()
            .await
            .unwrap()
            .expect("serve prints where it listens");
        if let Some(url) = line.split("listening on ").nth(1) {
            break url.trim().to_owned();
        }
    };
    (child, base)
}

/// Runs `a2a-edge serve` with `args` on a fresh data directory, makes a few requests, stops it
/// with SIGTERM and returns what it logged.
async fn serve_logs(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = serve(dir.path(), args).await;
    let http = reqwest::Client::new();
    let params = serde_json::json!({"message": {"messageId": "m-log", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
    assert_eq!(
        request(&http, &format!("{base}/a2a/demo"), "SendMessage", params)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    assert_eq!(
        http.get(format!("{base}/a2a/api"))
            .header("host", "evil.example")
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    let action = serde_json::json!({"action": "inbound.disable", "id": "ghost"});
    assert_eq!(
        http.post(format!("{base}/a2a/api"))
            .json(&action)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        409
    );
    let create = serde_json::json!({"action": "inbound.create", "name": "fails", "description": "d", "version": "1", "preset": "scripted"});
    let id = http
        .post(format!("{base}/a2a/api"))
        .json(&create)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let failing = serde_json::json!({"action": "inbound.sendTest", "id": id, "text": "tck-task-failure please"});
    http.post(format!("{base}/a2a/api"))
        .json(&failing)
        .send()
        .await
        .unwrap();
    let rpc =
        |method: &str, params: Value| request(&http, &format!("{base}/a2a/demo"), method, params);
    // A read names its task; a stream logs its end; an A2A 0.3 call is logged by its 0.3 name.
    let sent = call(&base, "demo", "SendMessage", serde_json::json!({"message": {"messageId": "m-log-2", "role": "ROLE_USER", "parts": [{"text": "again"}]}})).await;
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    call(&base, "demo", "GetTask", serde_json::json!({"id": task})).await;
    let streamed = rpc("SendStreamingMessage", serde_json::json!({"message": {"messageId": "m-log-3", "role": "ROLE_USER", "parts": [{"text": "three words here"}]}}))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(streamed.contains("TASK_STATE_COMPLETED"), "{streamed}");
    let legacy = call(&base, "demo", "message/send", serde_json::json!({"message": {"kind": "message", "messageId": "m-log-4", "role": "user", "parts": [{"kind": "text", "text": "old"}]}})).await;
    assert_eq!(legacy["result"]["kind"], "task", "{legacy}");
    // 401s say which check failed.
    let auth = serde_json::json!({"action": "inbound.setAuth", "id": "demo", "token": "log-token-0123456789abcdef"});
    a2a_edge_tests::action(&base, auth).await;
    for header in [None, Some("Bearer wrong-token")] {
        let mut r = rpc("GetTask", serde_json::json!({"id": task}));
        if let Some(h) = header {
            r = r.header("authorization", h);
        }
        assert_eq!(r.send().await.unwrap().status(), 401);
    }
    // So do gRPC's, at the level of the status they stand for.
    let refused = a2a_edge_tests::grpc::send(&base, "demo", "m-grpc-log", Some("wrong-token"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().await.unwrap();
    String::from_utf8(out.stderr).unwrap()
}

/// The voluntary context switches of each epoch ticker thread of `pid`, by thread id.
fn epoch_wake_ups(pid: u32) -> Vec<(String, u64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let mut threads: Vec<(String, u64)> = tasks
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            if comm.trim() != "a2a-edge-epoch" {
                return None;
            }
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let switches = status
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse()
                .ok()?;
            Some((dir.display().to_string(), switches))
        })
        .collect();
    threads.sort();
    threads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_wakes_no_epoch_ticker() {
    let dir = tempfile::tempdir().unwrap();
    let (child, base) = serve(dir.path(), &[]).await;
    let http = reqwest::Client::new();
    let send = |id: &str| {
        let params = serde_json::json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
        request(&http, &format!("{base}/a2a/demo"), "SendMessage", params).send()
    };
    assert_eq!(send("m-idle-1").await.unwrap().status().as_u16(), 200);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let pid = child.id().unwrap();
    let before = epoch_wake_ups(pid);
    assert_eq!(
        before.len(),
        2,
        "the servers' and the agents' engines each have a ticker: {before:?}"
    );
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let after = epoch_wake_ups(pid);
    for ((thread, was), (_, now)) in before.iter().zip(&after) {
        assert!(
            now - was <= 2,
            "{thread} woke {} times in an idle second (a 10 ms ticker wakes 100)",
            now - was
        );
    }
    // Woken again by the next request, which runs as before.
    let answer: Value = send("m-idle-2").await.unwrap().json().await.unwrap();
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_every_request_and_refusal_in_text_or_json() {
    let json = serve_logs(&["--log-format", "json"]).await;
    let lines: Vec<Value> = json
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|_| panic!("not a JSON line: {l:?} in {json}"))
        })
        .collect();
    let field = |l: &Value, k: &str| l["fields"][k].clone();
    let send = lines
        .iter()
        .find(|l| field(l, "a2a_method") == "SendMessage")
        .unwrap_or_else(|| panic!("no SendMessage line in {json}"));
    assert_eq!(
        (
            field(send, "status"),
            field(send, "instance"),
            field(send, "outcome")
        ),
        (200.into(), "demo".into(), "ok".into()),
        "{send}"
    );
    assert!(
        field(send, "peer")
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
            && field(send, "task").as_str().unwrap().len() == 36,
        "{send}"
    );
    assert!(
        lines
            .iter()
            .any(|l| field(l, "status") == 403 && l["level"] == "WARN"),
        "the 403 is logged: {json}"
    );
    assert!(
        lines
            .iter()
            .any(|l| field(l, "action") == "inbound.disable" && field(l, "status") == 409),
        "the action and its outcome: {json}"
    );
    assert!(
        !json.contains("cranelift") && !json.contains("wasmtime_"),
        "no compiler lines: {json}"
    );
    assert!(
        lines.iter().any(|l| field(l, "message") == "task FAILED"
            && field(l, "reason") == "Task failed as requested"),
        "a FAILED task with its reason: {json}"
    );

    let get = lines
        .iter()
        .find(|l| field(l, "a2a_method") == "GetTask" && field(l, "status") == 200)
        .unwrap_or_else(|| panic!("no GetTask line in {json}"));
    assert_eq!(
        field(get, "task").as_str().unwrap().len(),
        36,
        "a read names its task: {get}"
    );
    let ended = lines
        .iter()
        .find(|l| field(l, "message") == "a2a stream ended")
        .unwrap_or_else(|| panic!("no stream end in {json}"));
    assert!(
        field(ended, "frames").as_u64().unwrap() >= 3
            && field(ended, "ms").as_f64().is_some()
            && field(ended, "a2a_method") == "SendStreamingMessage",
        "{ended}"
    );
    assert!(
        lines
            .iter()
            .any(|l| field(l, "a2a_method") == "message/send" && field(l, "outcome") == "ok"),
        "the 0.3 call is logged by its 0.3 name: {json}"
    );
    for why in ["missing_token", "wrong_token"] {
        assert!(
            lines
                .iter()
                .any(|l| field(l, "status") == 401 && field(l, "outcome") == why),
            "a 401 says {why}: {json}"
        );
    }
    assert!(
        lines.iter().any(|l| field(l, "a2a_method") == "SendMessage"
            && field(l, "status") == 401
            && field(l, "outcome") == "wrong_token"
            && l["level"] == "WARN"),
        "a gRPC refusal says which check failed, as a warning: {json}"
    );
    assert!(!json.contains("log-token-0123456789abcdef") && !json.contains("wrong-token"));

    let text = serve_logs(&[]).await;
    assert!(
        !text.contains('\u{1b}'),
        "no ANSI colours when stderr is not a terminal: {text}"
    );
    assert!(
        text.contains("a2a request") && text.contains("a2a_method=\"SendMessage\"")
            || text.contains("a2a_method=SendMessage"),
        "{text}"
    );
}

/// The processes whose environment marks them as the turn of `task` (any instance).
fn turn_processes(task: &str) -> Vec<i32> {
    let suffix = format!("/{task}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            env.split(|b| *b == 0).any(|kv| {
                kv.strip_prefix(b"A2A_EDGE_TURN=")
                    .is_some_and(|v| v.ends_with(suffix.as_bytes()))
            })
        })
        .collect()
}

/// Starts a slow command turn on `base`; its task id, once its processes run.
async fn slow_turn(base: &str) -> String {
    let params = serde_json::json!({
        "message": {"messageId": format!("m-{}", uuid::Uuid::new_v4()), "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"returnImmediately": true}});
    let v = call(base, "slow", "SendMessage", params).await;
    let task = v["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_owned();
    for _ in 0..100 {
        if turn_processes(&task).len() == 2 {
            return task;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!(
        "the turn's sh and sleep never ran: {:?}",
        turn_processes(&task)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_processes_never_outlive_the_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("edge.toml");
    std::fs::write(
        &config,
        "[runtime]\nshutdownGraceMs = 300\n[[presets]]\nid = \"slow\"\nbackend = \"command\"\ncommand = [\"sh\", \"-c\", \"sleep 600 & wait\"]\n[[instances]]\nid = \"slow\"\nname = \"slow\"\npreset = \"slow\"\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let args = ["--config", config.to_str().unwrap()];

    // kill -9: the shell dies with the runtime (parent-death signal), the next start kills its child.
    let (mut child, base) = serve(&data, &args).await;
    let task = slow_turn(&base).await;
    child.start_kill().unwrap();
    child.wait().await.unwrap();
    for _ in 0..60 {
        if turn_processes(&task).len() == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        turn_processes(&task).len(),
        1,
        "the shell went with the runtime; its child was reparented"
    );
    let (mut child, base) = serve(&data, &args).await;
    gone(&task).await;
    let t: Value = call(&base, "slow", "GetTask", serde_json::json!({"id": task})).await;
    assert_eq!(t["result"]["status"]["state"], "TASK_STATE_FAILED", "{t}");

    // SIGTERM past the grace: the runtime kills the group before it exits.
    let task = slow_turn(&base).await;
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    child.wait().await.unwrap();
    gone(&task).await;
}

/// Waits (up to 3 s) until no process of the turn is left: a killed process takes a moment to go.
async fn gone(task: &str) {
    for _ in 0..60 {
        if turn_processes(task).is_empty() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!(
        "processes of the turn outlived the runtime: {:?}",
        turn_processes(task)
    );
}

/// `a2a-edge serve` on the data directory `dir` under the shell's `ulimit <limit>` (soft and
/// hard: the runtime cannot raise it).
fn limited(limit: &str, dir: &std::path::Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c").arg(format!(
        "ulimit {limit} && exec {} serve --listen 127.0.0.1:0 --data-dir {}",
        env!("CARGO_BIN_EXE_a2a-edge"),
        dir.display()
    ));
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_file_descriptors_the_server_backs_off_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    // 64 descriptors, soft and hard: the runtime cannot raise them, and runs out at once.
    let (child, base) = started(limited("-n 64", dir.path())).await;
    let addr = base.trim_start_matches("http://").to_owned();
    let mut held = Vec::new();
    for _ in 0..100 {
        if let Ok(c) = tokio::net::TcpStream::connect(&addr).await {
            held.push(c);
        }
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    drop(held);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let card = reqwest::Client::new()
        .get(format!("{base}/a2a/demo/agent-card.json"))
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await
        .unwrap();
    assert_eq!(
        card.status().as_u16(),
        200,
        "serves again once descriptors are free"
    );
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    let failures = log.matches("accept failed").count();
    assert!(
        (1..=3).contains(&failures),
        "accept failures are logged at most once per 10 s, not in a loop: {failures} lines\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_starts_and_answers_within_a_limited_address_space() {
    let dir = tempfile::tempdir().unwrap();
    // An agent preset too: the agents' pool is then reserved, sized from its limits.
    let config = dir.path().join("edge.toml");
    std::fs::write(
        &config,
        "[[presets]]\nid = \"echoes\"\nbackend = \"component\"\ncomponent = \"echo-agent\"\nlimits = { memoryMib = 64, concurrentTurns = 8 }\n\n[[instances]]\nid = \"agent\"\nname = \"agent\"\npreset = \"echoes\"\n",
    )
    .unwrap();
    // 16 GiB of address space (as `ulimit -v`, strict overcommit or valgrind allow): far less
    // than a pool of 4 GiB reservations per memory.
    let mut cmd = limited(&format!("-v {}", 16u64 << 20), dir.path());
    cmd.env("A2A_EDGE_CONFIG", &config);
    let (child, base) = started(cmd).await;
    let params = serde_json::json!({"message": {"messageId": "m-as", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
    let answer = request(
        &reqwest::Client::new(),
        &format!("{base}/a2a/agent"),
        "SendMessage",
        params,
    )
    .send()
    .await
    .unwrap();
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(
        body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "the agent's turn ran: {body}"
    );
    unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("memories reserve [runtime] memoryMib each"),
        "says why it is slower: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_running_when_its_stdout_is_closed() {
    // `a2a-edge serve | head -1`: the reader is gone before the banner is written.
    let dir = tempfile::tempdir().unwrap();
    let port = a2a_edge_tests::binary::free_port();
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    unsafe { libc::close(fds[0]) };
    let stdout = unsafe { <std::process::Stdio as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .stdout(stdout)
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let card = format!("http://127.0.0.1:{port}/a2a/demo/agent-card.json");
    let mut served = false;
    for _ in 0..100 {
        if reqwest::get(&card)
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            served = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(
        served && child.try_wait().unwrap().is_none(),
        "the server runs on without a reader of its banner"
    );
    assert!(reqwest::get(&card).await.unwrap().status().is_success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_command_paths_are_the_config_files_and_a_missing_one_refuses_the_start() {
    use std::os::unix::fs::PermissionsExt;
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir(site.path().join("work")).unwrap();
    // One agent.sh beside the config file, one in the working directory: each says which it is.
    for (dir, name) in [
        (site.path().to_owned(), "site"),
        (site.path().join("work"), "work"),
    ] {
        let agent = dir.join("agent.sh");
        std::fs::write(&agent, format!("#!/bin/sh\necho \"{name} from $(pwd)\"\n")).unwrap();
        std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let config = site.path().join("edge.toml");
    let write_in = |command: &str, working_dir: Option<&str>| {
        let working_dir = working_dir
            .map(|d| format!("workingDir = {d:?}\n"))
            .unwrap_or_default();
        std::fs::write(
            &config,
            format!(
                "[runtime]\ncacheDir = {:?}\n[[presets]]\nid = \"local\"\nbackend = \"command\"\ncommand = [{command:?}]\n{working_dir}\
                 [[instances]]\nid = \"local\"\nname = \"local\"\npreset = \"local\"\n",
                shared_cache()
            ),
        )
        .unwrap();
    };
    let write = |command: &str| write_in(command, Some("work"));
    let elsewhere = tempfile::tempdir().unwrap();
    // The agent's answer, served from another directory than the config file's.
    let answer_of = async |message_id: &str| {
        let data = tempfile::tempdir().unwrap();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"));
        cmd.current_dir(elsewhere.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data.path())
            .arg("--config")
            .arg(&config);
        let (_child, base) = started(cmd).await;
        let message = serde_json::json!({"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
        let answer = call(&base, "local", "SendMessage", message).await;
        let text = answer["result"]["task"]["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (text, answer)
    };
    // Without a workingDir, ./agent.sh is the config file's.
    write_in("./agent.sh", None);
    let (text, answer) = answer_of("rel-0").await;
    assert!(text.starts_with("site from "), "{answer}");
    // With a workingDir (the config file's work/), ./agent.sh is the one there, where it runs.
    write("./agent.sh");
    let (text, answer) = answer_of("rel-1").await;
    let work = std::fs::canonicalize(site.path().join("work")).unwrap();
    assert_eq!(
        text.trim(),
        format!("work from {}", work.display()),
        "{answer}"
    );

    write("./missing.sh");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .current_dir(elsewhere.path())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(tempfile::tempdir().unwrap().path())
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && said.contains("preset \"local\"")
            && said.contains(&work.join("missing.sh").display().to_string())
            && said.contains("taken from the preset's workingDir"),
        "refused naming the preset, the path and where it was looked for: {said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_shows_data_and_file_parts_saves_files_and_gives_up_at_its_timeout() {
    let c = Cli::start().await;
    let create = serde_json::json!({"action": "inbound.create", "id": "parts", "name": "parts", "description": "d", "version": "1", "preset": "scripted"});
    let made = a2a_edge_tests::action(&c.base(), create).await;
    assert_eq!(made["ok"], true, "{made}");
    let card = format!("{}/a2a/parts/agent-card.json", c.base());
    let data = c.ok(&["send", &card, "tck-artifact-data please"]).await;
    let shown: Value = serde_json::from_str(data.trim()).unwrap();
    assert_eq!(
        shown,
        serde_json::json!({"key": "value", "count": 42}),
        "{data}"
    );
    let file = c.ok(&["send", &card, "tck-artifact-file please"]).await;
    assert!(
        file.contains("[file output.txt (text/plain, 14 bytes); --save DIR writes it]"),
        "{file}"
    );
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("out");
    let saved = c
        .ok(&[
            "send",
            &card,
            "tck-artifact-file again",
            "--save",
            save.to_str().unwrap(),
            "--stream",
        ])
        .await;
    assert!(saved.contains("saved as"), "{saved}");
    assert_eq!(
        std::fs::read_to_string(save.join("output.txt")).unwrap(),
        "Hello from TCK"
    );
    let url = c.ok(&["send", &card, "tck-artifact-file-url please"]).await;
    assert!(
        url.contains("[file output.txt (text/plain) at https://example.com/output.txt]"),
        "{url}"
    );
    let slow = c
        .fails(&["send", &card, "tck-long-running please", "--timeout", "1"])
        .await;
    assert!(slow.contains("no whole answer within 1 s"), "{slow}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_the_proxy_from_the_environment_and_the_ca_file_from_the_config() {
    use a2a_edge_tests::network::{ForwardProxy, TlsFront};
    let front = TlsFront::start().await;
    let behind = a2a_edge::config::Config {
        public_base_url: Some(format!("https://127.0.0.2:{}", front.port)),
        ..Default::default()
    };
    let b = Server::start(behind).await;
    front.forward_to(b.running.as_ref().unwrap().addr);
    let proxy = ForwardProxy::start().await;
    let site = tempfile::tempdir().unwrap();
    std::fs::write(site.path().join("ca.pem"), &front.ca_pem).unwrap();
    let config = site.path().join("edge.toml");
    std::fs::write(
        &config,
        format!(
            "[runtime]\ncacheDir = {:?}\n[egress]\ncaFile = \"ca.pem\"\n",
            shared_cache()
        ),
    )
    .unwrap();
    let card = format!("https://localhost:{}/a2a/demo/agent-card.json", front.port);
    let endpoint = format!("CONNECT 127.0.0.2:{} HTTP/1.1", front.port);
    let through = |data: &std::path::Path, no_proxy: Option<&str>| {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .arg("--config")
            .arg(&config)
            .env("HTTPS_PROXY", proxy.url())
            .env_remove("NO_PROXY")
            .env_remove("no_proxy");
        if let Some(n) = no_proxy {
            cmd.env("NO_PROXY", n);
        }
        cmd
    };
    for (no_proxy, proxied) in [(None, true), (Some("localhost,127.0.0.0/8"), false)] {
        let before = proxy.seen().len();
        let data = tempfile::tempdir().unwrap();
        let (_child, base) = started(through(data.path(), no_proxy)).await;
        let create = serde_json::json!({"action": "outbound.create", "name": "site", "agentCardUrl": card, "allowPrivate": true});
        let id = a2a_edge_tests::action(&base, create).await["id"]
            .as_str()
            .unwrap_or_else(|| panic!("created (NO_PROXY {no_proxy:?})"))
            .to_owned();
        let call = serde_json::json!({"action": "outbound.call", "id": id, "skill": "chat", "prompt": "via the site's proxy"});
        let answer = a2a_edge_tests::action(&base, call).await;
        assert_eq!(answer["result"], "via the site's proxy", "{answer}");
        let seen = &proxy.seen()[before..];
        assert_eq!(
            seen.contains(&endpoint),
            proxied,
            "NO_PROXY {no_proxy:?}: {seen:?}"
        );
        if !proxied {
            assert!(seen.is_empty(), "{seen:?}");
        }
    }
}

/// Runs `a2a-edge agent new <name> --lang <lang> --dir <dir>`.
fn agent_new_run(name: &str, lang: &str, dir: &std::path::Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .args(["agent", "new", name, "--lang", lang, "--dir"])
        .arg(dir)
        .output()
        .unwrap()
}

/// [`agent_new_run`], which must succeed; what it printed.
fn agent_new(name: &str, lang: &str, dir: &std::path::Path) -> String {
    let out = agent_new_run(name, lang, dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_new_writes_projects_in_rust_python_and_javascript_that_build_and_serve() {
    use a2a_edge::sessions::preset::{Backend, ComponentSettings, Preset};
    use a2a_edge_tests::toolchains::{componentize_js, componentize_py, pins};
    let work = tempfile::tempdir().unwrap();
    let (requirements, package) = pins();
    let mut built = Vec::new();
    for (lang, name) in [
        ("rust", "hello-rs"),
        ("python", "hello-py"),
        ("js", "hello-js"),
    ] {
        let dir = work.path().join(name);
        let said = agent_new(name, lang, &dir);
        assert!(
            said.contains("build:") && said.contains("a2a-edge serve --config a2a-edge.toml"),
            "{said}"
        );
        assert!(dir.join("wit/agent.wit").exists() && dir.join("a2a-edge.toml").exists());
        if lang == "js" {
            // Its build tools are locked, under the project's name, for `npm ci`.
            let lock = std::fs::read_to_string(dir.join("package-lock.json")).unwrap();
            let lock: Value = serde_json::from_str(&lock).unwrap();
            assert_eq!(lock["name"], name, "{lock}");
            assert_eq!(lock["packages"][""]["name"], name, "{lock}");
            assert!(said.contains("npm ci && npm run build"), "{said}");
        }
        let wasm = match lang {
            "rust" => {
                let target =
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/agent-new");
                let out = std::process::Command::new("cargo")
                    .args(["build", "--release", "--target", "wasm32-wasip2"])
                    .env("CARGO_TARGET_DIR", &target)
                    .current_dir(&dir)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                target.join("wasm32-wasip2/release/hello_rs.wasm")
            }
            "python" => {
                tokio::task::block_in_place(|| componentize_py(&requirements, &dir, name));
                dir.join("hello-py.wasm")
            }
            _ => {
                tokio::task::block_in_place(|| componentize_js(&package, &dir, name));
                dir.join("hello-js.wasm")
            }
        };
        built.push((name, std::fs::read(wasm).unwrap()));
    }
    let again = agent_new_run("hello-rs", "rust", &work.path().join("hello-rs"));
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("exists"));
    let presets: Vec<Preset> = built
        .iter()
        .map(|(name, _)| {
            Preset::new(
                name,
                Backend::Component(ComponentSettings {
                    component: (*name).into(),
                    ..ComponentSettings::default()
                }),
            )
        })
        .collect();
    let config = a2a_edge::config::Config {
        instances: built
            .iter()
            .map(|(n, _)| a2a_edge_tests::instance(n, n))
            .collect(),
        presets,
        ..Default::default()
    };
    let s = Server::start_with(config, |dir| {
        for (name, wasm) in &built {
            a2a_edge_tests::put_component(dir, name, wasm);
        }
    })
    .await;
    for (name, _) in &built {
        let r = s
            .send(&format!("/a2a/{name}"), &format!("m-{name}"), "hi")
            .await;
        let task = &r["result"]["task"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_COMPLETED",
            "{name}: {r}"
        );
        assert_eq!(
            task["artifacts"][0]["parts"][0]["text"],
            format!("{name} heard: hi"),
            "{name}: {r}"
        );
    }
}

#[test]
fn config_check_validates_a_file_without_starting_and_names_what_is_wrong() {
    let site = tempfile::tempdir().unwrap();
    let config = site.path().join("edge.toml");
    let check = |text: &str, json: bool| {
        std::fs::write(&config, text).unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"));
        cmd.args(["config", "check"]).arg(&config);
        cmd.arg("--data-dir").arg(site.path());
        if json {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), said)
    };
    let good = "[[instances]]\nname = \"reports\"\npreset = \"scripted\"\nendpointPath = \"/agents/reports\"\n";
    let (ok, said) = check(good, false);
    assert!(
        ok && said.contains("valid (1 instance(s), 0 connection(s)"),
        "{said}"
    );
    let (ok, said) = check(good, true);
    let v: Value = serde_json::from_str(said.trim()).unwrap();
    assert!(ok && v["ok"] == true && v["instances"] == 1, "{said}");
    // Each mistake is named with the entry and the field, as `serve` would refuse it.
    for (text, names) in [
        (
            "[[instances]]\nname = \"x\"\npreset = \"ghost\"\n",
            &["[[instances]] entry 1", "unknown preset \"ghost\""][..],
        ),
        (
            "[[instances]]\nname = \"x\"\nendpointPath = \"/readyz\"\n",
            &["endpointPath", "reserved"][..],
        ),
        (
            "[[instances]]\nname = \"x\"\ncomponent = \"nowhere\"\n",
            &["component", "no component \"nowhere\""][..],
        ),
        ("[runtime\n", &["edge.toml is invalid"][..]),
        (
            "[[presets]]\nid = \"web\"\nbackend = \"component\"\ncomponent = \"echo-agent\"\ngrants = { allowedHosts = [\"[::1]\", \"::1\"] }\n",
            &[
                "preset \"web\"",
                "allowedHosts entry \"::1\"",
                "in brackets",
            ][..],
        ),
        (
            "[tls]\ncertFile = \"missing.pem\"\nkeyFile = \"missing.key\"\n",
            &["certFile"][..],
        ),
    ] {
        let (ok, said) = check(text, false);
        assert!(!ok, "{text}: {said}");
        for name in names {
            assert!(said.contains(name), "{text}: {name} not in {said}");
        }
    }
    // What `serve` refuses of its listeners against the file, the check refuses too.
    std::fs::write(&config, good).unwrap();
    let listening = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
            .args(["config", "check"])
            .arg(&config)
            .arg("--data-dir")
            .arg(site.path())
            .args(args)
            .env_remove("A2A_EDGE_LISTEN")
            .env_remove("A2A_EDGE_CONTROL_LISTEN")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, said) = listening(&["--listen", "0.0.0.0:3080"]);
    assert!(!ok && said.contains("publicBaseUrl"), "{said}");
    let (ok, said) = listening(&["--control-listen", "0.0.0.0:3081"]);
    assert!(!ok && said.contains("loopback"), "{said}");
    std::fs::write(
        &config,
        format!("publicBaseUrl = \"https://agents.example.com\"\n{good}"),
    )
    .unwrap();
    let (ok, said) = listening(&["--listen", "0.0.0.0:3080"]);
    assert!(ok, "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_the_changed_file_without_dropping_a_request_and_keeps_it_when_broken() {
    use tokio::io::AsyncReadExt;
    let site = tempfile::tempdir().unwrap();
    let config = site.path().join("edge.toml");
    // The instance runs on a preset of the file: its reply and skill change with it.
    let write = |description: &str, tasks: u32| {
        let text = format!(
            "[runtime]\ncacheDir = {:?}\n[[presets]]\nid = \"talk\"\nbackend = \"command\"\n\
             command = [\"sh\", \"-c\", \"echo {description} reply\"]\nskills = [{{ id = \"{description}-skill\" }}]\n\
             [[instances]]\nid = \"docs\"\nname = \"docs\"\ndescription = {description:?}\npreset = \"talk\"\n\
             [instances.limits]\nmaxConcurrentTasks = {tasks}\n",
            shared_cache()
        );
        std::fs::write(&config, text).unwrap();
    };
    let reply = |base: String| async move {
        let params = serde_json::json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
        let r = call(&base, "docs", "SendMessage", params).await;
        r["result"]["task"]["artifacts"][0]["parts"][0]["text"].clone()
    };
    write("first", 4);
    let data = tempfile::tempdir().unwrap();
    let config_arg = config.to_str().unwrap();
    let (mut child, base) = serve(data.path(), &["--config", config_arg]).await;
    let mut stderr = child.stderr.take().unwrap();
    let log = tokio::spawn(async move {
        let mut all = String::new();
        let _ = stderr.read_to_string(&mut all).await;
        all
    });
    // A client loop for the whole test: every request must be answered 200.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let client = {
        let (stop, base) = (stop.clone(), base.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let (mut sent, mut failed) = (0u32, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let params = serde_json::json!({"message": {"messageId": format!("hup-{sent}"), "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
                let r = request(&http, &format!("{base}/a2a/docs"), "SendMessage", params)
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status() == 200 => {}
                    other => failed.push(format!("{other:?}")),
                }
                sent += 1;
            }
            (sent, failed)
        })
    };
    let card = |base: String| async move {
        reqwest::get(format!("{base}/a2a/docs/agent-card.json"))
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let limit = |base: String| async move {
        let all: Value = reqwest::get(format!("{base}/a2a/api"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let docs = all["inbounds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "docs")
            .cloned()
            .unwrap();
        docs["limits"]["maxConcurrentTasks"].clone()
    };
    assert_eq!(card(base.clone()).await["description"], "first");
    assert_eq!(card(base.clone()).await["skills"][0]["id"], "first-skill");
    assert_eq!(reply(base.clone()).await, "first reply\n");
    let hup = |pid: u32| {
        assert!(
            std::process::Command::new("kill")
                .args(["-HUP", &pid.to_string()])
                .status()
                .unwrap()
                .success()
        )
    };
    let pid = child.id().unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    write("second", 8);
    hup(pid);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while card(base.clone()).await["description"] != "second" {
        assert!(std::time::Instant::now() < deadline, "SIGHUP not applied");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(limit(base.clone()).await, 8);
    assert_eq!(card(base.clone()).await["skills"][0]["id"], "second-skill");
    assert_eq!(reply(base.clone()).await, "second reply\n");
    // A file that drops the preset an instance made over the control API runs on changes
    // nothing, and says how to fix it.
    let create = serde_json::json!({"action": "inbound.create", "id": "api", "name": "api", "description": "d", "version": "1", "preset": "talk"});
    assert_eq!(a2a_edge_tests::action(&base, create).await["ok"], true);
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("preset = \"talk\"", "preset = \"echo\"")
            .replace("id = \"talk\"", "id = \"other\""),
    )
    .unwrap();
    hup(pid);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(reply(base.clone()).await, "second reply\n");
    // A broken file: still serving the last good configuration, and the log says why.
    std::fs::write(&config, "[[instances]\nname = ").unwrap();
    hup(pid);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(card(base.clone()).await["description"], "second");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (sent, failed) = client.await.unwrap();
    assert!(
        sent > 10 && failed.is_empty(),
        "{sent} sent, failed: {failed:?}"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP never ends the process"
    );
    child.start_kill().unwrap();
    let log = log.await.unwrap();
    assert!(log.contains("configuration reloaded"), "{log}");
    assert!(log.contains("presets changed"), "{log}");
    assert!(
        log.contains("\"api\" runs on preset \"talk\", which the file no longer has"),
        "{log}"
    );
    assert!(
        log.contains("configuration not reloaded") && log.contains("edge.toml is invalid"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbound_component_card_and_completions_commands_in_words_or_json() {
    let c = Cli::start().await;
    let card = format!("{}/a2a/demo/agent-card.json", c.base());
    let json = |out: String| -> Value { serde_json::from_str(&out).unwrap() };

    // outbound: discover, create, list, update, disable/enable, refresh, auth, call, remove.
    let found = c
        .ok(&["outbound", "discover", &card, "--allow-private"])
        .await;
    assert!(
        found.contains("endpoint") && found.contains("A2A 1.0") && found.contains("chat"),
        "{found}"
    );
    let found = json(
        c.ok(&["outbound", "discover", &card, "--allow-private", "--json"])
            .await,
    );
    assert_eq!(found["preview"]["protocolVersion"], "1.0", "{found}");
    let created = c
        .ok(&[
            "outbound",
            "create",
            &card,
            "--name",
            "self",
            "--allow-private",
            "true",
        ])
        .await;
    let id = created
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned();
    let table = c.ok(&["outbound", "list"]).await;
    assert!(table.contains("STATE") && table.contains(&id), "{table}");
    let listed = json(c.ok(&["outbound", "list", "--json"]).await);
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    c.ok(&["outbound", "update", &id, "--timeout-ms", "5000"])
        .await;
    let listed = json(c.ok(&["outbound", "list", "--json"]).await);
    assert_eq!(listed[0]["timeoutMs"], 5000, "{listed}");
    for verb in ["disable", "enable", "refresh"] {
        c.ok(&["outbound", verb, &id]).await;
    }
    let out = c
        .run_with(
            &["outbound", "auth", &id, "--token-stdin"],
            "a-long-enough-token\n",
        )
        .await;
    assert!(out.status.success(), "{out:?}");
    c.ok(&["outbound", "auth", &id, "--clear"]).await;
    let said = c.fails(&["outbound", "auth", &id]).await;
    assert!(said.contains("--token-stdin"), "{said}");
    let answer = c
        .ok(&["outbound", "call", &id, "chat", "hello there"])
        .await;
    assert!(answer.contains("hello there"), "{answer}");
    c.ok(&["outbound", "remove", &id]).await;

    // Refusals in words; the HTTP status only with --json.
    let said = c.fails(&["outbound", "remove", &id]).await;
    assert!(said.contains(&id) && !said.contains("HTTP"), "{said}");
    let out = c.run_with(&["outbound", "remove", &id, "--json"], "").await;
    let refused = json(String::from_utf8(out.stdout).unwrap());
    assert_eq!(
        (refused["ok"].clone(), refused["status"].clone()),
        (serde_json::json!(false), serde_json::json!(409)),
        "{refused}"
    );

    // component: list, swap, reload.
    let table = c.ok(&["component", "list"]).await;
    assert!(
        table.contains("a2a-server") && table.contains("server") && table.contains("demo"),
        "{table}"
    );
    c.ok(&["component", "swap", "demo", "a2a-server"]).await;
    let said = c.fails(&["component", "swap", "demo", "ghost"]).await;
    assert!(said.contains("ghost"), "{said}");
    let said = c.fails(&["component", "reload", "ghost"]).await;
    assert!(said.contains("ghost") && !said.contains("HTTP"), "{said}");

    // card: any agent's card, checked.
    let shown = c.ok(&["card", &card]).await;
    assert!(
        shown.contains("JSONRPC")
            && shown.contains("ok   speaks A2A 1.0")
            && !shown.contains("FAIL"),
        "{shown}"
    );
    let checked = json(c.ok(&["card", &card, "--json"]).await);
    assert_eq!(checked["ok"], true);
    assert!(
        checked["checks"].as_array().unwrap().len() >= 10,
        "{checked}"
    );
    let said = c
        .fails(&["card", &format!("{}/a2a/nowhere/agent-card.json", c.base())])
        .await;
    assert!(said.contains("answered HTTP 404"), "{said}");

    // completions for each shell.
    for shell in ["bash", "zsh", "fish"] {
        let script = c.ok(&["completions", shell]).await;
        assert!(
            script.contains("a2a-edge") && script.contains("outbound"),
            "{shell}: {script}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_keeps_streamed_lines_explains_failures_once_and_completes_every_word() {
    // A command agent that streams three lines, and one that fails saying why on stderr.
    let site = tempfile::tempdir().unwrap();
    let config = site.path().join("edge.toml");
    std::fs::write(
        &config,
        format!(
            "[runtime]\ncacheDir = {:?}\n\
             [[presets]]\nid = \"lines\"\nbackend = \"command\"\n\
             command = [\"sh\", \"-c\", \"echo one; sleep 0.2; echo two; sleep 0.2; echo three\"]\n\
             [[presets]]\nid = \"broken\"\nbackend = \"command\"\n\
             command = [\"sh\", \"-c\", \"echo the disk is full >&2; exit 3\"]\n\
             [[instances]]\nid = \"lines\"\nname = \"lines\"\npreset = \"lines\"\n\
             [[instances]]\nid = \"broken\"\nname = \"broken\"\npreset = \"broken\"\n",
            shared_cache()
        ),
    )
    .unwrap();
    let c = Cli(Server::start(a2a_edge::config::Config::load(&config).unwrap()).await);
    let card = format!("{}/a2a/lines/agent-card.json", c.base());
    let streamed = c.ok(&["send", &card, "go", "--stream"]).await;
    assert_eq!(streamed, "one\ntwo\nthree\n", "each chunk's newline kept");
    let whole = c.ok(&["send", &card, "go"]).await;
    assert_eq!(whole, "one\ntwo\nthree\n");

    // `task get` shows the operator's reason beside the caller's.
    let broken = format!("{}/a2a/broken/agent-card.json", c.base());
    c.fails(&["send", &broken, "go"]).await;
    let page: Value =
        serde_json::from_str(&c.ok(&["task", "list", "--json", "--state", "failed"]).await)
            .unwrap();
    let id = page["tasks"][0]["taskId"].as_str().unwrap().to_owned();
    let shown = c.ok(&["task", "get", &id]).await;
    let why = shown
        .lines()
        .find(|l| l.starts_with("why"))
        .unwrap_or_else(|| panic!("no reason for the operator: {shown}"));
    assert!(why.contains("the disk is full"), "{shown}");

    // A failed update check (the tests' registry is nowhere) is one JSON document with --json.
    let out = c.run_with(&["update", "--json"], "").await;
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!out.status.success(), "{stdout}");
    let docs: Vec<Value> = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(docs.len(), 1, "{stdout}");
    assert_eq!(docs[0]["ok"], false);

    // Bash completes every word, not only the first.
    let script = c.ok(&["completions", "bash"]).await;
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let program = format!(
            "{script}\nCOMP_WORDS=({words})\nCOMP_CWORD={cword}\nCOMP_LINE='{line}'\nCOMP_POINT=${{#COMP_LINE}}\n\
             \"$(complete -p a2a-edge | sed 's/.*-F \\([^ ]*\\).*/\\1/')\" a2a-edge '{last}' '{prev}'\n\
             echo \"${{COMPREPLY[@]}}\"\n",
            words = words.join(" "),
            cword = words.len() - 1,
            last = words[words.len() - 1],
            prev = words[words.len() - 2],
        );
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(program)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert!(complete("a2a-edge inb").contains("inbound"));
    let second = complete("a2a-edge inbound ena");
    assert_eq!(second, "enable", "the second word completes too");
    assert!(complete("a2a-edge task get --js").contains("--json"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_pointed_at_the_public_listener_is_told_where_the_control_api_is() {
    let s = Server::start_split(a2a_edge::config::Config::default()).await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .args(["inbound", "list"])
        .env("A2A_EDGE_API", format!("{}/a2a/api", s.base()))
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && said.contains("--control-listen") && said.contains("--api"),
        "{said}"
    );
}
