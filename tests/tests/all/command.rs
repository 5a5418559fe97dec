//! The `command` session backend over real HTTP: a program per turn, prompt on stdin, ids in the
//! environment, stdout streamed, exit status deciding, timeout and cancel killing the group.

use std::time::Duration;

use a2a_edge::config::Config;
use a2a_edge_tests::{Server, command_preset as preset, instance, message};
use serde_json::json;

/// A sleep duration unique to this test process, so leftovers of other runs never match.
fn nap(whole: u32) -> String {
    format!("{whole}.{}", std::process::id())
}

async fn server() -> Server {
    let presets = vec![
        preset("cat", "cat", None),
        preset(
            "env",
            r#"printf '%s|%s|%s' "$A2A_CONTEXT_ID" "$A2A_TASK_ID" "$A2A_SKILL""#,
            None,
        ),
        preset(
            "fail",
            "echo partial; echo 'it went wrong' >&2; exit 3",
            None,
        ),
        preset(
            "slow",
            &format!("sleep {0} & sleep {0}; wait", nap(37)),
            None,
        ),
        preset("timeout", &format!("sleep {}", nap(38)), Some(500)),
        preset("stream", "printf 'one '; sleep 0.3; printf 'two'", None),
        preset("history", r#"printf '%s' "$A2A_HISTORY""#, None),
    ];
    let instances = presets.iter().map(|p| instance(&p.id, &p.id)).collect();
    Server::start(Config {
        presets,
        instances,
        ..Config::default()
    })
    .await
}

fn sleepers(pattern: &str) -> usize {
    let out = std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_goes_to_stdin_and_stdout_comes_back() {
    let s = server().await;
    let r = s
        .ok(
            "/a2a/cat",
            "SendMessage",
            json!({"message": message("m1", "hello from stdin")}),
        )
        .await;
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(
        r["task"]["artifacts"][0]["parts"][0]["text"],
        "hello from stdin"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_are_in_the_environment() {
    let s = server().await;
    let mut m = message("m2", "x");
    m["contextId"] = json!("ctx-env");
    let r = s.ok("/a2a/env", "SendMessage", json!({"message": m})).await;
    let id = r["task"]["id"].as_str().unwrap();
    assert_eq!(
        r["task"]["artifacts"][0]["parts"][0]["text"],
        format!("ctx-env|{id}|chat")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_exit_fails_the_task_and_only_the_operator_reads_its_stderr() {
    let s = server().await;
    let r = s
        .ok(
            "/a2a/fail",
            "SendMessage",
            json!({"message": message("m3", "x")}),
        )
        .await;
    let (said, detail) = s.failure(&r).await;
    assert_eq!(said, "the agent is not available", "{r}");
    assert!(!r.to_string().contains("it went wrong"), "{r}");
    assert!(
        detail.contains("exit status: 3") && detail.contains("it went wrong"),
        "{detail}"
    );
    assert_eq!(
        r["task"]["artifacts"][0]["parts"][0]["text"], "partial\n",
        "stdout before the failure is kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_streams_as_it_is_written() {
    let s = server().await;
    let events = s
        .stream(
            "/a2a/stream",
            "SendStreamingMessage",
            json!({"message": message("m4", "x")}),
            None,
        )
        .await
        .all()
        .await;
    let chunks: Vec<&str> = events
        .iter()
        .filter_map(|e| e.1["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(
        chunks,
        ["one ", "two"],
        "two writes 300 ms apart arrive as two frames"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_the_whole_process_group() {
    let s = server().await;
    let r = s
        .ok(
            "/a2a/slow",
            "SendMessage",
            json!({"message": message("m5", "x"), "configuration": {"returnImmediately": true}}),
        )
        .await;
    let id = r["task"]["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let marker = format!("sleep {}", nap(37));
    assert!(sleepers(&marker) >= 2, "the shell and its children run");
    let c = s.ok("/a2a/slow", "CancelTask", json!({"id": id})).await;
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sleepers(&marker), 0, "all of them are gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_over_its_timeout_is_killed_and_fails_the_task() {
    let s = server().await;
    let r = s
        .ok(
            "/a2a/timeout",
            "SendMessage",
            json!({"message": message("m6", "x")}),
        )
        .await;
    let (said, detail) = s.failure(&r).await;
    assert_eq!(said, "the agent is not available", "{r}");
    assert!(detail.contains("500 ms timeout"), "{detail}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(sleepers(&format!("sleep {}", nap(38))), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_context_resumes_with_its_history_after_a_restart() {
    let mut s = server().await;
    let send = |id: &str, text: &str| {
        let mut m = message(id, text);
        m["contextId"] = json!("ctx-history");
        json!({"message": m})
    };
    let first = s
        .ok("/a2a/history", "SendMessage", send("h1", "first question"))
        .await;
    assert_eq!(
        first["task"]["artifacts"][0]["parts"][0]["text"], "[]",
        "a new context has no history"
    );
    let second = s
        .ok("/a2a/history", "SendMessage", send("h2", "second question"))
        .await;
    let seen: serde_json::Value = serde_json::from_str(
        second["task"]["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        seen,
        json!([{"role": "user", "text": "first question"}, {"role": "agent", "text": "[]"}])
    );
    s.restart().await;
    let third = s
        .ok("/a2a/history", "SendMessage", send("h3", "third question"))
        .await;
    let seen: serde_json::Value = serde_json::from_str(
        third["task"]["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let roles: Vec<&str> = seen
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "agent", "user", "agent"],
        "rebuilt from the persisted tasks: {seen}"
    );
    assert_eq!(seen[2]["text"], "second question");
    let other = s
        .ok(
            "/a2a/history",
            "SendMessage",
            json!({"message": message("h4", "elsewhere")}),
        )
        .await;
    assert_eq!(
        other["task"]["artifacts"][0]["parts"][0]["text"], "[]",
        "history is per context"
    );
}
