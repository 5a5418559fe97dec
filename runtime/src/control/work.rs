//! The actions on running work (docs/control.md "Control API › Actions"): cancel a task, end a session or a peer's streams,
//! reload a component.

use std::sync::Arc;

use a2a_protocol::TaskState;
use control_api::{Refusal, Session};
use serde_json::{Value, json};

use super::done;
use super::inbound::assembled;
use crate::app::App;
use crate::store::{PageStart, TaskFilter};

/// Cancels one task through its instance's component (the same path as CancelTask).
async fn cancel_one(app: &Arc<App>, instance_id: &str, task_id: &str) -> Result<(), Refusal> {
    let instance = assembled(app, instance_id)?;
    super::call(app, &instance, "CancelTask", json!({ "id": task_id }))
        .await
        .map(|_| ())
}

/// Cancels each of `tasks` (instance, task id); how many were canceled.
async fn cancel_all(app: &Arc<App>, tasks: &[(String, String)]) -> usize {
    let mut canceled = 0;
    for (instance, task) in tasks {
        if cancel_one(app, instance, task).await.is_ok() {
            canceled += 1;
        }
    }
    canceled
}

/// `task.cancel`
pub async fn cancel_task(app: &Arc<App>, id: &str) -> Result<Value, Refusal> {
    let row = app
        .store
        .get_task(id.to_owned(), None)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("unknown task id {id:?}"))?;
    cancel_one(app, &row.instance_id, id)
        .await
        .map_err(|e| format!("task {id} was not canceled: {e}"))?;
    Ok(done(format!("task {id} canceled")))
}

/// `inbound.close`: ends a peer's streams and cancels its active tasks.
pub async fn close_peer(app: &Arc<App>, id: &str) -> Result<Value, Refusal> {
    let active = app
        .services()
        .activity
        .close_peer(id)
        .ok_or_else(|| format!("unknown peer id {id:?}; the snapshot's peers[] lists them"))?;
    let server = id.rsplit_once('@').map(|(_, s)| s).unwrap_or_default();
    let tasks: Vec<(String, String)> = active.into_iter().map(|t| (server.to_owned(), t)).collect();
    let canceled = cancel_all(app, &tasks).await;
    Ok(done(format!(
        "inbound peer {id} closed: its streams ended, {canceled} active task(s) canceled"
    )))
}

/// The active tasks of a context: (instance, task id).
async fn active_tasks(
    app: &App,
    context: &str,
    server: Option<&str>,
) -> Result<Vec<(String, String)>, Refusal> {
    let mut out = Vec::new();
    for state in TaskState::ACTIVE {
        let filter = TaskFilter {
            instance_id: server.map(str::to_owned),
            context_id: Some(context.to_owned()),
            state: Some(state),
            limit: 100,
            start: PageStart::First,
            ..TaskFilter::default()
        };
        let page = app
            .store
            .list_tasks(filter)
            .await
            .map_err(|e| e.to_string())?;
        out.extend(page.tasks.into_iter().map(|t| (t.instance_id, t.id)));
    }
    Ok(out)
}

/// `session.cancel` / `session.close`: cancels the context's active tasks; closing also
/// releases its live sessions.
pub async fn end_session(app: &Arc<App>, a: &Session, close: bool) -> Result<Value, Refusal> {
    let context = a.id.as_str();
    let server = a.server_id.as_ref().map(|s| s.as_str());
    let sessions = &app.services().sessions;
    let known = app
        .store
        .contexts(server.map(str::to_owned), Some(context.to_owned()), 1)
        .await
        .map_err(|e| e.to_string())?;
    if known.is_empty() && !server.is_some_and(|s| sessions.is_live(s, context)) {
        return Err(format!(
            "unknown session {context:?}{}",
            server.map(|s| format!(" on {s:?}")).unwrap_or_default()
        ));
    }
    let canceled = cancel_all(app, &active_tasks(app, context, server).await?).await;
    let mut parts = vec![format!("canceled {canceled} active task(s)")];
    if close {
        parts.push(format!(
            "closed {} live session(s)",
            sessions.close(server, context)
        ));
    }
    Ok(done(format!("session {context}: {}", parts.join("; "))))
}

/// `component.reload`: an agent component (one a preset names, or one loaded) on the agents'
/// host, any other on the server registry.
pub async fn reload(app: &Arc<App>, name: &str) -> Result<Value, Refusal> {
    if crate::sessions::preset::agents(&app.presets()).contains_key(name)
        || app.agents.get(name).is_some()
    {
        let agent = app
            .agents
            .reload(name)
            .await
            .map_err(|e| format!("agent component {name:?} was not swapped: {e:#}"))?;
        return Ok(json!({
            "ok": true, "kind": "agent", "message": format!("agent component \"{name}\" reloaded: new turns run it"),
            "sha256": agent.sha256, "imports": agent.imports,
        }));
    }
    let loaded = app
        .host
        .registry
        .reload(name)
        .await
        .map_err(|e| format!("component {name:?} was not swapped: {e:#}"))?;
    Ok(
        json!({ "ok": true, "message": format!("component \"{name}\" reloaded"), "sha256": loaded.sha256 }),
    )
}
