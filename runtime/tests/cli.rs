//! The `a2a-edge` CLI as its users run it: the real binary against a real server, as a client
//! of the control API and of an A2A agent.

use std::process::Output;

use a2a_edge::config::Config;
use serde_json::Value;

struct Cli {
    running: a2a_edge::Running,
    _dir: tempfile::TempDir,
}

impl Cli {
    async fn start() -> Cli {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.runtime.cache_dir = Some(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-compile-cache"));
        config.update.registry_url = "http://127.0.0.1:9/registry".into();
        config.update.manifest_url = "http://127.0.0.1:9/manifest".into();
        let running = a2a_edge::Running::start(config, dir.path().to_owned(), "127.0.0.1:0".parse().unwrap()).await.unwrap();
        Cli { running, _dir: dir }
    }

    fn base(&self) -> String {
        format!("http://{}", self.running.addr)
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
        child.stdin.take().unwrap().write_all(stdin.as_bytes()).await.unwrap();
        child.wait_with_output().await.unwrap()
    }

    /// Runs and expects success; stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run_with(args, "").await;
        assert!(out.status.success(), "a2a-edge {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// Runs and expects failure; stderr.
    async fn fails(&self, args: &[&str]) -> String {
        let out = self.run_with(args, "").await;
        assert!(!out.status.success(), "a2a-edge {args:?} should fail: {}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8(out.stderr).unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inbound_commands_manage_instances() {
    let c = Cli::start().await;
    let created = c.ok(&["inbound", "create", "--name", "Docs Bot", "--description", "Answers docs"]).await;
    assert!(created.contains("inbound server \"Docs Bot\" created"), "{created}");
    let id = created.lines().find_map(|l| l.strip_prefix("id: ")).unwrap().to_owned();
    let table = c.ok(&["inbound", "list"]).await;
    assert!(table.lines().next().unwrap().contains("ID") && table.contains(&id) && table.contains("Docs Bot"), "{table}");
    let listed: Value = serde_json::from_str(&c.ok(&["inbound", "list", "--json"]).await).unwrap();
    assert!(listed.as_array().unwrap().iter().any(|i| i["id"] == id.as_str()));

    c.ok(&["inbound", "update", &id, "--name", "Docs Bot 2"]).await;
    c.ok(&["inbound", "disable", &id]).await;
    let card = format!("{}/a2a/{id}/agent-card.json", c.base());
    assert_eq!(reqwest::get(&card).await.unwrap().status().as_u16(), 404);
    c.ok(&["inbound", "enable", &id]).await;
    assert_eq!(reqwest::get(&card).await.unwrap().json::<Value>().await.unwrap()["name"], "Docs Bot 2");

    let out = c.run_with(&["inbound", "auth", &id, "--token-stdin"], "s3cret-cli\n").await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let endpoint = format!("{}/a2a/{id}/agent-card.json", c.base());
    let refused = c.fails(&["send", &endpoint, "hi"]).await;
    assert!(refused.contains("wants a bearer token"), "{refused}");
    let answer = c.ok(&["send", &endpoint, "hi with token", "--token", "s3cret-cli"]).await;
    assert_eq!(answer.trim(), "hi with token");
    c.ok(&["inbound", "auth", &id, "--clear"]).await;
    assert!(c.fails(&["inbound", "auth", &id]).await.contains("--token-stdin"));

    c.ok(&["inbound", "remove", &id]).await;
    let err = c.fails(&["inbound", "remove", &id]).await;
    assert!(err.contains("unknown inbound id") && err.contains("409"), "{err}");
    let err = c.fails(&["inbound", "create", "--name", "x", "--description", "d", "--preset", "ghost"]).await;
    assert!(err.contains("unknown preset \"ghost\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_streams_text_and_task_session_metrics_commands_read_it_back() {
    let c = Cli::start().await;
    let card = format!("{}/a2a/demo/agent-card.json", c.base());
    let out = c.run_with(&["send", &card, "streamed words arrive", "--stream", "--context", "cli-ctx"], "").await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "streamed words arrive");
    let status = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(status.contains("COMPLETED (context cli-ctx)"), "{status}");
    let frames = c.ok(&["send", &card, "as json", "--stream", "--json"]).await;
    assert!(frames.lines().count() >= 3 && frames.lines().all(|l| serde_json::from_str::<Value>(l).is_ok()), "{frames}");

    let tasks = c.ok(&["task", "list", "--context", "cli-ctx"]).await;
    assert!(tasks.contains("completed") && tasks.contains("1 task(s) in all"), "{tasks}");
    let page: Value = serde_json::from_str(&c.ok(&["task", "list", "--json", "--limit", "1"]).await).unwrap();
    assert_eq!(page["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(page["taskNextOffset"], 1);
    let id = page["tasks"][0]["taskId"].as_str().unwrap().to_owned();
    let shown = c.ok(&["task", "get", &id]).await;
    assert!(shown.contains(&id) && shown.contains("TASK_STATE_COMPLETED"), "{shown}");
    assert!(c.fails(&["task", "cancel", &id]).await.contains("COMPLETED"));
    assert!(c.fails(&["task", "get", "nope"]).await.contains("404"));

    let sessions = c.ok(&["session", "list"]).await;
    assert!(sessions.contains("cli-ctx") && sessions.contains("idle"), "{sessions}");
    assert!(c.ok(&["session", "close", "cli-ctx"]).await.contains("closed 1 live session(s)"));
    assert!(c.fails(&["session", "cancel", "ghost"]).await.contains("unknown session"));

    let metrics = c.ok(&["metrics"]).await;
    assert!(metrics.contains("SendMessage") && metrics.contains("active tasks"), "{metrics}");
    let prom = c.ok(&["metrics", "--prometheus"]).await;
    assert!(prom.contains("a2a_edge_requests_total"));
    let err = c.fails(&["update"]).await;
    assert!(err.contains("the update check failed"), "{err}");
    let err = c.fails(&["send", "http://127.0.0.1:9/agent-card.json", "x"]).await;
    assert!(err.contains("cannot reach"), "{err}");
}
