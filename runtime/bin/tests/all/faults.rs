//! The runtime under faults on one node (SQLite): a log output that goes away, a second server
//! on the same data directory, a read-only or full disk, a graceful stop and an online backup.
//! Nothing stays WORKING, nothing hangs, and what fails says why.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use a2a_edge::config::{Config, InstanceDecl};
use serde_json::{Value, json};

use a2a_edge_tests::binary::{free_port, ready, spawn_logging};
use a2a_edge_tests::faults::{Tmpfs, can_mount};
use a2a_edge_tests::jsonrpc::call;
use a2a_edge_tests::{get_json, isolated, shared_cache};

/// A config file in `dir` for the binary: the demo (echo) instance, `tck` (scripted) and `slow`
/// (a command turn that sleeps `secs`).
fn write_config(dir: &std::path::Path, secs: u32) {
    let toml = format!(
        "[runtime]\ncacheDir = {:?}\n\
         [[presets]]\nid = \"slow\"\nbackend = \"command\"\ncommand = [\"sleep\", \"{secs}\"]\n\
         [[instances]]\nid = \"demo\"\nname = \"demo\"\n\
         [[instances]]\nid = \"tck\"\nname = \"tck\"\npreset = \"scripted\"\n\
         [[instances]]\nid = \"slow\"\nname = \"slow\"\npreset = \"slow\"\n",
        shared_cache()
    );
    std::fs::write(dir.join("config.toml"), toml).unwrap();
}

/// `a2a-edge serve` on `dir` and `port` logging at info, its standard error as given.
fn serve(dir: &std::path::Path, port: u16, stderr: Stdio) -> std::process::Child {
    spawn_logging(env!("CARGO_BIN_EXE_a2a-edge"), dir, port, "info", stderr)
}

/// Waits for `child` to exit, up to `secs`; its status, or none if it still runs.
fn exited(child: &mut std::process::Child, secs: u64) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn message(id: &str, text: &str) -> Value {
    json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]}})
}

fn text_of(answer: &Value) -> &str {
    answer["result"]["task"]["artifacts"][0]["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_output_that_goes_away_costs_lines_never_the_server() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 1);
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = serve(dir.path(), port, Stdio::piped());
    // The reader of its log goes away at once (`serve 2>&1 | head -0`, a shipper that died).
    drop(server.stderr.take());
    ready(&reqwest::Client::new(), &base).await;
    for i in 0..50 {
        let answer = call(
            &base,
            "demo",
            "SendMessage",
            message(&format!("log-{i}"), "still here"),
        )
        .await;
        assert_eq!(text_of(&answer), "still here", "request {i}: {answer}");
    }
    let metrics: Value = get_json(&format!("{base}/a2a/api/metrics")).await;
    assert!(
        metrics["log"]["droppedLines"].as_u64().unwrap() > 0,
        "the lines that could not be written are counted: {}",
        metrics["log"]
    );
    // SIGTERM still stops it.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let status = exited(&mut server, 30);
    if status.is_none() {
        let _ = server.kill();
    }
    assert!(
        status.is_some_and(|s| s.success()),
        "SIGTERM stopped it: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_server_on_the_same_data_directory_is_refused_and_the_first_runs_on() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), 3);
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut first = serve(dir.path(), port, Stdio::null());
    ready(&reqwest::Client::new(), &base).await;
    let sent = call(
        &base,
        "slow",
        "SendMessage",
        json!({"message": {"messageId": "lock-1", "role": "ROLE_USER", "parts": [{"text": "go"}]},
               "configuration": {"returnImmediately": true}}),
    )
    .await;
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();

    let mut second = serve(dir.path(), free_port(), Stdio::piped());
    let status = exited(&mut second, 60).expect("the second server stops at once");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut said).unwrap();
    assert!(!status.success());
    assert!(
        said.contains(&dir.path().display().to_string())
            && said.contains(&format!("PID {}", first.id())),
        "it names the directory and the holder: {said}"
    );
    // The first one's turn was left alone: it completes.
    let deadline = Instant::now() + Duration::from_secs(30);
    let settled = loop {
        let got = call(&base, "slow", "GetTask", json!({"id": task})).await;
        if got["result"]["status"]["state"] != "TASK_STATE_WORKING" {
            break got;
        }
        assert!(Instant::now() < deadline, "{got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        settled["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{settled}"
    );
    let _ = first.kill();
    let _ = first.wait();
}

/// A config for a server in this process: `tck` (scripted), no update checks.
fn in_process() -> Config {
    isolated(Config {
        instances: vec![InstanceDecl {
            id: Some("tck".into()),
            name: "tck".into(),
            preset: Some("scripted".into()),
            ..Default::default()
        }],
        ..Config::default()
    })
}

async fn start_in(dir: &std::path::Path) -> anyhow::Result<a2a_edge::Running> {
    a2a_edge::Running::start(in_process(), dir.to_owned(), "127.0.0.1:0".parse().unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_data_directory_is_refused_at_start_saying_so() {
    if !can_mount() {
        return;
    }
    for with_wal in [false, true] {
        let disk = Tmpfs::mount(64);
        let data = disk.dir.path().join("data");
        if with_wal {
            // A killed server leaves the WAL pair beside the database.
            write_config(disk.dir.path(), 1);
            std::fs::create_dir_all(&data).unwrap();
            std::fs::copy(
                disk.dir.path().join("config.toml"),
                data.join("config.toml"),
            )
            .unwrap();
            let port = free_port();
            let mut server = serve(&data, port, Stdio::null());
            let base = format!("http://127.0.0.1:{port}");
            ready(&reqwest::Client::new(), &base).await;
            call(&base, "demo", "SendMessage", message("ro-1", "x")).await;
            server.kill().unwrap();
            server.wait().unwrap();
            assert!(data.join("a2a-edge.db-wal").exists());
        } else {
            start_in(&data).await.unwrap().stop().await;
        }
        disk.read_only();
        let refused = start_in(&data).await.err().expect("refused").to_string();
        assert!(
            refused.contains("read-only") && refused.contains(&data.display().to_string()),
            "with_wal={with_wal}: {refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_leaves_one_consistent_file_and_a_backup_copies_a_live_database() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_in(dir.path()).await.unwrap();
    let base = format!("http://{}", running.addr);
    for i in 0..20 {
        call(
            &base,
            "tck",
            "SendMessage",
            message(&format!("bk-{i}"), "hello"),
        )
        .await;
    }
    // A backup while it runs.
    let copy = dir.path().join("copy.db");
    let backup = || {
        Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
            .arg("backup")
            .arg(&copy)
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap()
    };
    let out = backup();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "backed up 20 tasks"
    );
    let again = backup();
    assert!(
        !again.status.success()
            && String::from_utf8_lossy(&again.stderr).contains("exists already"),
        "a backup never overwrites"
    );
    running.stop().await;
    let wal = dir.path().join("a2a-edge.db-wal");
    assert!(
        std::fs::metadata(&wal).map_or(0, |m| m.len()) == 0,
        "the stop checkpointed the WAL into the database"
    );
    // The .db alone holds everything.
    let alone = tempfile::tempdir().unwrap();
    std::fs::copy(
        dir.path().join("a2a-edge.db"),
        alone.path().join("a2a-edge.db"),
    )
    .unwrap();
    let db = rusqlite::Connection::open(alone.path().join("a2a-edge.db")).unwrap();
    let n: i64 = db
        .query_row("SELECT COUNT(*) FROM tasks", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 20);
}

/// `a2a-edge backup DEST --data-dir DIR [ARGS]`, killed if it has not ended after a minute; its
/// output, or none if it had to be killed.
fn backup_within_a_minute(
    dir: &std::path::Path,
    dest: &std::path::Path,
    args: &[&str],
) -> Option<std::process::Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_a2a-edge"))
        .arg("backup")
        .arg(dest)
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if exited(&mut child, 60).is_none() {
        child.kill().unwrap();
        child.wait().unwrap();
        return None;
    }
    Some(child.wait_with_output().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_finishes_under_a_steady_write_load_and_leaves_no_partial_copy() {
    let dir = tempfile::tempdir().unwrap();
    let running = start_in(dir.path()).await.unwrap();
    let base = format!("http://{}", running.addr);
    // About 40 MB: ten thousand pages, many steps of the copy.
    let big = "x".repeat(512 * 1024);
    for i in 0..80 {
        call(
            &base,
            "tck",
            "SendMessage",
            message(&format!("seed-{i}"), &big),
        )
        .await;
    }
    // The server writes steadily while the copy runs (one task every few milliseconds).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (base, stop) = (base.clone(), stop.clone());
        tokio::spawn(async move {
            let mut sent = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                call(
                    &base,
                    "tck",
                    "SendMessage",
                    message(&format!("load-{sent}"), "hello"),
                )
                .await;
                sent += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            sent
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // What a killed run left: a partial copy and its journal, removed by the next run.
    let copy = dir.path().join("copy.db");
    let partial = dir.path().join("copy.db.partial");
    let journal = dir.path().join("copy.db.partial-journal");
    std::fs::write(&partial, b"half a database").unwrap();
    std::fs::write(&journal, b"its journal").unwrap();
    let started = Instant::now();
    let dest = copy.clone();
    let data = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || backup_within_a_minute(&data, &dest, &[]))
        .await
        .unwrap();
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = writer.await.unwrap();
    let out = out.unwrap_or_else(|| {
        panic!("the backup did not finish within a minute while the server wrote {sent} tasks")
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        sent > 10,
        "the server wrote during the copy ({sent} tasks, {took:?})"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let copied: u64 = stdout
        .trim()
        .strip_prefix("backed up ")
        .and_then(|s| s.strip_suffix(" tasks"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(copied >= 80, "{stdout}");
    assert!(
        !partial.exists() && !journal.exists(),
        "the partial files are gone"
    );
    let db = rusqlite::Connection::open(&copy).unwrap();
    let ok: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    // A run that gives up removes what it wrote and says how to give it longer.
    let late = dir.path().join("late.db");
    let out = backup_within_a_minute(dir.path(), &late, &["--timeout", "0"]).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("--timeout"),
        "{stderr}"
    );
    assert!(!late.exists() && !dir.path().join("late.db.partial").exists());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_settles_every_acknowledged_task_once_it_has_room_again() {
    if !can_mount() {
        return;
    }
    let disk = Tmpfs::mount(24);
    let data = disk.dir.path().join("data");
    let running = start_in(&data).await.unwrap();
    let base = format!("http://{}", running.addr);
    // Tasks that run 4 s (a text delta a second), acknowledged WORKING.
    let mut tasks = Vec::new();
    for i in 0..6 {
        let sent = call(
            &base,
            "tck",
            "SendMessage",
            json!({"message": {"messageId": format!("tck-long-running-full-{i}"), "role": "ROLE_USER", "parts": [{"text": "go"}]},
                   "configuration": {"returnImmediately": true}}),
        )
        .await;
        tasks.push(
            sent["result"]["task"]["id"]
                .as_str()
                .expect("acknowledged")
                .to_owned(),
        );
    }
    // The disk fills up.
    let filler = disk.dir.path().join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 1 << 16];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }
    // The turns end while it is full: their final writes fail.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let snapshot: Value = get_json(&format!("{base}/a2a/api")).await;
    let store = &snapshot["store"];
    assert!(
        store["failures"].as_u64().unwrap() > 0
            && store["lastError"].as_str().unwrap_or("").contains("full"),
        "the store's health says what failed: {store}"
    );
    assert_eq!(store["healthy"], false, "{store}");
    let metrics: Value = get_json(&format!("{base}/a2a/api/metrics")).await;
    assert!(
        metrics["store"]["failures"].as_u64().unwrap() > 0,
        "{}",
        metrics["store"]
    );
    // Room again: every acknowledged task settles, none stays WORKING.
    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    for task in &tasks {
        loop {
            let got = call(&base, "tck", "GetTask", json!({"id": task})).await;
            let state = got["result"]["status"]["state"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            if state == "TASK_STATE_FAILED" || state == "TASK_STATE_COMPLETED" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "task {task} stayed {state}: {got}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Healthy again once calls succeed for a while after the latest failure.
    loop {
        let snapshot: Value = get_json(&format!("{base}/a2a/api")).await;
        if snapshot["store"]["healthy"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "{}", snapshot["store"]);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    running.stop().await;
}
