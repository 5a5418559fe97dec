//! Resource bounds: no single client holds the server's memory, CPU, connections or component
//! instances (slow bodies, huge messages, many streams, huge pages, idle connections).

use std::time::{Duration, Instant};

use a2a_edge_tests::jsonrpc::stream_request;
use a2a_edge_tests::{Server, message, scripted};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TCK: &str = "/a2a/tck";

/// Reads from a raw connection until it closes (or `limit` passes); what arrived.
async fn read_until_closed(tcp: &mut tokio::net::TcpStream, limit: Duration) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline.into(), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
}

/// Writes `piece` every 50 ms, `times` times, until the server closes or `limit` passes.
async fn drip(tcp: &mut tokio::net::TcpStream, piece: &[u8], times: usize, limit: Duration) {
    let writes = async {
        for _ in 0..times {
            if tcp.write_all(piece).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let _ = tokio::time::timeout(limit, writes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_slower_than_the_minimum_rate_is_refused() {
    let mut config = scripted(|_| {});
    config.runtime.body_timeout_ms = 300;
    config.runtime.min_body_bytes_per_sec = 100;
    let s = Server::start(config).await;
    let mut tcp = tokio::net::TcpStream::connect(s.running.as_ref().unwrap().addr)
        .await
        .unwrap();
    tcp.write_all(b"POST /a2a/tck HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n").await.unwrap();
    let started = Instant::now();
    // 20 bytes/s: far below the 100 bytes/s the config asks for.
    drip(&mut tcp, b" ", 100, Duration::from_secs(3)).await;
    let answer = read_until_closed(&mut tcp, Duration::from_secs(3))
        .await
        .expect("answered and closed");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("arrived too slowly"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_sizes_are_bounded_and_long_answers_arrive_whole() {
    let s = Server::start(scripted(|d| d.limits.as_mut().unwrap().max_parts = 50)).await;
    let parts = |n: usize| {
        (0..n)
            .map(|i| json!({"text": format!("part {i}")}))
            .collect::<Vec<_>>()
    };
    let many = json!({"messageId": "m-many", "role": "ROLE_USER", "parts": parts(51)});
    let (_, v) = s.rpc(TCK, "SendMessage", json!({"message": many})).await;
    assert_eq!(v["error"]["code"], -32602);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 50"),
        "{v}"
    );
    let ok = json!({"messageId": "m-fifty", "role": "ROLE_USER", "parts": parts(50)});
    assert_eq!(
        s.ok(TCK, "SendMessage", json!({"message": ok})).await["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    for (field, long) in [
        ("messageId", json!("m".repeat(257))),
        ("contextId", json!("c".repeat(257))),
        ("taskId", json!("t".repeat(257))),
    ] {
        let mut m = message("m-long", "x");
        m[field] = long;
        let (_, v) = s.rpc(TCK, "SendMessage", json!({"message": m})).await;
        assert_eq!(v["error"]["code"], -32602, "{field}: {v}");
    }
    assert_eq!(
        s.code(TCK, "GetTask", json!({"id": "x".repeat(300)})).await,
        -32602
    );
    // 100,000 words in one part: the echo comes back whole (in few large chunks), on a linear path.
    let words = "word ".repeat(100_000);
    let t = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("m-words", &words)}),
        )
        .await;
    assert_eq!(
        t["task"]["artifacts"][0]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .len(),
        words.len()
    );
    let frames = s
        .stream(
            TCK,
            "SendStreamingMessage",
            json!({"message": message("m-words-2", &words)}),
            None,
        )
        .await
        .all()
        .await;
    assert!(
        frames.len() < 200,
        "deltas ready together travel together: {} frames",
        frames.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_subscribers_hold_no_component_instance_and_streams_are_capped() {
    let mut config = scripted(|d| d.limits.as_mut().unwrap().max_streams = 30);
    config.runtime.max_instances = 8;
    config.runtime.max_streams = 40;
    config
        .instances
        .push(a2a_edge_tests::instance("other", "echo"));
    let s = Server::start(config).await;
    let task = s
        .ok(
            TCK,
            "SendMessage",
            json!({"message": message("tck-input-required-s", "x")}),
        )
        .await["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Far more subscribers than the pool has instances.
    let mut subs = Vec::new();
    for _ in 0..30 {
        let mut events = s
            .stream(TCK, "SubscribeToTask", json!({"id": task}), None)
            .await;
        assert_eq!(
            a2a_edge_tests::events::kind(&events.next().await.unwrap()),
            "task"
        );
        subs.push(events);
    }
    let url = format!("{}{TCK}", s.base());
    let over = stream_request(&s.http, &url, "SubscribeToTask", json!({"id": task}), None)
        .send()
        .await
        .unwrap();
    assert_eq!(
        over.status().as_u16(),
        429,
        "the 31st stream of the instance is refused at once"
    );
    assert_eq!(over.headers()["retry-after"], "1");
    assert!(
        over.json::<Value>().await.unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("30 open streams")
    );
    for i in 0..10 {
        let mut events = s
            .stream(
                "/a2a/other",
                "SendStreamingMessage",
                json!({"message": message(&format!("m-o{i}"), "hi")}),
                None,
            )
            .await;
        assert!(
            events.next().await.is_some(),
            "other streams still open on another instance"
        );
        drop(events);
    }
    for i in 0..20 {
        let card = s
            .http
            .get(format!("{}/a2a/other/agent-card.json", s.base()))
            .send()
            .await
            .unwrap();
        assert_eq!(
            card.status().as_u16(),
            200,
            "card {i} while 30 subscribers wait"
        );
        let t = s
            .ok(
                "/a2a/other",
                "SendMessage",
                json!({"message": message(&format!("m-x{i}"), "hi")}),
            )
            .await;
        assert_eq!(t["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    }
    // The subscribers still get the rest of the stream from the host, and the settled task.
    s.ok(TCK, "SendMessage", json!({"message": {"messageId": "m-cont", "taskId": task, "role": "ROLE_USER", "parts": [{"text": "more"}]}})).await;
    for events in subs.iter_mut().take(5) {
        let rest = tokio::time::timeout(Duration::from_secs(5), events.drain())
            .await
            .expect("the stream ends");
        assert!(
            rest.iter()
                .any(|e| a2a_edge_tests::events::kind(e) == "statusUpdate"),
            "{rest:?}"
        );
        assert_eq!(
            a2a_edge_tests::events::kind(rest.last().unwrap()),
            "task",
            "the settled snapshot ends it"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_bounded_by_bytes_and_never_trap() {
    let s = Server::start(scripted(|_| {})).await;
    let big = "x".repeat(900_000);
    for i in 0..12 {
        s.ok(
            TCK,
            "SendMessage",
            json!({"message": message(&format!("m-big-{i}"), &big)}),
        )
        .await;
    }
    let mut seen = std::collections::HashSet::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let page = s
            .ok(
                TCK,
                "ListTasks",
                json!({"pageSize": 50, "pageToken": token, "includeArtifacts": true}),
            )
            .await;
        pages += 1;
        for t in page["tasks"].as_array().unwrap() {
            assert!(
                seen.insert(t["id"].as_str().unwrap().to_owned()),
                "a task came twice"
            );
        }
        token = page["nextPageToken"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(seen.len(), 12);
    assert!(pages >= 3, "1.8 MB tasks take several 8 MiB pages: {pages}");
    let slim = s
        .ok(
            TCK,
            "ListTasks",
            json!({"pageSize": 50, "historyLength": 0}),
        )
        .await;
    assert_eq!(
        slim["tasks"].as_array().unwrap().len(),
        12,
        "shaped in the host, the page holds them all"
    );
    assert!(
        slim["tasks"][0]
            .get("artifacts")
            .is_none_or(|a| a.as_array().unwrap().is_empty())
    );
    let (status, _) = s.get("/a2a/api?taskLimit=500").await;
    assert_eq!(status, 400, "taskLimit is capped at 200");
    let (_, snap) = s.get("/a2a/api?taskLimit=200").await;
    assert!(
        snap["tasks"].as_array().unwrap().len() < 12 && snap["taskNextOffset"].is_u64(),
        "the snapshot stops before 16 MiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_are_closed_and_connections_are_capped() {
    let mut config = scripted(|_| {});
    config.runtime.idle_timeout_ms = 400;
    config.runtime.max_connections = 3;
    // The cap of all connections, not of one address's (below).
    config.runtime.max_connections_per_peer = Some(3);
    let s = Server::start(config).await;
    let addr = s.running.as_ref().unwrap().addr;
    let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /a2a/tck/agent-card.json HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    drip(&mut slow, b"x-slow: 1\r\n", 40, Duration::from_secs(2)).await;
    assert!(
        read_until_closed(&mut slow, Duration::from_secs(2))
            .await
            .is_some(),
        "a slow header is cut"
    );
    assert!(
        read_until_closed(&mut idle, Duration::from_secs(2))
            .await
            .is_some(),
        "an idle keep-alive connection is closed"
    );

    // At the cap, a new client waits until a connection frees up, then is served.
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let client = reqwest::Client::new();
    let waiting = tokio::spawn(async move {
        client
            .get(format!("http://{addr}/a2a/tck/agent-card.json"))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(!waiting.is_finished(), "the fourth connection waits");
    drop(held);
    assert_eq!(waiting.await.unwrap().unwrap(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_never_holds_every_connection_slot() {
    let mut config = scripted(|_| {});
    config.runtime.max_connections = 8;
    let s = Server::start(config).await;
    let addr = s.running.as_ref().unwrap().addr;
    let from = |ip: &str| {
        let ip: std::net::IpAddr = ip.parse().unwrap();
        async move {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind((ip, 0).into()).unwrap();
            socket.connect(addr).await.unwrap()
        }
    };
    // A quarter of maxConnections by default: two from one address (one the harness never uses).
    let mut held = Vec::new();
    for _ in 0..2 {
        held.push(from("127.0.0.3").await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut third = from("127.0.0.3").await;
    assert!(
        read_until_closed(&mut third, Duration::from_secs(2))
            .await
            .is_some(),
        "the address's third connection is closed at once"
    );
    // Another client is served at once.
    let mut other = from("127.0.0.2").await;
    other
        .write_all(b"GET /a2a/tck/agent-card.json HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(2), async {
        let mut buf = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut other, &mut buf)
            .await
            .unwrap();
        String::from_utf8_lossy(&buf).into_owned()
    })
    .await
    .expect("another address is served at once");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_idle_or_half_open_connections() {
    let mut s = Server::start(scripted(|_| {})).await;
    let addr = s.running.as_ref().unwrap().addr;
    let _idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut half = tokio::net::TcpStream::connect(addr).await.unwrap();
    half.write_all(b"POST /a2a/tck HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    s.running.take().unwrap().stop().await;
    let grace = Duration::from_millis(s.config.runtime.shutdown_grace_ms);
    assert!(
        started.elapsed() < grace / 2,
        "stopped in {:?}, not after the {grace:?} grace",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_finds_every_instance_busy_waits_for_one() {
    let mut config = scripted(|_| {});
    config.runtime.max_instances = 2;
    config.runtime.instance_wait_ms = 5000;
    let s = std::sync::Arc::new(Server::start(config).await);
    let busy: Vec<_> = (0..2)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                s.ok(
                    TCK,
                    "SendMessage",
                    json!({"message": message(&format!("tck-delayed-complete-{i}"), "x")}),
                )
                .await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let card = s
        .http
        .get(format!("{}{TCK}/agent-card.json", s.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        card.status().as_u16(),
        200,
        "served once an instance came free"
    );
    for b in busy {
        assert_eq!(
            b.await.unwrap()["task"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    }
}
