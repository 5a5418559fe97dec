//! A binary of its own: its harness reports its flows ignored, not passed, without Chromium.
//!
//! The web panel in a real headless Chromium against the real server: each flow is what an
//! operator does, checked on the page and in the runtime, with no console error, every field
//! labelled, and screenshots under `target/ui-screenshots/`.

mod browser;

use a2a_edge::config::Config;
use a2a_edge_tests::events::Events;
use a2a_edge_tests::jsonrpc::envelope;
use a2a_edge_tests::trials::flow;
use a2a_edge_tests::{Server, answer_head, command_preset, instance, put_component, scripted};
use browser::Browser;
use fantoccini::Locator;
use serde_json::{Value, json};

/// The embedded server component, as a file component (so it can be reloaded).
const EMBEDDED_SERVER: &[u8] = a2a_edge::engine::registry::EMBEDDED[0].1;

fn ui(s: &Server, hash: &str) -> String {
    format!("{}/a2a/ui#/{hash}", s.base())
}

/// Where each URL the page shows in `code` wraps, measured character by character: `bad`, the
/// lines that end mid-word (not after `/ . ? & = # -`); `wrapped`, the URLs on more than one line.
const URL_BREAKS: &str = r#"
const bad = [], wrapped = [];
for (const el of document.querySelectorAll('code')) {
  const url = el.textContent;
  if (!/^https?:\/\//.test(url)) continue;
  let top = null, last = '', line = '', lines = 1;
  const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    for (let i = 0; i < n.data.length; i++) {
      const r = document.createRange();
      r.setStart(n, i);
      r.setEnd(n, i + 1);
      const box = r.getClientRects()[0];
      if (!box) continue;
      if (top !== null && box.top > top + box.height / 2) {
        lines++;
        if (!'/.?&=#-'.includes(last)) bad.push(url + ': a line ends with ' + JSON.stringify(line));
        line = '';
      }
      top = box.top;
      last = n.data[i];
      line += last;
    }
  }
  if (lines > 1) wrapped.push(url);
}
return { bad, wrapped };
"#;

/// Waits (at most 20 s) until the stored record of instance `id` passes `done`.
async fn until_record(
    s: &Server,
    id: &str,
    what: &str,
    done: impl Fn(&a2a_edge::records::InstanceRecord) -> bool,
) -> a2a_edge::records::InstanceRecord {
    let started = std::time::Instant::now();
    loop {
        let r = s.app().record(id).expect("the instance is stored");
        if done(&r) {
            return r;
        }
        assert!(started.elapsed().as_secs() < 20, "{what}: {r:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The flows, ignored (or, under `A2A_EDGE_REQUIRE_BROWSER`, failed) without the browser.
async fn an_api_key_made_in_the_panel_is_shown_once_filters_tasks_and_is_revoked() {
    let s = Server::default().await;
    let (b, _turn) = Browser::open("keys", 1280, 800).await;
    b.goto(&ui(&s, "instance/demo")).await;
    b.fill("Client name", "panel-bot").await;
    b.click("Create key").await;
    let shown = b.find_text("[data-new-key] code", "a2a_").await;
    let key = shown.text().await.unwrap();
    b.find_text(".security", "apiKey").await;
    let answer = reqwest::Client::new()
        .post(format!("{}/a2a/demo", s.base()))
        .header("x-api-key", &key)
        .json(&envelope(
            1,
            "SendMessage",
            json!({"message": a2a_edge_tests::message("pk-1", "from the bot")}),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    // The key's principal links to its tasks.
    b.goto(&ui(&s, "instance/demo")).await;
    b.find_text("td a", "key:panel-bot")
        .await
        .click()
        .await
        .unwrap();
    b.find_text("td a", "key:panel-bot").await;
    b.find_text("td .clip", "from the bot").await;
    // Shown once: a fresh page has its name, never the key.
    b.goto(&ui(&s, "instance/demo")).await;
    b.find_text("td", "panel-bot").await;
    let page = b.eval("return document.documentElement.outerHTML").await;
    assert!(
        !page.as_str().unwrap().contains(&key),
        "the key is shown once"
    );
    b.eval("window.confirm = () => true; return 1").await;
    b.click("Revoke").await;
    b.find_text("td", "revoked").await;
    let (status, _) = s.rpc("/a2a/demo", "GetTask", json!({"id": "x"})).await;
    assert_eq!(
        status, 200,
        "no key left: the instance takes calls without one again"
    );
    b.finish(&[]).await;
}

async fn openid_connect_set_in_the_panel_goes_on_the_card_and_mutual_tls_says_what_it_needs() {
    let s = Server::default().await;
    let (b, _turn) = Browser::open("schemes", 1280, 800).await;
    b.goto(&ui(&s, "instance/demo")).await;
    b.find_text(".oidc-state", "No OpenID Connect tokens").await;
    b.fill("Issuer", "https://login.example.com").await;
    b.fill("Audience", "a2a-edge").await;
    b.fill("Scopes", "a2a:call").await;
    b.click("Accept tokens").await;
    b.find_text(
        ".oidc-state",
        "Accepts tokens from https://login.example.com",
    )
    .await;
    b.find_text(".security", "oidc").await;
    let card = a2a_edge_tests::get_json(&format!("{}/a2a/demo/agent-card.json", s.base())).await;
    assert_eq!(
        card["securityRequirements"],
        json!([{"schemes": {"oidc": {"list": ["a2a:call"]}}}])
    );
    // This listener asks for no client certificates: the panel says what is missing.
    b.click("Accept client certificates").await;
    b.find_text(".error", "clientCaFile").await;
    // The last credential goes only after the operator says so.
    b.eval("window.confirm = () => true; return 1").await;
    b.click("Stop accepting OpenID Connect tokens").await;
    b.find_text(".oidc-state", "No OpenID Connect tokens").await;
    let (status, _) = s.rpc("/a2a/demo", "GetTask", json!({"id": "x"})).await;
    assert_eq!(status, 200, "open again");
    b.finish(&["409"]).await;
}

fn main() -> std::process::ExitCode {
    a2a_edge_tests::keep_traces();
    let flows = a2a_edge_tests::flows![
        overview_shows_the_instances_live_on_a_wide_and_a_narrow_window,
        an_instance_created_in_the_panel_is_listed_and_served,
        the_console_streams_frames_as_they_arrive_and_resubscribes_from_the_last_one,
        a_long_running_task_is_canceled_from_the_task_view,
        the_task_view_tells_the_operator_why_an_agent_was_not_available,
        a_token_set_in_the_panel_puts_the_bearer_scheme_on_the_card_and_is_never_shown,
        an_api_key_made_in_the_panel_is_shown_once_filters_tasks_and_is_revoked,
        openid_connect_set_in_the_panel_goes_on_the_card_and_mutual_tls_says_what_it_needs,
        an_outbound_connection_to_a_second_edge_is_previewed_added_and_its_tool_called,
        an_invalid_component_is_refused_in_the_panel_while_the_old_one_serves,
        an_agent_component_shows_its_kind_imports_and_grants,
        two_instances_of_one_name_are_told_apart_on_the_components_page,
        sessions_tasks_and_metrics_views_show_what_ran,
        an_offline_update_check_is_one_quiet_line_and_a_switched_off_one_shows_nothing,
    ];
    // The surface's refusals, its feed and its console need no browser.
    let always = a2a_edge_tests::flows![
        the_panel_its_feed_and_its_console_are_refused_to_anyone_but_the_operator,
        the_event_feed_tells_task_writes_actions_and_metrics_and_bounds_its_watchers,
        the_console_runs_json_rpc_on_an_instance_as_the_operator,
    ];
    a2a_edge_tests::trials::run(
        browser::missing(),
        "A2A_EDGE_REQUIRE_BROWSER",
        flows,
        always,
    )
}

/// Opens the console of `instance` and sends `text` from it (streaming, the default).
async fn send_in_console(b: &Browser, s: &Server, instance: &str, text: &str) {
    b.goto(&ui(s, &format!("console/{instance}"))).await;
    b.fill("Text", text).await;
    b.click("Send").await;
}

async fn overview_shows_the_instances_live_on_a_wide_and_a_narrow_window() {
    let s = Server::default().await;
    s.send("/a2a/demo", "m1", "hello").await;
    let (b, _turn) = Browser::open("overview", 1280, 800).await;
    b.goto(&ui(&s, "")).await;
    b.find_text("td", "demo").await;
    b.find_text("#live", "live").await;
    b.find_text("code", &format!("{}/a2a/demo", s.base())).await;
    b.find_text(".series figcaption", "requests/s").await;
    // The charts draw the runtime's samples (every 10 s) as the feed brings them, on axes.
    b.until(
        "a request rate drawn",
        "return document.querySelector('.series polyline')?.getAttribute('points')?.length > 0",
    )
    .await;
    b.find_text(".series text", "now").await;
    b.find_text(".series text", "−15 min").await;
    b.find_text(".series text", "/s").await;
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
    // The endpoint and card URLs wrap in their narrow column between their parts, never mid-word.
    let breaks = b.eval(URL_BREAKS).await;
    assert_eq!(breaks["bad"], json!([]), "URLs broken mid-word: {breaks}");
    assert!(
        !breaks["wrapped"].as_array().unwrap().is_empty(),
        "a URL wraps on the narrow window: {breaks}"
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

async fn an_instance_created_in_the_panel_is_listed_and_served() {
    let s = Server::default().await;
    let (b, _turn) = Browser::open("create-instance", 1280, 800).await;
    b.goto(&ui(&s, "")).await;
    b.click("New instance").await;
    b.fill("Name", "Reports Desk").await;
    b.fill("Description", "Answers with reports").await;
    b.fill("Version", "2.0.0").await;
    // Every setting the control API takes is in the form: here a limit and two switches.
    b.fill("Concurrent tasks per caller", "3").await;
    b.press(&b.labelled("Serve A2A 0.3 callers too").await)
        .await;
    b.press(&b.labelled("Reuse component instances").await)
        .await;
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
    assert!(card.get("protocolVersion").is_none(), "0.3 off: {card}");
    let r = s.app().record(id).unwrap();
    assert_eq!(
        (
            r.limits.max_concurrent_tasks_per_principal,
            r.compat03,
            r.reuse_instances,
            r.push_notifications
        ),
        (3, false, true, true),
        "{r:?}"
    );
    // Edited: push off; the switches left alone keep their values.
    b.press(&b.labelled("Serve push notifications").await).await;
    b.click("Save changes").await;
    let r = until_record(&s, id, "push turned off", |r| !r.push_notifications).await;
    assert_eq!(
        (
            r.compat03,
            r.reuse_instances,
            r.limits.max_concurrent_tasks_per_principal
        ),
        (false, true, 3),
        "{r:?}"
    );
    b.click("Overview").await;
    b.find_text("td a", "Reports Desk").await;
    // A refused action says why, next to the form.
    b.click("New instance").await;
    b.fill("Name", "Clash").await;
    b.fill("Description", "x").await;
    b.fill("Endpoint path", &format!("/a2a/{id}")).await;
    b.click("Create instance").await;
    b.find_text("form .error", "HTTP 409").await;
    // A second "Reports Desk": refused, unless allowed, under an id of the operator's choice.
    b.fill("Name", "Reports Desk").await;
    b.labelled("Endpoint path").await.clear().await.unwrap();
    b.fill("Id", "reports-2").await;
    b.click("Create instance").await;
    b.find_text("form .error", "allowDuplicateName").await;
    b.press(&b.labelled("Allow a name another instance has").await)
        .await;
    b.click("Create instance").await;
    b.until(
        "the second one's page",
        "return location.hash === '#/instance/reports-2'",
    )
    .await;
    b.find_text("h2", "Instance Reports Desk").await;
    b.finish(&["409"]).await;
}

async fn the_console_streams_frames_as_they_arrive_and_resubscribes_from_the_last_one() {
    let s = Server::start(scripted(|_| {})).await;
    let (b, _turn) = Browser::open("console", 1280, 800).await;
    send_in_console(&b, &s, "tck", "tck-stream-artifact-chunked please").await;
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
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "no frame came twice: {ids:?}");
    b.find_text(".frame[data-final]", "completed").await;
    b.shot("resubscribed").await;

    // An interrupted task: the console fills in its id, and the next message continues it.
    b.click("Clear frames").await;
    b.fill("Text", "tck-input-required").await;
    b.click("Send").await;
    b.find(".frame[data-state='TASK_STATE_INPUT_REQUIRED']")
        .await;
    let waiting = b
        .labelled("Task id")
        .await
        .prop("value")
        .await
        .unwrap()
        .unwrap();
    assert!(
        !waiting.is_empty(),
        "the task id is filled in to continue it"
    );
    b.fill("Text", "here is more").await;
    b.click("Send").await;
    b.find(".frame[data-state='TASK_STATE_COMPLETED']").await;
    let (_, record) = s.get(&format!("/a2a/api/task?id={waiting}")).await;
    assert_eq!(
        record["state"], "TASK_STATE_COMPLETED",
        "the same task went on: {record}"
    );
    b.finish(&[]).await;
}

async fn a_long_running_task_is_canceled_from_the_task_view() {
    let s = Server::start(scripted(|_| {})).await;
    let (b, _turn) = Browser::open("cancel-task", 1280, 800).await;
    send_in_console(&b, &s, "tck", "tck-long-running").await;
    let link = b.find("section a[href^='#/task/']").await;
    let task = link.text().await.unwrap();
    // A webhook whose host does not resolve: taken, and its deliveries wait to be retried.
    let hook =
        json!({"taskId": task, "id": "panel-hook", "url": "https://hooks.example.invalid/a2a"});
    s.ok("/a2a/tck", "CreateTaskPushNotificationConfig", hook)
        .await;
    b.click("Tasks").await;
    b.press(&b.find_text("td a", &task).await).await;
    b.find_text("h2", &format!("Task {task}")).await;
    b.find_text("td code", "panel-hook").await;
    b.find_text("td", "https://hooks.example.invalid/a2a").await;
    b.click("Cancel task").await;
    b.find_text("section p .badge", "canceled").await;
    let (_, record) = s.get(&format!("/a2a/api/task?id={task}")).await;
    assert_eq!(record["state"], "TASK_STATE_CANCELED", "{record}");
    b.find_text(".timeline", "now").await;
    b.click("Tasks").await;
    b.find_text("td .badge", "canceled").await;
    // The filters narrow the list: by state, and by an instance that has no tasks.
    b.labelled("State")
        .await
        .select_by_value("TASK_STATE_COMPLETED")
        .await
        .unwrap();
    b.click("Filter").await;
    b.until(
        "the state filter in the URL",
        "return location.hash.includes('state=TASK_STATE_COMPLETED')",
    )
    .await;
    b.find_text("p.muted", "No task matches.").await;
    b.labelled("State")
        .await
        .select_by_value("TASK_STATE_CANCELED")
        .await
        .unwrap();
    b.click("Filter").await;
    b.find_text("td a", &task).await;
    b.find_text(".pager", "1–1 of 1").await;
    b.finish(&[]).await;
}

async fn the_task_view_tells_the_operator_why_an_agent_was_not_available() {
    let script = "echo 'cannot open /srv/agent/model.bin' >&2; exit 2";
    let s = Server::start(Config {
        presets: vec![command_preset("broken", script, None)],
        instances: vec![instance("broken", "broken")],
        ..Config::default()
    })
    .await;
    let answer = s
        .ok(
            "/a2a/broken",
            "SendMessage",
            json!({"message": {"messageId": "why-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
        )
        .await;
    let task = answer["task"]["id"].as_str().unwrap();
    let (b, _turn) = Browser::open("unavailable-task", 1280, 800).await;
    b.goto(&ui(&s, &format!("task/{task}"))).await;
    b.find_text("p.error", "the agent is not available").await;
    b.find_text(".error-detail", "cannot open /srv/agent/model.bin")
        .await;
    // Its trace: the request, the method and the turn that failed, as a waterfall.
    b.find_text(".waterfall", "SendMessage").await;
    b.find_text(".waterfall .span-label", "turn").await;
    b.find_text(".waterfall .span-label", "create-task").await;
    b.eval("document.querySelector('.waterfall').scrollIntoView({block: 'center'}); return true")
        .await;
    b.shot("waterfall").await;
    b.finish(&[]).await;
}

async fn a_token_set_in_the_panel_puts_the_bearer_scheme_on_the_card_and_is_never_shown() {
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
    let file = tempfile::NamedTempFile::with_suffix(".txt").unwrap();
    std::fs::write(file.path(), "attached words").unwrap();
    b.goto(&ui(&s, "console/demo")).await;
    b.fill("Text", "still here").await;
    b.labelled("Files")
        .await
        .send_keys(&file.path().display().to_string())
        .await
        .unwrap();
    b.fill("Data part (JSON)", r#"{"k": 1}"#).await;
    b.labelled("Blocking").await.click().await.unwrap();
    b.click("Send").await;
    let answered = b.find_text(".frame[data-final]", "completed").await;
    let raw = answered
        .find(Locator::Css("pre.raw"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        raw.contains("\"method\": \"SendMessage\""),
        "blocking: {raw}"
    );
    let name = file.path().file_name().unwrap().to_str().unwrap();
    assert!(
        raw.contains(&format!("\"filename\": \"{name}\"")) && raw.contains("\"data\": {"),
        "a file part and a data part went: {raw}"
    );
    b.finish(&[]).await;
}

async fn an_outbound_connection_to_a_second_edge_is_previewed_added_and_its_tool_called() {
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

async fn an_invalid_component_is_refused_in_the_panel_while_the_old_one_serves() {
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
    send_in_console(&b, &s, "swap", "after the refusal").await;
    b.find_text(".frame[data-final]", "completed").await;
    b.finish(&["409"]).await;
}

async fn an_agent_component_shows_its_kind_imports_and_grants() {
    use a2a_edge::sessions::preset::{Backend, ComponentSettings, Grants, Preset};
    let agent = Preset::new(
        "helper",
        Backend::Component(ComponentSettings {
            component: "echo-agent".into(),
            grants: Grants {
                key_value: true,
                allowed_hosts: vec!["api.example.com".into()],
                ..Grants::default()
            },
            ..ComponentSettings::default()
        }),
    );
    let config = Config {
        presets: vec![agent],
        instances: vec![instance("aid", "helper")],
        ..Config::default()
    };
    let s = Server::start(config).await;
    let r = s.send("/a2a/aid", "p1", "hi").await;
    assert_eq!(
        r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{r}"
    );
    let (b, _turn) = Browser::open("agent", 1280, 800).await;
    b.goto(&ui(&s, "components")).await;
    let row = b.find_text("tr", "echo-agent").await;
    let text = row.text().await.unwrap();
    for want in [
        "agent",
        "a2a:agent/progress",
        "helper: keyValue · hosts api.example.com",
        "aid",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    b.find_text("tr", "a2a-client").await;
    b.shot("components").await;
    b.goto(&ui(&s, "instance/aid")).await;
    b.find_text("section", "Agent component echo-agent").await;
    b.find_text("p", "Grants: keyValue · hosts api.example.com.")
        .await;
    b.shot("instance").await;
    b.finish(&[]).await;
}

async fn two_instances_of_one_name_are_told_apart_on_the_components_page() {
    let s = Server::default().await;
    for id in ["twin-a", "twin-b"] {
        let create = json!({"action": "inbound.create", "id": id, "name": "Twin", "description": "one of two", "version": "1.0.0", "allowDuplicateName": true});
        let (status, v) = s.action(create).await;
        assert_eq!(status, 200, "{v}");
    }
    let (b, _turn) = Browser::open("twins", 1280, 800).await;
    b.goto(&ui(&s, "components")).await;
    b.find_text("td", "Twin (twin-b)").await;
    // On the component's row and in the swap table: each by name and id, linking to its page.
    let shown = b
        .eval("return [...document.querySelectorAll('td')].flatMap(td => [...td.querySelectorAll('a[href^=\"#/instance/\"]')].map(a => a.parentElement.textContent + ' -> ' + a.getAttribute('href')))")
        .await;
    for id in ["twin-a", "twin-b"] {
        let want = json!(format!("Twin ({id}) -> #/instance/{id}"));
        let n = shown
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| **v == want)
            .count();
        assert_eq!(n, 2, "{want}: {shown}");
    }
    b.shot("twins").await;
    b.press(&b.find("a[href='#/instance/twin-b']").await).await;
    b.find_text("h2", "Instance Twin").await;
    b.find_text("p code", "twin-b").await;
    b.finish(&[]).await;
}

async fn sessions_tasks_and_metrics_views_show_what_ran() {
    let s = Server::default().await;
    let answer: Value = s.send("/a2a/demo", "m-metrics", "count me").await;
    let context = answer["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();
    // A second peer: another source address with its own User-Agent.
    let other = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .user_agent("peer-two/1.0")
        .build()
        .unwrap();
    let params = json!({"message": {"messageId": "m-other", "role": "ROLE_USER", "parts": [{"text": "me too"}]}});
    let r = a2a_edge_tests::jsonrpc::request(
        &other,
        &format!("{}/a2a/demo", s.base()),
        "SendMessage",
        params,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let other_context = r.json::<Value>().await.unwrap()["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();
    let (b, _turn) = Browser::open("sessions-metrics", 1280, 800).await;
    // Two contexts made in the same second begin alike (UUIDv7): the Context column shows
    // their tails, the whole id as the title and on a copy button.
    b.goto(&ui(&s, "tasks")).await;
    b.find_text("td .clip", "me too").await;
    let shown = b
        .eval("return [...document.querySelectorAll('td a[href^=\"#/tasks?context=\"]')].map(a => [a.textContent, a.title])")
        .await;
    let shown: Vec<(String, String)> = serde_json::from_value(shown).unwrap();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert_ne!(shown[0].0, shown[1].0, "told apart: {shown:?}");
    for c in [&context, &other_context] {
        let tail = &c[c.len() - 8..];
        assert!(
            shown
                .iter()
                .any(|(text, title)| title == c && text.ends_with(tail)),
            "{c}: {shown:?}"
        );
        b.find(&format!("button[aria-label='Copy: {c}']")).await;
    }
    b.goto(&ui(&s, "sessions")).await;
    // Grouped by instance, then by peer, a finished one-shot session folded.
    b.find_text(".group h3", "demo").await;
    b.find_text(".peer-group h4", "from peer-two/1.0").await;
    b.find_text(".peer-group h4", "from 127.0.0.1").await;
    let folded = b.find_text(".peer-group", "from 127.0.0.1").await;
    let folded = folded.find(Locator::Css("summary")).await.unwrap();
    assert_eq!(folded.text().await.unwrap(), "1 idle one-shot session");
    b.press(&folded).await;
    b.find_text("td code", &context).await;
    b.shot("sessions").await;
    b.click("Conversation").await;
    b.find_text(".timeline", "you: count me").await;
    b.click("Close").await;
    b.goto(&ui(&s, "metrics")).await;
    b.find_text("td code", "SendMessage").await;
    b.find(".bars svg rect").await;
    b.find_text("th", "≈ p50").await;
    b.find_text("a", "Prometheus endpoint").await;
    b.shot("metrics").await;
    b.finish(&[]).await;
}

/// The panel's files, its feed and its console sit behind the control surface's guards.
async fn the_panel_its_feed_and_its_console_are_refused_to_anyone_but_the_operator() {
    use reqwest::Method;
    let s = Server::default().await;
    let other = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    for (method, path) in [
        (Method::GET, "/a2a/ui"),
        (Method::GET, "/a2a/ui/app.js"),
        (Method::GET, "/a2a/api/events"),
        (Method::POST, "/a2a/api/rpc?id=demo"),
    ] {
        let r = other
            .request(method.clone(), format!("{}{path}", s.base()))
            .header("content-type", "application/json")
            .body(envelope(1, "GetTask", json!({"id": "x"})).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{method} {path} from 127.0.0.2");
    }
    let send = envelope(
        1,
        "SendMessage",
        json!({"message": {"messageId": "evil", "role": "ROLE_USER", "parts": [{"text": "x"}]}}),
    )
    .to_string();
    /// A request (method, path, headers) and the status it must get.
    type Case<'a> = (Method, &'a str, Vec<(&'a str, &'a str)>, u16);
    let cases: [Case; 5] = [
        (
            Method::GET,
            "/a2a/ui",
            vec![("host", "attacker.example")],
            403,
        ),
        (
            Method::GET,
            "/a2a/ui",
            vec![("sec-fetch-site", "cross-site")],
            403,
        ),
        (
            Method::POST,
            "/a2a/api/rpc?id=demo",
            vec![
                ("content-type", "application/json"),
                ("origin", "http://evil.example"),
            ],
            403,
        ),
        (
            Method::POST,
            "/a2a/api/rpc?id=demo",
            vec![("content-type", "text/plain")],
            415,
        ),
        (
            Method::GET,
            "/a2a/api/events",
            vec![("x-forwarded-for", "203.0.113.9")],
            403,
        ),
    ];
    for (method, path, headers, want) in cases {
        let (status, v) = s.control(method.clone(), path, &headers, Some(&send)).await;
        assert_eq!(status, want, "{method} {path} with {headers:?}: {v}");
    }
    let (_, snap) = s.get("/a2a/api").await;
    assert_eq!(snap["taskTotal"], 0, "no refused console call ran");

    let page = s
        .http
        .get(format!("{}/a2a/ui", s.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"),
        "{policy}"
    );
    assert_eq!(page.headers()["x-frame-options"], "DENY");
    let html = page.text().await.unwrap();
    assert!(
        html.contains("/a2a/ui/app.js") && !html.contains("http"),
        "nothing comes from elsewhere"
    );
    let (status, _) = s.get("/a2a/ui/nothing.js").await;
    assert_eq!(status, 404);
    let (status, _) = s.control(Method::DELETE, "/a2a/ui", &[], None).await;
    assert_eq!(status, 405);

    let split = Server::start_split(Config::default()).await;
    let r = split
        .http
        .get(format!("{}/a2a/ui", split.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404, "the public listener has no panel");
    let (status, _) = split.get("/a2a/ui").await;
    assert_eq!(status, 200, "the control listener has it");
}

async fn the_event_feed_tells_task_writes_actions_and_metrics_and_bounds_its_watchers() {
    let s = Server::default().await;
    let events = format!("{}/a2a/api/events", s.base());
    let feed = s.http.get(&events).send().await.unwrap();
    assert_eq!(feed.headers()["content-type"], "text/event-stream");
    let mut feed = Events::of(feed);
    assert_eq!(
        feed.next_named("hello").await["version"],
        env!("CARGO_PKG_VERSION")
    );
    assert!(feed.next_named("metrics").await["requests"].is_array());
    let answer = s.send("/a2a/demo", "feed-1", "hi").await;
    let task = answer["result"]["task"]["id"].clone();
    let told = feed.next_named("task").await;
    assert_eq!(
        (told["serverId"].clone(), told["taskId"].clone()),
        (json!("demo"), task)
    );
    assert_eq!(
        told["state"], "TASK_STATE_COMPLETED",
        "a blocking send is written once, settled"
    );
    let (status, _) = s
        .action(json!({"action": "inbound.disable", "id": "demo"}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        feed.next_named("change").await,
        json!({"action": "inbound.disable", "id": "demo"})
    );
    let mut more = Vec::new();
    for _ in 1..a2a_edge::feed::MAX_WATCHERS {
        let r = s.http.get(&events).send().await.unwrap();
        assert_eq!(r.status(), 200);
        more.push(r);
    }
    let refused = s.http.get(&events).send().await.unwrap();
    assert_eq!(refused.status(), 429, "one watcher too many");
    drop(more);
    drop(feed);
    let started = std::time::Instant::now();
    loop {
        let r = s.http.get(&events).send().await.unwrap();
        if r.status() == 200 {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 10,
            "places are freed when watchers leave"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn the_console_runs_json_rpc_on_an_instance_as_the_operator() {
    let s = Server::default().await;
    let (status, _) = s
        .action(
            json!({"action": "inbound.setAuth", "id": "demo", "token": "console-token-0123456789"}),
        )
        .await;
    assert_eq!(status, 200);
    let params = json!({"message": {"messageId": "c1", "role": "ROLE_USER", "parts": [{"text": "via the console"}]}});
    let (status, _) = s.rpc("/a2a/demo", "SendMessage", params.clone()).await;
    assert_eq!(status, 401, "the public endpoint wants the token");
    let (status, answer) = s.rpc("/a2a/api/rpc?id=demo", "SendMessage", params).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answer}"
    );
    let mut events = s
        .stream(
            "/a2a/api/rpc?id=demo",
            "SendStreamingMessage",
            json!({"message": {"messageId": "c2", "role": "ROLE_USER", "parts": [{"text": "one two"}]}}),
            None,
        )
        .await;
    assert_eq!(events.status(), 200);
    let mut last = None;
    while let Some(e) = events.next().await {
        last = Some(e);
    }
    assert!(
        format!("{last:?}").contains("TASK_STATE_COMPLETED"),
        "the stream settles: {last:?}"
    );
    let (status, v) = s
        .rpc("/a2a/api/rpc?id=nobody", "GetTask", json!({"id": "x"}))
        .await;
    assert_eq!(status, 404, "{v}");
    let (status, v) = s.rpc("/a2a/api/rpc", "GetTask", json!({"id": "x"})).await;
    assert_eq!(status, 400, "{v}");
    s.action(json!({"action": "inbound.disable", "id": "demo"}))
        .await;
    let (status, v) = s
        .rpc("/a2a/api/rpc?id=demo", "GetTask", json!({"id": "x"}))
        .await;
    assert_eq!(status, 404);
    assert!(v["message"].as_str().unwrap().contains("enable it"), "{v}");
    s.action(json!({"action": "inbound.enable", "id": "demo"}))
        .await;
    let head = format!(
        "POST /a2a/api/rpc?id=demo HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        (1 << 20) + 1
    );
    let answer = answer_head(s.running.as_ref().unwrap().addr, &head).await;
    assert!(
        answer.starts_with("HTTP/1.1 413"),
        "the control surface's 1 MiB bounds the console too: {answer}"
    );
}

async fn an_offline_update_check_is_one_quiet_line_and_a_switched_off_one_shows_nothing() {
    let mut offline = Config::default();
    offline.update.registry_url = "http://127.0.0.1:9/registry".into();
    offline.update.manifest_url = "http://127.0.0.1:9/manifest".into();
    let s = Server::start(offline.clone()).await;
    let (b, _turn) = Browser::open("update-offline", 1280, 800).await;
    b.goto(&ui(&s, "")).await;
    b.find_text(".banner.quiet", "Update check unavailable")
        .await;
    let height = b
        .eval("return document.querySelector('.banner').getBoundingClientRect().height")
        .await;
    assert!(
        height.as_f64().unwrap() < 24.0,
        "one quiet line, not a banner: {height} px"
    );
    let mut off = offline;
    off.update.enabled = false;
    let quiet = Server::start(off).await;
    b.goto(&ui(&quiet, "")).await;
    b.find_text("td", "demo").await;
    assert_eq!(
        b.eval("return document.querySelector('.banner').hidden")
            .await,
        true
    );
    assert_eq!(quiet.app().update.checks(), 0);
    b.finish(&[]).await;
}
