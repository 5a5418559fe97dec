//! The gRPC binding over real HTTP/2 with tonic and the official proto's stubs: the same tasks
//! as JSON-RPC, streams, tenant routing, statuses with `ErrorInfo`, credentials before any
//! component, the body limit, compression and `grpc-timeout`.

use std::time::{Duration, Instant};

use a2a_edge_tests::{Server, instance, scripted};
use a2a_pb::proto::a2a_service_client::A2aServiceClient;
use a2a_pb::proto::{self as pb, part, stream_response};
use serde_json::json;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_types::StatusExt;

/// A client of the server's gRPC service over plaintext HTTP/2, at the URL the card announces.
async fn client(s: &Server) -> A2aServiceClient<Channel> {
    let card = s.get("/a2a/tck/agent-card.json").await.1;
    let grpc = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["protocolBinding"] == "GRPC")
        .unwrap_or_else(|| panic!("no GRPC interface: {card}"))
        .clone();
    assert_eq!(grpc["tenant"], "tck", "{grpc}");
    let url = grpc["url"].as_str().unwrap();
    assert_eq!(url, s.base(), "an absolute URL with the port named");
    A2aServiceClient::connect(url.to_owned()).await.unwrap()
}

fn send(tenant: &str, id: &str, text: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        tenant: tenant.into(),
        message: Some(pb::Message {
            message_id: id.into(),
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                content: Some(part::Content::Text(text.into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn task_of(r: pb::SendMessageResponse) -> pb::Task {
    match r.payload {
        Some(pb::send_message_response::Payload::Task(t)) => t,
        other => panic!("not a task: {other:?}"),
    }
}

/// The status's `ErrorInfo` as (reason, domain).
fn info(s: &Status) -> (String, String) {
    let details = s.get_error_details();
    let i = details
        .error_info()
        .unwrap_or_else(|| panic!("no ErrorInfo in {s:?}"));
    (i.reason.clone(), i.domain.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_reaches_the_same_tasks_as_json_rpc() {
    let s = Server::start(scripted(|_| {})).await;
    let mut c = client(&s).await;

    let task = task_of(
        c.send_message(send("tck", "tck-complete-task-g1", "hi"))
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(
        task.status.as_ref().unwrap().state,
        pb::TaskState::Completed as i32
    );
    let text = match &task.artifacts[0].parts[0].content {
        Some(part::Content::Text(t)) => t.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(text, "Hello from TCK");
    // JSON-RPC reads the task gRPC made.
    let got = s.ok("/a2a/tck", "GetTask", json!({"id": task.id})).await;
    assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED", "{got}");

    // And gRPC reads the task JSON-RPC made.
    let sent = s.send("/a2a/tck", "tck-complete-task-j1", "hi").await;
    let id = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let got = c
        .get_task(pb::GetTaskRequest {
            tenant: "tck".into(),
            id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.id, id);
    let page = c
        .list_tasks(pb::ListTasksRequest {
            tenant: "tck".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let mut ids: Vec<_> = page.tasks.iter().map(|t| t.id.clone()).collect();
    ids.sort();
    let mut want = vec![task.id.clone(), id];
    want.sort();
    assert_eq!(ids, want);

    // A stream carries the task, then its updates, to completion: the frames SSE carries.
    let mut stream = c
        .send_streaming_message(send("tck", "tck-stream-chunks-g2", "hi"))
        .await
        .unwrap()
        .into_inner();
    let mut kinds = Vec::new();
    let mut last_state = 0;
    while let Some(ev) = stream.message().await.unwrap() {
        match ev.payload.unwrap() {
            stream_response::Payload::Task(_) => kinds.push("task"),
            stream_response::Payload::ArtifactUpdate(_) => kinds.push("artifact"),
            stream_response::Payload::StatusUpdate(u) => {
                last_state = u.status.unwrap().state;
                kinds.push("status")
            }
            stream_response::Payload::Message(_) => kinds.push("message"),
        }
    }
    assert_eq!(kinds[0], "task", "{kinds:?}");
    assert!(kinds.contains(&"artifact"), "{kinds:?}");
    assert_eq!(last_state, pb::TaskState::Completed as i32);

    // Cancel a running task; subscribe to a task that stays open until the deadline.
    let running = task_of(
        c.send_message(pb::SendMessageRequest {
            configuration: Some(pb::SendMessageConfiguration {
                return_immediately: true,
                ..Default::default()
            }),
            ..send("tck", "tck-long-running-g3", "hi")
        })
        .await
        .unwrap()
        .into_inner(),
    );
    let canceled = c
        .cancel_task(pb::CancelTaskRequest {
            tenant: "tck".into(),
            id: running.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        canceled.status.unwrap().state,
        pb::TaskState::Canceled as i32
    );

    let waiting = task_of(
        c.send_message(send("tck", "tck-input-required-g4", "hi"))
            .await
            .unwrap()
            .into_inner(),
    );
    let mut req = tonic::Request::new(pb::SubscribeToTaskRequest {
        tenant: "tck".into(),
        id: waiting.id.clone(),
    });
    // The server's own deadline (the header, without a client-side timer).
    req.metadata_mut()
        .insert("grpc-timeout", "400m".parse().unwrap());
    let started = Instant::now();
    let mut stream = c.subscribe_to_task(req).await.unwrap().into_inner();
    let first = stream.message().await.unwrap().unwrap();
    assert!(matches!(
        first.payload,
        Some(stream_response::Payload::Task(_))
    ));
    let end = loop {
        match stream.message().await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended OK before its deadline"),
            Err(e) => break e,
        }
    };
    assert_eq!(end.code(), Code::DeadlineExceeded, "{end:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_statuses_with_error_info() {
    let mut config = scripted(|d| d.limits.as_mut().unwrap().max_body_bytes = 1024);
    let mut roomy = instance("roomy", "scripted");
    roomy.limits.as_mut().unwrap().max_body_bytes = 4096;
    config.instances.push(roomy);
    let s = Server::start(config).await;
    let mut c = client(&s).await;

    let e = c
        .get_task(pb::GetTaskRequest {
            tenant: "tck".into(),
            id: "no-such-task".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    assert_eq!(
        info(&e),
        ("TASK_NOT_FOUND".into(), "a2a-protocol.org".into())
    );

    // A done task cannot be canceled: the v1.0.1 table says FAILED_PRECONDITION.
    let done = task_of(
        c.send_message(send("tck", "tck-complete-task-c", "hi"))
            .await
            .unwrap()
            .into_inner(),
    );
    let e = c
        .cancel_task(pb::CancelTaskRequest {
            tenant: "tck".into(),
            id: done.id,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert_eq!(info(&e).0, "TASK_NOT_CANCELABLE");

    // A tenant nobody has, and none at all without a well-known instance.
    for tenant in ["nobody", ""] {
        let e = c
            .send_message(send(tenant, "tck-complete-task-x", "hi"))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{tenant:?}: {e:?}");
        assert!(e.message().contains("tenant"), "{}", e.message());
    }

    // The message is bounded by its instance's body limit, and by the largest before the
    // tenant is known.
    for (size, says) in [(3000, "1024"), (8192, "4096")] {
        let e = c
            .send_message(send("tck", "tck-complete-task-big", &"x".repeat(size)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
        assert!(e.message().contains(says), "{}", e.message());
    }

    // Compressed messages are refused, saying so.
    let mut gz = client(&s)
        .await
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    let e = gz
        .send_message(send("tck", "tck-complete-task-gz", "hi"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unimplemented, "{e:?}");
    assert!(e.message().contains("uncompressed"), "{}", e.message());

    // An RPC of another service is not ours; plain HTTP/1.1 still works on the listener.
    let sent = s.send("/a2a/tck", "tck-complete-task-h1", "hi").await;
    assert_eq!(
        sent["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_checked_before_any_component_and_tenants_route() {
    // SAFETY: set before the server reads it; no other test reads this variable.
    unsafe { std::env::set_var("A2A_TEST_TOKEN_GRPC", "s3cret-grpc") };
    let mut config = scripted(|_| {});
    let mut keyed = instance("keyed", "scripted");
    keyed.auth_token_env = Some("A2A_TEST_TOKEN_GRPC".into());
    config.instances.push(keyed);
    config.well_known_instance = Some("tck".into());
    let s = Server::start(config).await;
    let mut c = client(&s).await;

    let e = c
        .send_message(send("keyed", "tck-complete-task-k1", "hi"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    assert_eq!(info(&e).0, "UNAUTHORIZED");
    assert!(
        e.message().contains("Authorization: Bearer"),
        "{}",
        e.message()
    );

    let mut req = tonic::Request::new(send("keyed", "tck-complete-task-k2", "hi"));
    req.metadata_mut()
        .insert("authorization", "Bearer s3cret-grpc".parse().unwrap());
    let task = task_of(c.send_message(req).await.unwrap().into_inner());
    // The task is keyed's: tck does not have it, keyed does.
    let get = |tenant: &str| pb::GetTaskRequest {
        tenant: tenant.into(),
        id: task.id.clone(),
        ..Default::default()
    };
    let e = c.get_task(get("tck")).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let mut req = tonic::Request::new(get("keyed"));
    req.metadata_mut()
        .insert("authorization", "Bearer s3cret-grpc".parse().unwrap());
    assert_eq!(c.get_task(req).await.unwrap().into_inner().id, task.id);

    // No tenant: the well-known instance answers.
    let task = task_of(
        c.send_message(send("", "tck-complete-task-w1", "hi"))
            .await
            .unwrap()
            .into_inner(),
    );
    let got = s.ok("/a2a/tck", "GetTask", json!({"id": task.id})).await;
    assert_eq!(got["id"], task.id.as_str());

    // The version metadata goes through the same check as the header; gRPC is 1.0 only, so
    // 0.3 (which JSON-RPC takes on a compat03 instance) is refused too.
    for v in ["9.0", "0.3", "0.3.0"] {
        let mut req = tonic::Request::new(send("tck", &format!("tck-complete-task-v{v}"), "hi"));
        req.metadata_mut().insert("a2a-version", v.parse().unwrap());
        let e = c.send_message(req).await.unwrap_err();
        assert_eq!(info(&e).0, "VERSION_NOT_SUPPORTED", "{v}: {e:?}");
        assert_eq!(e.code(), Code::FailedPrecondition, "{v}");
    }
    let mut req = tonic::Request::new(send("tck", "tck-complete-task-v1", "hi"));
    req.metadata_mut()
        .insert("a2a-version", "1.0.1".parse().unwrap());
    c.send_message(req).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_nests_to_the_same_bound_on_every_binding() {
    use prost::Message as _;
    let s = Server::start(scripted(|_| {})).await;
    let mut c = client(&s).await;
    // `levels` objects of metadata: the params nest two more (params, message).
    let params = |levels: usize, id: &str| {
        let metadata = (1..levels).fold(json!({"leaf": 1}), |v, _| json!({ "k": v }));
        json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "hi"}], "metadata": metadata}})
    };
    let deepest = a2a_protocol::bounds::MAX_DEPTH - 2;
    for (levels, taken) in [(deepest, true), (deepest + 1, false), (deepest + 2, false)] {
        let (_, answer) = s
            .rpc(
                "/a2a/tck",
                "SendMessage",
                params(levels, &format!("tck-complete-task-d{levels}")),
            )
            .await;
        assert_eq!(
            answer.get("result").is_some(),
            taken,
            "JSON-RPC, {levels} levels: {answer}"
        );
        if !taken {
            assert_eq!(answer["error"]["code"], -32602, "{answer}");
        }
        let mut request = params(levels, &format!("tck-complete-task-g{levels}"));
        request["tenant"] = json!("tck");
        let protojson: a2a_pb::protojson::SendMessageRequest =
            serde_json::from_value(request).unwrap();
        let request = pb::SendMessageRequest::decode(protojson.encode_to_vec().as_slice()).unwrap();
        match c.send_message(request).await {
            Ok(_) => assert!(taken, "gRPC took {levels} levels"),
            Err(e) => {
                assert!(!taken, "gRPC, {levels} levels: {e:?}");
                assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_sets_the_cards_grpc_url_or_leaves_grpc_out() {
    let grpc_interfaces = |card: &serde_json::Value| -> Vec<serde_json::Value> {
        card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["protocolBinding"] == "GRPC")
            .cloned()
            .collect()
    };
    let mut config = scripted(|_| {});
    config.grpc.url = Some("grpcs://grpc.example.com:8443".into());
    let s = Server::start(config).await;
    let card = s.get("/a2a/tck/agent-card.json").await.1;
    let grpc = grpc_interfaces(&card);
    assert_eq!(grpc.len(), 1, "{card}");
    assert_eq!(
        grpc[0]["url"], "grpcs://grpc.example.com:8443",
        "as written"
    );

    let mut config = scripted(|_| {});
    config.grpc.announce = false;
    let s = Server::start(config).await;
    let card = s.get("/a2a/tck/agent-card.json").await.1;
    assert!(grpc_interfaces(&card).is_empty(), "{card}");
    // The binding is still served to whoever knows it.
    let mut c = A2aServiceClient::connect(s.base()).await.unwrap();
    task_of(
        c.send_message(send("tck", "tck-complete-task-x", "hi"))
            .await
            .unwrap()
            .into_inner(),
    );
}
