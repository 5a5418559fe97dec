//! The reads of docs/control.md "Control API › Reads".

use std::collections::HashMap;
use std::sync::Arc;

use http::Response;
use serde_json::{Value, json};

use super::views::{self, parse_state};
use super::{answer, refusal};
use crate::app::App;
use crate::engine::registry::Source;
use crate::responses::Body;
use crate::sessions::preset::{Backend, ComponentSettings};
use crate::store::{PageStart, TaskFilter};
use crate::telemetry::Gauges;

/// Most session rows a snapshot lists.
const SNAPSHOT_SESSIONS: u32 = 200;

/// The most tasks one snapshot page lists (`taskLimit`).
const MAX_TASK_LIMIT: u32 = 200;

/// The most bytes of task bodies one snapshot page carries: fewer tasks (and a `taskNextOffset`
/// to go on from) rather than more.
const MAX_SNAPSHOT_TASK_BYTES: u64 = 16 << 20;

/// `GET /a2a/api`: everything at once, tasks paged and filtered by `task*` parameters.
pub async fn snapshot(app: &Arc<App>, query: &super::Query) -> Response<Body> {
    let (filter, offset) = match task_filter(query) {
        Ok(f) => f,
        Err(e) => return refusal(400, &e),
    };
    let page = match app.store.list_tasks(filter).await {
        Ok(p) => p,
        Err(e) => return refusal(503, &format!("the store cannot list tasks: {e}")),
    };
    let next = offset + page.tasks.len() as u32;
    let instances = app.instances();
    let served = |id: &str| instances.iter().find(|i| i.record.id == id).map(|i| &**i);
    let inbounds: Vec<Value> = app
        .records()
        .iter()
        .map(|r| views::inbound(app, r, served(&r.id)))
        .collect();
    let outbounds: Vec<Value> = app
        .outbound
        .records()
        .iter()
        .map(|r| app.outbound.view(r))
        .collect();
    answer(
        200,
        &json!({
            "version": env!("CARGO_PKG_VERSION"),
            "inbounds": inbounds,
            "outbounds": outbounds,
            "tasks": page.tasks.iter().map(views::task_record).collect::<Vec<_>>(),
            "taskTotal": page.total,
            "taskNextOffset": if next < page.total { json!(next) } else { Value::Null },
            "peers": app.services().activity.peers(),
            "sessions": sessions(app, None, None, SNAPSHOT_SESSIONS).await,
            "metrics": app.services().metrics.json(&gauges(app).await),
            "store": crate::store::health::view(),
        }),
    )
}

/// The snapshot's task page from its `task*` parameters, and the offset it starts at.
fn task_filter(query: &super::Query) -> Result<(TaskFilter, u32), String> {
    let number =
        |name: &str, default: u32, max: u32| -> Result<u32, String> {
            match query.get(name) {
                None | Some("") => Ok(default),
                Some(v) => v.parse::<u32>().ok().filter(|n| *n <= max).ok_or_else(|| {
                    format!("{name} must be a whole number from 0 to {max}, not {v:?}")
                }),
            }
        };
    let limit = number("taskLimit", 50, MAX_TASK_LIMIT)?.max(1);
    let offset = number("taskOffset", 0, u32::MAX)?;
    let nonempty = |n: &str| query.get(n).filter(|s| !s.is_empty());
    let state = match nonempty("taskState") {
        Some(s) => Some(parse_state(s).ok_or_else(|| {
            format!("taskState {s:?} is not a task state (e.g. TASK_STATE_WORKING or working)")
        })?),
        None => None,
    };
    let filter = TaskFilter {
        instance_id: nonempty("taskServerId").map(str::to_owned),
        context_id: nonempty("taskContextId").map(str::to_owned),
        principal: nonempty("taskPrincipal").map(str::to_owned),
        state,
        updated_after: None,
        limit,
        start: PageStart::Offset(offset),
        max_bytes: Some(MAX_SNAPSHOT_TASK_BYTES),
        shape: None,
    };
    Ok((filter, offset))
}

async fn sessions(
    app: &App,
    instance: Option<&str>,
    context: Option<&str>,
    limit: u32,
) -> Vec<Value> {
    let activity = &app.services().activity;
    let streaming = activity.streaming_contexts();
    let labels: HashMap<String, String> = activity
        .peers()
        .into_iter()
        .map(|p| (p.id, p.label))
        .collect();
    let instances = app.records();
    let contexts = app
        .store
        .contexts(
            instance.map(str::to_owned),
            context.map(str::to_owned),
            limit,
        )
        .await
        .unwrap_or_default();
    contexts
        .iter()
        .map(|c| views::session(app, c, &instances, &streaming, &labels))
        .collect()
}

/// `GET /a2a/api/presets`.
pub fn presets(app: &App) -> Value {
    let presets = app.presets();
    let default = crate::instances::default_preset(&presets);
    json!(
        presets
            .iter()
            .map(|p| {
                let mut v = json!({ "id": p.id, "name": p.name, "description": p.description, "backend": p.backend.name(), "isDefault": p.id == default });
                if let Backend::Component(c) = &p.backend {
                    v["agent"] = agent_settings(c);
                }
                v
            })
            .collect::<Vec<_>>()
    )
}

/// `GET /a2a/api/card?id=`: the card the instance's component serves.
pub async fn card(app: &Arc<App>, id: Option<&str>) -> Response<Body> {
    match served_card(app, id, "card").await {
        Ok(card) => answer(200, &card),
        Err(refused) => refused,
    }
}

/// `GET /a2a/api/card/checks?id=`: the checks of an instance's card
/// ([`a2a_protocol::card::checks`]).
pub async fn card_checks(app: &Arc<App>, id: Option<&str>) -> Response<Body> {
    match served_card(app, id, "card/checks").await {
        Ok(card) => answer(200, &json!({ "checks": a2a_protocol::card::checks(&card) })),
        Err(refused) => refused,
    }
}

/// The card instance `id` serves, or the refusal (`path` names the read in it).
async fn served_card(
    app: &Arc<App>,
    id: Option<&str>,
    path: &str,
) -> Result<Value, Response<Body>> {
    let Some(id) = id.filter(|i| !i.is_empty()) else {
        return Err(refusal(
            400,
            &format!("give the instance: /a2a/api/{path}?id=<inbound id>"),
        ));
    };
    let Some(instance) = app.instances().into_iter().find(|i| i.record.id == id) else {
        return Err(refusal(404, &format!("no inbound instance {id:?}")));
    };
    super::card_of(app, &instance)
        .await
        .map_err(|e| refusal(502, &e))
}

/// `GET /a2a/api/task?id=`: one TaskRecord.
pub async fn task(app: &App, id: Option<&str>) -> Response<Body> {
    let Some(id) = id.filter(|i| !i.is_empty()) else {
        return refusal(400, "give the task: /a2a/api/task?id=<task id>");
    };
    match app.store.get_task(id.to_owned(), None).await {
        Ok(Some(row)) => {
            // The operator's reason for a failure (never the caller's to read), when one was kept.
            let note = app
                .store
                .task_note(row.instance_id.clone(), row.id.clone())
                .await
                .ok()
                .flatten();
            let mut view = views::with_note(views::task_record(&row), note);
            view["trace"] = views::trace(&row);
            answer(200, &view)
        }
        Ok(None) => refusal(404, &format!("no task {id:?}")),
        Err(e) => refusal(503, &format!("the store cannot read tasks: {e}")),
    }
}

/// `GET /a2a/api/push?id=<inbound>[&taskId=]`: the instance's push-notification configs (secrets
/// shown only as whether they are set) with their delivery state.
pub async fn push(app: &App, id: Option<&str>, task: Option<&str>) -> Response<Body> {
    let Some(id) = id.filter(|i| !i.is_empty()) else {
        return refusal(
            400,
            "give the instance: /a2a/api/push?id=<inbound id>[&taskId=<task id>]",
        );
    };
    let task = task.filter(|t| !t.is_empty()).map(str::to_owned);
    match app.store.push_status(id.to_owned(), task).await {
        Ok(rows) => answer(
            200,
            &json!({ "configs": rows.iter().map(views::push_status).collect::<Vec<_>>() }),
        ),
        Err(e) => refusal(503, &format!("the store cannot read push configs: {e}")),
    }
}

/// `GET /a2a/api/session?contextId=&serverId=`: the conversation derived from the context's
/// tasks; 409 when the context lives on several instances and `serverId` is missing.
pub async fn session(app: &App, context: Option<&str>, server: Option<&str>) -> Response<Body> {
    let Some(context) = context.filter(|c| !c.is_empty()) else {
        return refusal(
            400,
            "give the context: /a2a/api/session?contextId=<id>[&serverId=<inbound id>]",
        );
    };
    let server = server.filter(|s| !s.is_empty());
    let rows = sessions(app, server, Some(context), 50).await;
    match rows.as_slice() {
        [] => refusal(
            404,
            &format!(
                "no session with contextId {context:?}{}",
                server.map(|s| format!(" on {s:?}")).unwrap_or_default()
            ),
        ),
        [one] => {
            let instance = one["serverId"].as_str().unwrap_or_default();
            let mut view = one.clone();
            let filter = TaskFilter {
                instance_id: Some(instance.to_owned()),
                context_id: Some(context.to_owned()),
                limit: 100,
                ..TaskFilter::default()
            };
            let tasks = app
                .store
                .list_tasks(filter)
                .await
                .map(|p| p.tasks)
                .unwrap_or_default();
            view["tasks"] = json!(tasks.iter().map(views::task_record).collect::<Vec<_>>());
            view["messages"] = json!(
                crate::sessions::history::rebuild(&*app.store, instance, context, None, "").await
            );
            answer(200, &view)
        }
        many => {
            let ids: Vec<&str> = many.iter().filter_map(|s| s["serverId"].as_str()).collect();
            answer(
                409,
                &json!({ "ok": false, "message": format!("contextId {context:?} exists on several instances ({}); add serverId=<one of them>", ids.join(", ")) }),
            )
        }
    }
}

/// `GET /a2a/api/metrics[?format=prometheus]`.
pub async fn metrics(app: &App, format: Option<&str>) -> Response<Body> {
    let g = gauges(app).await;
    let metrics = &app.services().metrics;
    match format {
        None | Some("" | "json") => answer(200, &metrics.json(&g)),
        Some("prometheus") => Response::builder()
            .status(200)
            .header(
                http::header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
            .body(crate::responses::full(metrics.openmetrics(&g)))
            .expect("static response parts are valid"),
        Some(other) => refusal(
            400,
            &format!("format {other:?} is not known; use json or prometheus"),
        ),
    }
}

/// The metrics snapshot as JSON (what `GET /a2a/api/metrics` answers).
pub async fn metrics_json(app: &App) -> Value {
    app.services().metrics.json(&gauges(app).await)
}

/// What the metrics read from elsewhere.
async fn gauges(app: &App) -> Gauges {
    let size = |name: &str| std::fs::metadata(app.data_dir.join(name)).map_or(0, |m| m.len());
    let s = app.services();
    let tasks = app
        .store
        .state_counts()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|(i, s, n)| (i, s.as_str(), n))
        .collect();
    Gauges {
        // Read after the counts above: it includes their statements (and the task log's fold
        // they waited for).
        store_statements: app.store.statements(),
        store_failures: crate::store::health::failures(),
        push_dropped: app.store.push_dropped(),
        tasks,
        open_streams: s.activity.open_streams(),
        store_bytes: size(crate::store::SQLITE_FILE)
            + size(&format!("{}-wal", crate::store::SQLITE_FILE)),
        attachment_bytes: s.attachments.stored_bytes(),
        live_sessions: s.sessions.live_count(),
    }
}

/// What a `component` preset names: its agent, grants, limits and config keys (never values
/// the operator may have put a secret in by mistake: keys only).
fn agent_settings(c: &ComponentSettings) -> Value {
    json!({ "component": c.component, "grants": c.grants, "limits": c.limits, "configKeys": c.config.keys().collect::<Vec<_>>() })
}

/// Where a component came from, as the list shows it.
fn source(s: &Source) -> String {
    match s {
        Source::Embedded => "embedded".to_owned(),
        Source::File(p) => p.display().to_string(),
    }
}

/// `GET /a2a/api/components`: the server components, the outbound client and the agents the
/// presets name, each with its kind.
pub fn components(app: &App) -> Value {
    let instances = app.instances();
    let mut list: Vec<Value> = app
        .host
        .registry
        .all()
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "kind": "server", "source": source(&c.source),
                "sha256": c.sha256, "size": c.size, "loadedAt": c.loaded_at, "fromCache": c.from_cache,
                "instances": instances.iter().filter(|i| i.record.component == c.name).map(|i| i.record.id.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let client = &app.outbound.client;
    list.push(json!({
        "name": crate::outbound::client::CLIENT_COMPONENT, "kind": "client", "source": "embedded",
        "sha256": client.sha256, "size": crate::outbound::client::CLIENT_SIZE, "instances": [],
    }));
    for (name, presets) in crate::sessions::preset::agents(&app.presets()) {
        let ids: Vec<&str> = presets.iter().map(|p| p.id.as_str()).collect();
        let mut v = json!({
            "name": name, "kind": "agent",
            "presets": presets.iter().map(|p| match &p.backend {
                Backend::Component(c) => json!({ "id": p.id, "grants": c.grants, "limits": c.limits }),
                _ => Value::Null,
            }).collect::<Vec<_>>(),
            "instances": instances.iter().filter(|i| ids.contains(&i.preset.id.as_str())).map(|i| i.record.id.clone()).collect::<Vec<_>>(),
        });
        match app.agents.get(&name) {
            Some(a) => {
                for (k, x) in [
                    ("source", json!(source(&a.source))),
                    ("sha256", json!(a.sha256)),
                    ("size", json!(a.size)),
                    ("loadedAt", json!(a.loaded_at)),
                    ("imports", json!(a.imports)),
                ] {
                    v[k] = x;
                }
            }
            None => v["loaded"] = json!(false),
        }
        if let Some(why) = app.agents.failure(&name) {
            v["error"] = json!(why);
        }
        list.push(v);
    }
    let t = &app.services().metrics.instantiate_time;
    json!({
        "components": list,
        "compilations": app.host.compilations(),
        "instantiations": t.count(),
        "reuses": app.services().metrics.reuses(),
        "instantiateP50Us": t.quantile_us(0.5),
        "instantiateP99Us": t.quantile_us(0.99),
    })
}
