//! The web panel in a real headless Chromium against the real server: each flow is what an
//! operator does, checked on the page and in the runtime, with no console error, every field
//! labelled, and screenshots under `target/ui-screenshots/`.

mod browser;

use a2a_edge::config::Config;
use a2a_edge_tests::{Server, instance, put_component};
use browser::Browser;
use serde_json::{Value, json};

/// The embedded server component, as a file component (so it can be reloaded).
const EMBEDDED_SERVER: &[u8] = a2a_edge::engine::registry::EMBEDDED[0].1;

fn ui(s: &Server, hash: &str) -> String {
    format!("{}/a2a/ui#/{hash}", s.base())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overview_shows_the_instances_live_on_a_wide_and_a_narrow_window() {
    if !browser::available() {
        return;
    }
    let s = Server::default().await;
    s.send("/a2a/demo", "m1", "hello").await;
    let (b, _turn) = Browser::open("overview", 1280, 800).await;
    b.goto(&ui(&s, "")).await;
    b.find_text("td", "demo").await;
    b.find_text("#live", "live").await;
    b.find_text("code", &format!("{}/a2a/demo", s.base())).await;
    b.find_text(".spark figcaption", "requests/s").await;
    // The charts move with the metrics the feed brings every two seconds.
    b.until(
        "a request rate drawn",
        "return document.querySelector('.spark polyline')?.getAttribute('points')?.length > 0",
    )
    .await;
    assert_eq!(
        b.eval("return document.querySelector('nav a[aria-current]').textContent")
            .await,
        "Overview"
    );
    b.shot("wide").await;
    b.client.set_window_size(420, 800).await.unwrap();
    b.find_text("td", "demo").await;
    let overflow = b
        .eval("return document.documentElement.scrollWidth - window.innerWidth")
        .await;
    assert!(
        overflow.as_i64().unwrap() <= 0,
        "the narrow page scrolls sideways by {overflow} px"
    );
    b.shot("narrow").await;
    // Keyboard: on a fresh load Tab reaches the skip link first; following it lands on the view.
    b.goto(&ui(&s, "")).await;
    b.find_text("td", "demo").await;
    b.client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E004}")
        .await
        .unwrap();
    assert_eq!(
        b.eval("return document.activeElement.textContent").await,
        "Skip to content"
    );
    b.client
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
    assert_eq!(b.eval("return document.activeElement.id").await, "view");
    b.finish(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_created_in_the_panel_is_listed_and_served() {
    if !browser::available() {
        return;
    }
    let s = Server::default().await;
    let (b, _turn) = Browser::open("create-instance", 1280, 800).await;
    b.goto(&ui(&s, "")).await;
    b.click("New instance").await;
    b.fill("Name", "Reports Desk").await;
    b.fill("Description", "Answers with reports").await;
    b.fill("Version", "2.0.0").await;
    b.click("Create instance").await;
    b.until(
        "the new instance's page",
        "return location.hash.startsWith('#/instance/reports-desk-')",
    )
    .await;
    b.find_text("h3", "Reports Desk 2.0.0").await;
    b.find_text(".checks li.ok", "reachable").await;
    b.shot("card").await;
    let (_, snap) = s.get("/a2a/api").await;
    let created = snap["inbounds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "Reports Desk")
        .expect("the runtime has the instance")
        .clone();
    assert_eq!(created["version"], "2.0.0");
    let id = created["id"].as_str().unwrap();
    let (status, card) = s.get(&format!("/a2a/{id}/agent-card.json")).await;
    assert_eq!((status, card["name"].clone()), (200, json!("Reports Desk")));
    b.click("Overview").await;
    b.find_text("td a", "Reports Desk").await;
    // A refused action says why, next to the form.
    b.click("New instance").await;
    b.fill("Name", "Clash").await;
    b.fill("Description", "x").await;
    b.fill("Endpoint path", &format!("/a2a/{id}")).await;
    b.click("Create instance").await;
    b.find_text("form .error", "HTTP 409").await;
    b.finish(&["409"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_streams_frames_as_they_arrive_and_resubscribes_from_the_last_one() {
    if !browser::available() {
        return;
    }
    let s = Server::start(Config {
        instances: vec![instance("tck", "scripted")],
        ..Config::default()
    })
    .await;
    let (b, _turn) = Browser::open("console", 1280, 800).await;
    b.goto(&ui(&s, "console/tck")).await;
    b.fill("Text", "tck-stream-artifact-chunked please").await;
    b.click("Send").await;
    b.find(".frame[data-final]").await;
    let kinds = b.eval("return [...document.querySelectorAll('.frame')].map(f => f.dataset.kind + (f.dataset.final ? '!' : ''))").await;
    let kinds: Vec<&str> = kinds
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    let first_artifact = kinds
        .iter()
        .position(|k| *k == "artifactUpdate")
        .expect("artifact frames");
    let last = kinds.iter().position(|k| k.ends_with('!')).unwrap();
    assert!(
        first_artifact < last,
        "artifacts came before the final task: {kinds:?}"
    );
    assert_eq!(kinds[0], "task", "the task comes first: {kinds:?}");
    assert!(
        kinds.iter().filter(|k| **k == "artifactUpdate").count() >= 3,
        "{kinds:?}"
    );
    // Rendered and raw side by side: the raw side is the JSON-RPC the runtime answered.
    let raw = b
        .find(".frame.kind-artifactUpdate pre.raw")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        raw.contains("\"jsonrpc\": \"2.0\"") && raw.contains("artifactUpdate"),
        "{raw}"
    );
    b.shot("streamed").await;

    // A long task: stop watching after its first frames, resubscribe, and only newer frames come.
    b.click("Clear frames").await;
    b.fill("Text", "tck-long-running").await;
    b.click("Send").await;
    b.find(".frame.kind-artifactUpdate").await;
    b.click("Stop watching").await;
    b.find_text(".frame.end", "stopped watching").await;
    b.click("Resubscribe").await;
    b.find(".frame[data-final]").await;
    let ids = b.eval("return [...document.querySelectorAll('.frame .muted.small')].map(e => e.textContent.trim())").await;
    let ids: Vec<&str> = ids
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "no frame came twice: {ids:?}");
    b.find_text(".frame[data-final]", "completed").await;
    b.shot("resubscribed").await;
    b.finish(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_running_task_is_canceled_from_the_task_view() {
    if !browser::available() {
        return;
    }
    let s = Server::start(Config {
        instances: vec![instance("tck", "scripted")],
        ..Config::default()
    })
    .await;
    let (b, _turn) = Browser::open("cancel-task", 1280, 800).await;
    b.goto(&ui(&s, "console/tck")).await;
    b.fill("Text", "tck-long-running").await;
    b.click("Send").await;
    let link = b.find("section a[href^='#/task/']").await;
    let task = link.text().await.unwrap();
    b.click("Tasks").await;
    b.press(&b.find_text("td a", &task).await).await;
    b.find_text("h2", &format!("Task {task}")).await;
    b.click("Cancel task").await;
    b.find_text("section p .badge", "canceled").await;
    let (_, record) = s.get(&format!("/a2a/api/task?id={task}")).await;
    assert_eq!(record["state"], "TASK_STATE_CANCELED", "{record}");
    b.find_text(".timeline", "now").await;
    b.click("Tasks").await;
    b.find_text("td .badge", "canceled").await;
    b.finish(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_set_in_the_panel_puts_the_bearer_scheme_on_the_card_and_is_never_shown() {
    if !browser::available() {
        return;
    }
    let s = Server::default().await;
    let token = "panel-secret-0123456789";
    let (b, _turn) = Browser::open("token", 1280, 800).await;
    b.goto(&ui(&s, "instance/demo")).await;
    b.find_text(".security", "none").await;
    b.fill("Bearer token", token).await;
    b.click("Set token").await;
    b.find_text(".security", "bearer").await;
    b.find_text("small", "A2A_INBOUND_DEMO").await;
    let page = b.eval("return document.documentElement.outerHTML + [...document.querySelectorAll('input')].map(i => i.value).join()").await;
    assert!(
        !page.as_str().unwrap().contains(token),
        "the token is not on the page"
    );
    let (status, _) = s.rpc("/a2a/demo", "GetTask", json!({"id": "x"})).await;
    assert_eq!(status, 401, "the endpoint now wants the token");
    // The console runs as the operator: it works without the token.
    b.goto(&ui(&s, "console/demo")).await;
    b.fill("Text", "still here").await;
    b.click("Send").await;
    b.find_text(".frame[data-final]", "completed").await;
    b.finish(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outbound_connection_to_a_second_edge_is_previewed_added_and_its_tool_called() {
    if !browser::available() {
        return;
    }
    let remote = Server::default().await;
    let s = Server::default().await;
    let card = format!("{}/a2a/demo/agent-card.json", remote.base());
    let (b, _turn) = Browser::open("outbound", 1280, 800).await;
    b.goto(&ui(&s, "outbound")).await;
    b.fill("Agent card URL", &card).await;
    b.click("Discover").await;
    b.find_text(".preview h3", "demo 0.1.0").await;
    b.shot("preview").await;
    b.fill("Connection name", "peer").await;
    b.click("Add connection").await;
    b.find_text(".connection .badge", "connected").await;
    let (_, snap) = s.get("/a2a/api").await;
    let tool = snap["outbounds"][0]["tools"][0]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    b.find_text("code.tool", &tool).await;
    b.fill("Prompt", "ping from the panel").await;
    b.click("Call").await;
    b.find_text("pre.result", "ping from the panel").await;
    b.shot("called").await;
    b.finish(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_component_is_refused_in_the_panel_while_the_old_one_serves() {
    if !browser::available() {
        return;
    }
    let mut decl = instance("swap", "echo");
    decl.component = Some("custom".into());
    let config = Config {
        instances: vec![decl],
        ..Config::default()
    };
    let s = Server::start_with(config, |dir| put_component(dir, "custom", EMBEDDED_SERVER)).await;
    let (b, _turn) = Browser::open("component", 1280, 800).await;
    b.goto(&ui(&s, "components")).await;
    b.find_text("td", "custom").await;
    s.put_component("custom", b"\0asm not really");
    b.press(&b.find("button[aria-label='Reload custom']").await)
        .await;
    b.find_text(".error", "not a valid WebAssembly component")
        .await;
    b.shot("refused").await;
    let (status, card) = s.get("/a2a/swap/agent-card.json").await;
    assert_eq!(
        (status, card["name"].clone()),
        (200, json!("swap")),
        "the old component serves"
    );
    // The console still runs on it.
    b.goto(&ui(&s, "console/swap")).await;
    b.fill("Text", "after the refusal").await;
    b.click("Send").await;
    b.find_text(".frame[data-final]", "completed").await;
    b.finish(&["409"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_metrics_views_show_what_ran() {
    if !browser::available() {
        return;
    }
    let s = Server::default().await;
    let answer: Value = s.send("/a2a/demo", "m-metrics", "count me").await;
    let context = answer["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (b, _turn) = Browser::open("sessions-metrics", 1280, 800).await;
    b.goto(&ui(&s, "sessions")).await;
    b.find_text("td code", &context).await;
    b.click("Conversation").await;
    b.find_text(".timeline", "you: count me").await;
    b.click("Close").await;
    b.goto(&ui(&s, "metrics")).await;
    b.find_text("td code", "SendMessage").await;
    b.find(".bars svg rect").await;
    b.find_text("a", "Prometheus endpoint").await;
    b.shot("metrics").await;
    b.finish(&[]).await;
}
