//! Attachments over real HTTP: with the service on, `raw` parts are admitted, stored
//! content-addressed and replaced by references; with it off, the prompt shows a placeholder.

use a2a_edge::config::Config;
use a2a_edge_tests::Server;
use serde_json::json;

fn with_file(message_id: &str, media_type: &str) -> serde_json::Value {
    json!({"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [
        {"text": "look:"},
        {"raw": "aGVsbG8=", "filename": "h.txt", "mediaType": media_type}
    ]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_parts_become_durable_references_when_the_service_is_on() {
    let mut config = Config::default();
    config.attachments.enabled = true;
    let s = Server::start(config).await;
    let (_, card) = s.get("/a2a/demo/agent-card.json").await;
    assert!(
        card["defaultInputModes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m == "image/png"),
        "{card}"
    );

    let r = s
        .ok("/a2a/demo", "SendMessage", with_file("a1", "text/plain"))
        .await;
    let sha = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    let reference = format!("a2a-edge://attachments/{sha}");
    let stored = &r["task"]["history"][0]["parts"][1];
    assert_eq!(stored["url"], reference.as_str(), "{r}");
    assert!(
        stored.get("raw").is_none(),
        "the bytes left the stored message"
    );
    assert_eq!(
        r["task"]["artifacts"][0]["parts"][0]["text"],
        format!("look:\n[file h.txt text/plain {reference}]")
    );
    assert_eq!(
        std::fs::read(s.dir.path().join("attachments").join(sha)).unwrap(),
        b"hello"
    );

    let (_, refused) = s
        .rpc(
            "/a2a/demo",
            "SendMessage",
            with_file("a2", "application/x-msdownload"),
        )
        .await;
    assert_eq!(refused["error"]["code"], -32602);
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not accept"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_service_a_raw_part_is_a_readable_placeholder() {
    let s = Server::default().await;
    let (_, card) = s.get("/a2a/demo/agent-card.json").await;
    assert_eq!(card["defaultInputModes"], json!(["text/plain"]));
    let r = s
        .ok("/a2a/demo", "SendMessage", with_file("a3", "text/plain"))
        .await;
    assert_eq!(
        r["task"]["artifacts"][0]["parts"][0]["text"],
        "look:\n[attachment h.txt text/plain 5 bytes]"
    );
    assert!(!s.dir.path().join("attachments").exists());
}
