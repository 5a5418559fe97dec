//! Property tests over the parsers the fuzz targets (`fuzz/`) exercise, small enough for every
//! `cargo test`: no input panics, and what is accepted round-trips.

use a2a_protocol::sse::Decoder;
use a2a_protocol::time::{parse_rfc3339_ms, rfc3339_ms};
use a2a_protocol::{Message, Part, Role, Task, client, idempotency, jsonrpc};
use proptest::prelude::*;

fn json_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_owned()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        // Finite floats, as a model's scores or an agent's data parts carry them.
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::to_string(&f).unwrap()),
        "[a-zA-Z0-9_ -]{0,12}".prop_map(|s| format!("{s:?}")),
        "\\PC{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap()),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec(("(jsonrpc|id|method|params|message|parts|text|role|messageId|taskId|[a-z]{1,6})", inner), 0..6)
                .prop_map(|kv| format!("{{{}}}", kv.iter().map(|(k, v)| format!("{k:?}:{v}")).collect::<Vec<_>>().join(","))),
        ]
    })
}

fn message() -> impl Strategy<Value = Message> {
    (
        "[a-z0-9-]{1,20}",
        proptest::option::of("[a-z0-9-]{1,20}"),
        proptest::option::of("[a-z0-9-]{1,20}"),
        prop::collection::vec("\\PC{0,40}", 1..5),
    )
        .prop_map(|(id, context, task, texts)| Message {
            message_id: id,
            context_id: context,
            task_id: task,
            role: Role::User,
            parts: texts.into_iter().map(Part::text).collect(),
            metadata: None,
            extensions: vec![],
            reference_task_ids: vec![],
        })
}

/// Tasks as a store holds them: any history, metadata of any JSON, data parts of any JSON.
fn task() -> impl Strategy<Value = Task> {
    (
        "[a-z0-9-]{1,20}",
        prop::collection::vec(message(), 0..4),
        proptest::option::of(json_text()),
        proptest::option::of(json_text()),
        prop_oneof![Just("TASK_STATE_WORKING"), Just("TASK_STATE_COMPLETED"), Just("TASK_STATE_FAILED")],
    )
        .prop_map(|(id, history, metadata, data, state)| {
            let mut task = serde_json::json!({"id": id, "contextId": "c", "status": {"state": state, "timestamp": "2026-12-07T12:00:00.000Z"}, "history": history});
            if let Some(Ok(m @ serde_json::Value::Object(_))) = metadata.map(|m| serde_json::from_str(&m)) {
                task["metadata"] = m;
            }
            let mut task: Task = serde_json::from_value(task).expect("a well-formed task");
            // Built as values, as an agent's turn builds them (a null is data too).
            if let Some(Ok(d)) = data.map(|d| serde_json::from_str::<serde_json::Value>(&d)) {
                let mut file = Part::text("x");
                (file.text, file.raw, file.filename, file.media_type) = (None, Some("aGk=".into()), Some("f.txt".into()), Some("text/plain".into()));
                task.artifacts.push(a2a_protocol::Artifact {
                    artifact_id: "a".into(),
                    name: Some("n".into()),
                    description: None,
                    parts: vec![Part::data(d), Part::text("x"), file],
                    metadata: None,
                    extensions: vec!["urn:x".into()],
                });
            }
            task
        })
}

proptest! {
    #[test]
    fn a_task_serialised_once_is_the_text_its_value_writes(t in task(), id in prop_oneof![Just(serde_json::json!(1)), "[a-z\"]{0,8}".prop_map(serde_json::Value::from)]) {
        // GetTask writes the task's text straight into the envelope: the same bytes as the
        // value route it replaced.
        let text = serde_json::to_string(&t).unwrap();
        let value = serde_json::to_value(&t).unwrap();
        prop_assert_eq!(&text, &value.to_string());
        prop_assert_eq!(jsonrpc::success_text(&id, &text), jsonrpc::success(&id, value).to_string());
    }

    #[test]
    fn a_stored_body_parsed_writes_itself_again(t in task()) {
        // GetTask sends a body this build wrote as it is, instead of parsing and writing it
        // again: the bytes must be the ones the parse would write.
        let body = serde_json::to_string(&t).unwrap();
        let again: Task = serde_json::from_str(&body).unwrap();
        prop_assert_eq!(serde_json::to_string(&again).unwrap(), body);
    }

    #[test]
    fn requests_never_panic(body in json_text(), bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = jsonrpc::parse_request(body.as_bytes());
        let _ = jsonrpc::parse_request(&bytes);
    }

    #[test]
    fn messages_round_trip(m in message()) {
        let text = serde_json::to_string(&m).unwrap();
        prop_assert_eq!(serde_json::from_str::<Message>(&text).unwrap(), m.clone());
        prop_assert_eq!(idempotency::fingerprint(&m).len(), 64);
    }

    #[test]
    fn timestamps_round_trip(ms in 0u64..253_402_300_799_999) {
        prop_assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Some(ms));
    }

    #[test]
    fn any_text_is_a_timestamp_or_refused(s in "\\PC{0,40}", t in "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})") {
        for s in [s, t] {
            if let Some(ms) = parse_rfc3339_ms(&s) {
                prop_assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Some(ms));
            }
        }
    }

    #[test]
    fn sse_decoding_ignores_chunking(events in prop::collection::vec("[a-z{}\":, ]{0,30}", 0..8), step in 1usize..17) {
        let stream: String = events.iter().map(|e| format!("data: {e}\r\n\r\n: keep-alive\n\n")).collect();
        let whole = Decoder::default().push(stream.as_bytes());
        let mut d = Decoder::default();
        let chunked: Vec<String> = stream.as_bytes().chunks(step).flat_map(|c| d.push(c)).collect();
        prop_assert_eq!(&whole, &chunked);
        prop_assert_eq!(whole.len(), events.len());
    }

    #[test]
    fn urls_split_without_leaking_into_the_authority(url in "(https?://)?[a-z0-9.:@/?#=&-]{0,40}") {
        if let Ok(t) = client::split_url(&url) {
            prop_assert!(!t.authority.is_empty() && !t.authority.contains(['/', '?', '#', '@']));
            prop_assert!(t.path_and_query.starts_with('/'));
        }
    }
}
