//! The runtime foundation over real HTTP: card, SendMessage through the echo session, restart,
//! the loopback guard, body limits, isolation of bad components, swaps, the compile cache.

use std::time::{Duration, Instant};

use a2a_edge_tests::{MISBEHAVE_WASM, Server, config_with, put_component};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const EMBEDDED_SERVER: &[u8] = a2a_edge::engine::registry::EMBEDDED[0].1;

fn misbehave() -> Vec<u8> {
    std::fs::read(MISBEHAVE_WASM).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_serves_demo_card_and_echo_send_message_that_survives_restart() {
    let mut s = Server::default().await;
    let (status, card) = s.get("/a2a/demo/agent-card.json").await;
    assert_eq!(status, 200);
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{}/a2a/demo", s.base())
    );
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    let r = s
        .http
        .get(format!("{}/a2a/demo/agent-card.json", s.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["cache-control"], "public, max-age=300");
    assert!(
        r.headers()["last-modified"]
            .to_str()
            .unwrap()
            .ends_with(" GMT")
    );
    let etag = r.headers()["etag"].to_str().unwrap().to_owned();
    let again = s
        .http
        .get(format!("{}/a2a/demo/agent-card.json", s.base()))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(
        again.status().as_u16(),
        304,
        "a matching If-None-Match answers 304"
    );

    let r = s.send("/a2a/demo", "m-restart", "hello edge world").await;
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "hello edge world");
    let id = task["id"].as_str().unwrap().to_owned();

    s.restart().await;
    let (_, got) = s.rpc("/a2a/demo", "GetTask", json!({"id": id})).await;
    assert_eq!(
        got["result"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{got}"
    );
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        "hello edge world"
    );
    let again = s.send("/a2a/demo", "m-restart", "hello edge world").await;
    assert_eq!(
        again["result"]["task"]["id"],
        id.as_str(),
        "a retry (same messageId and parts) after restart returns the original task"
    );
    assert_eq!(
        again["result"]["task"]["artifacts"][0]["parts"][0]["text"],
        "hello edge world"
    );
    let other = s
        .send("/a2a/demo", "m-restart", "other parts are another message")
        .await;
    assert_ne!(
        other["result"]["task"]["id"],
        id.as_str(),
        "never answered with a task it did not create"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_are_kept_as_their_cache_control_allows_until_the_instance_changes() {
    let s = Server::default().await;
    let url = format!("{}/a2a/demo/agent-card.json", s.base());
    let first = s.http.get(&url).send().await.unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    // Requests run on a new instance or on a kept one: neither may happen.
    let invocations = || async {
        let components = s.get("/a2a/api/components").await.1;
        components["instantiations"].as_u64().unwrap() + components["reuses"].as_u64().unwrap()
    };
    let before = invocations().await;
    for _ in 0..3 {
        let again = s.http.get(&url).send().await.unwrap();
        assert_eq!(again.status(), 200);
        assert_eq!(again.headers()["etag"].to_str().unwrap(), etag);
        assert_eq!(again.headers()["cache-control"], "public, max-age=300");
        assert_eq!(again.json::<Value>().await.unwrap()["name"], "demo");
    }
    let not_modified = s
        .http
        .get(&url)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(not_modified.status(), 304);
    assert_eq!(
        invocations().await,
        before,
        "kept cards are answered without a component instance"
    );
    let (status, _) = s
        .action(json!({"action": "inbound.update", "id": "demo", "name": "Renamed"}))
        .await;
    assert_eq!(status, 200);
    let (_, card) = s.get("/a2a/demo/agent-card.json").await;
    assert_eq!(
        card["name"], "Renamed",
        "a changed record is served at once"
    );
    let metrics = s.get("/a2a/api/metrics").await.1;
    let count = |outcome: &str| {
        metrics["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["method"] == "GetAgentCard" && r["outcome"] == outcome)
            .map(|r| r["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!((count("ok"), count("not_modified")), (5, 1), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_surface_answers_loopback_only_while_agents_answer_anyone() {
    let s = Server::default().await;
    let other = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    for path in ["/a2a/api", "/a2a/api/components", "/a2a/ui"] {
        let r = other
            .get(format!("{}{path}", s.base()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{path} from 127.0.0.2");
    }
    let r = other
        .post(format!("{}/a2a/api", s.base()))
        .json(&json!({"action": "component.reload", "name": "a2a-server"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = other
        .get(format!("{}/a2a/demo/agent-card.json", s.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        200,
        "remote clients reach the A2A surface"
    );

    let (status, snapshot) = s.get("/a2a/api").await;
    assert_eq!(status, 200);
    assert_eq!(snapshot["inbounds"][0]["id"], "demo");
    let (status, _) = s.get("/a2a/api/nothing").await;
    assert_eq!(status, 404);
    let (status, _) = s.get("/nowhere").await;
    assert_eq!(status, 404);
}

async fn raw(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_are_refused_with_413_declared_or_chunked() {
    let s = Server::start(config_with(&[("small", "a2a-server", Some(1024))])).await;
    let big = "x".repeat(4000);
    let r = s
        .http
        .post(format!("{}/a2a/small", s.base()))
        .header("content-type", "application/json")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 413);

    let addr = s.running.as_ref().unwrap().addr;
    let chunked = format!(
        "POST /a2a/small HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{big}\r\n",
        big.len()
    );
    let answer = raw(addr, chunked.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");

    let control = format!(
        "POST /a2a/api HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{{",
        (1 << 20) + 1
    );
    let answer = raw(addr, control.as_bytes()).await;
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "the control API caps bodies at 1 MiB: {answer}"
    );

    let ok = s.send("/a2a/small", "m-small", "fits").await;
    assert_eq!(
        ok["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapping_spinning_or_hoarding_component_fails_only_its_own_request() {
    let s = Server::start_with(
        config_with(&[("demo", "a2a-server", None), ("bad", "misbehave", None)]),
        |dir| put_component(dir, "misbehave", &misbehave()),
    )
    .await;
    let bad = |mode: &'static str| {
        let http = s.http.clone();
        let url = format!("{}/a2a/bad", s.base());
        async move {
            let started = Instant::now();
            let r = http
                .post(url)
                .header("x-misbehave", mode)
                .body("{}")
                .send()
                .await
                .unwrap();
            (
                r.status().as_u16(),
                started.elapsed(),
                r.json::<serde_json::Value>().await.unwrap_or_default(),
            )
        }
    };
    let (status, _, trap) = bad("trap").await;
    assert_eq!(status, 500);
    let cause = trap["error"]["message"].as_str().unwrap_or_default();
    assert!(
        trap["error"]["code"] == -32603
            && cause.contains("wasm trap")
            && !cause.contains("backtrace"),
        "a JSON-RPC error naming the cause: {trap}"
    );
    assert_eq!(bad("alloc").await.0, 500);

    let spinning = tokio::spawn(bad("spin"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let during = s.send("/a2a/demo", "m-during-spin", "still serving").await;
    assert_eq!(
        during["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "others are served while one spins"
    );
    assert!(
        !spinning.is_finished(),
        "the demo answer came before the spinner was stopped"
    );
    let (status, elapsed, spun) = spinning.await.unwrap();
    assert_eq!(status, 500);
    assert!(
        spun["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("CPU limit"),
        "{spun}"
    );
    assert!(
        elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4),
        "spinner stopped after {elapsed:?}"
    );

    assert_eq!(
        bad("ok").await.0,
        200,
        "the same component still serves good requests"
    );

    // A component that stored a running task and then trapped leaves it FAILED, not stuck.
    let r = s
        .http
        .post(format!("{}/a2a/bad", s.base()))
        .header("x-misbehave", "task-then-trap")
        .header("x-task-id", "t-abandoned")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 500);
    let (status, _) = s
        .action(json!({"action": "inbound.update", "id": "bad", "component": "a2a-server"}))
        .await;
    assert_eq!(status, 200);
    let t = s
        .ok("/a2a/bad", "GetTask", json!({"id": "t-abandoned"}))
        .await;
    assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{t}");
    assert!(
        t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("the agent component failed"),
        "{t}"
    );
    assert!(s.app().services().metrics.traps() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_party_component_gets_a_fresh_instance_unless_its_instance_opts_in() {
    let s = Server::start_with(config_with(&[("bad", "misbehave", None)]), |dir| {
        put_component(dir, "misbehave", &misbehave())
    })
    .await;
    let count = |mode: &'static str| {
        let http = s.http.clone();
        let url = format!("{}/a2a/bad", s.base());
        async move {
            let r = http.post(url).header("x-misbehave", mode).body("{}");
            r.send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap_or_default()["served"]
                .clone()
        }
    };
    // A kept instance is put back after its answer went out: give it a moment.
    let settle = || tokio::time::sleep(Duration::from_millis(100));
    for _ in 0..3 {
        assert_eq!(count("count").await, 1, "a fresh instance each time");
        settle().await;
    }
    let (status, _) = s
        .action(json!({"action": "inbound.update", "id": "bad", "reuseInstances": true}))
        .await;
    assert_eq!(status, 200);
    let mut served = Vec::new();
    for _ in 0..3 {
        served.push(count("count").await);
        settle().await;
    }
    assert_eq!(served, [1, 2, 3], "one kept instance serves them in turn");
    count("trap").await;
    settle().await;
    assert_eq!(
        count("count").await,
        1,
        "an instance that trapped is not kept"
    );
    let (_, components) = s.get("/a2a/api/components").await;
    assert_eq!(
        components["reuses"], 3,
        "the second and third count and the trap: {components}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapping_a_component_takes_over_new_requests_and_a_bad_one_is_refused() {
    let s = Server::start_with(config_with(&[("swap", "custom", None)]), |dir| {
        put_component(dir, "custom", EMBEDDED_SERVER)
    })
    .await;
    let card = |s: &Server| {
        let http = s.http.clone();
        let url = format!("{}/a2a/swap/agent-card.json", s.base());
        async move {
            http.get(url)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    assert_eq!(card(&s).await["name"], "swap");

    s.put_component("custom", &misbehave());
    let (status, body) = s
        .action(json!({"action": "component.reload", "name": "custom"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        card(&s).await,
        json!({"component": "misbehave"}),
        "new requests run the new component"
    );

    s.put_component("custom", b"\0asm not really");
    let (status, body) = s
        .action(json!({"action": "component.reload", "name": "custom"}))
        .await;
    assert_eq!(status, 409);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("not a valid WebAssembly component"),
        "{body}"
    );
    assert_eq!(
        card(&s).await,
        json!({"component": "misbehave"}),
        "the old component keeps serving"
    );

    let (status, body) = s
        .action(json!({"action": "inbound.update", "id": "swap", "component": "a2a-server"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(card(&s).await["name"], "swap");
    let (_, comps) = s.get("/a2a/api/components").await;
    let server = comps["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "a2a-server")
        .unwrap()
        .clone();
    assert_eq!(server["instances"], json!(["swap"]));

    let (status, body) = s
        .action(json!({"action": "component.reload", "name": "ghost"}))
        .await;
    assert_eq!(status, 409);
    assert!(body["message"].as_str().unwrap().contains("ghost"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_start_compiles_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let mut config = a2a_edge::config::Config::default();
    config.runtime.cache_dir = Some(cache.path().to_owned());
    let mut s = Server::start(config).await;
    let (_, first) = s.get("/a2a/api/components").await;
    assert_eq!(
        first["compilations"], 2,
        "the server and the outbound client component"
    );
    assert_eq!(first["components"][0]["fromCache"], false);
    s.restart().await;
    let (_, second) = s.get("/a2a/api/components").await;
    assert_eq!(second["compilations"], 0, "{second}");
    assert_eq!(second["components"][0]["fromCache"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_and_unknown_rpc_methods_answer_clearly() {
    let s = Server::default().await;
    let r = s
        .http
        .get(format!("{}/a2a/demo", s.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let r = s
        .http
        .delete(format!("{}/a2a/api", s.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 405);
    let (status, body) = s.rpc("/a2a/demo/", "NoSuchMethod", json!({})).await;
    assert_eq!(status, 200, "trailing slash is the same endpoint");
    assert_eq!(body["error"]["code"], -32601);
    let r = s
        .http
        .post(format!("{}/a2a/api", s.base()))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

/// The head of a raw HTTP/1.1 answer to `body` posted to `path`, lower-cased, and whether its
/// body came whole (as many bytes as its `content-length` says).
async fn posted(addr: std::net::SocketAddr, path: &str, accept: &str, body: &str) -> String {
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: {accept}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&answer).to_lowercase()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complete_answers_carry_their_length_and_only_streams_are_chunked() {
    let s = Server::default().await;
    let addr = s.running.as_ref().unwrap().addr;
    let send = |method: &str, id: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "hi"}]}}}).to_string()
    };
    let answer = posted(
        addr,
        "/a2a/demo",
        "application/json",
        &send("SendMessage", "m-len"),
    )
    .await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("http/1.1 200"), "{answer}");
    assert!(
        !head.contains("transfer-encoding"),
        "a complete answer is not chunked: {head}"
    );
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .unwrap_or_else(|| panic!("no content-length: {head}"))
        .parse()
        .unwrap();
    assert_eq!(length, body.len(), "{answer}");
    let task: Value = serde_json::from_str(body).unwrap();
    let id = task["result"]["task"]["id"].as_str().unwrap();
    let get =
        json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": id}}).to_string();
    let answer = posted(addr, "/a2a/demo", "application/json", &get).await;
    assert!(
        answer.contains("content-length: ") && !answer.contains("transfer-encoding"),
        "{answer}"
    );
    // A notification is answered 204, which carries no length.
    let note = json!({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": id}}).to_string();
    let answer = posted(addr, "/a2a/demo", "application/json", &note).await;
    assert!(
        answer.starts_with("http/1.1 204") && !answer.contains("content-length: "),
        "{answer}"
    );
    // A stream's length is not known when its head goes out.
    let answer = posted(
        addr,
        "/a2a/demo",
        "text/event-stream",
        &send("SendStreamingMessage", "m-len-2"),
    )
    .await;
    assert!(
        answer.contains("transfer-encoding: chunked") && answer.contains("data:"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_say_live_and_ready_with_what_was_checked() {
    let s = Server::default().await;
    let (status, health) = s.get("/healthz").await;
    assert_eq!((status, health), (200, json!({"status": "ok"})));
    let (status, ready) = s.get("/readyz").await;
    assert_eq!(status, 200, "{ready}");
    assert_eq!(ready["status"], "ready");
    let checks = &ready["checks"];
    assert_eq!(checks["store"]["ok"], true, "{ready}");
    assert!(checks["store"]["ms"].as_u64().unwrap() < 1000);
    assert_eq!(checks["instances"]["notServed"], 0);
    assert_eq!(checks["cluster"], json!({"ok": true, "shared": false}));
    assert_eq!(
        checks["connections"],
        json!({"ok": true, "connected": 0, "failed": 0})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_ready_once_each_declared_connection_was_tried() {
    // A remote that takes connections and answers none until it hangs up, 2 s later: until
    // then a turn would find its tools missing, so the node is not ready yet.
    let remote = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = remote.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((c, _)) = remote.accept().await {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                drop(c);
            });
        }
    });
    let mut config = a2a_edge::config::Config::default();
    let decl = json!({"id": "slow", "name": "slow", "allowPrivate": true,
        "agentCardUrl": format!("http://127.0.0.1:{port}/agent-card.json")});
    config
        .connections
        .push(serde_json::from_value(decl).unwrap());
    let s = Server::start(config).await;
    let (status, waiting) = s.get("/readyz").await;
    assert_eq!(status, 503, "{waiting}");
    assert_eq!(waiting["checks"]["connections"]["ok"], false, "{waiting}");
    let mut ready = Value::Null;
    for _ in 0..300 {
        let (status, body) = s.get("/readyz").await;
        if status == 200 {
            ready = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A remote that is down fails its connection and leaves the node ready.
    assert_eq!(
        ready["checks"]["connections"],
        json!({"ok": true, "connected": 0, "failed": 1}),
        "{ready}"
    );
}
