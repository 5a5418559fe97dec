//! The actions of SPEC §2.2 for inbound instances, tasks, sessions and components. Each answers
//! `Ok(body)` (200) or `Err(message)` (409) saying what to fix.

use std::sync::Arc;

use a2a_protocol::TaskState;
use serde_json::{Map, Value, json};

use super::connections;
use crate::app::App;
use crate::config::Limits;
use crate::credentials::inbound_name;
use crate::instances::{self, Instance};
use crate::store::{InstanceRecord, PageStart, Store, TaskFilter};
use crate::tasks::now_ms;
use control_fields::{Fields, Refusal, parse, secret_name};

/// The shortest inbound bearer token accepted without `allowWeak`.
const MIN_TOKEN_CHARS: usize = 16;

/// Runs one action.
pub async fn act(app: &Arc<App>, body: &Map<String, Value>) -> Result<Value, Refusal> {
    let f = Fields(body);
    let action = parse(body)?;
    match action {
        "inbound.create" => create(app, &f).await,
        "inbound.update" => update(app, &f).await,
        "inbound.remove" => remove(app, &f).await,
        "inbound.enable" => set_enabled(app, &f, true).await,
        "inbound.disable" => set_enabled(app, &f, false).await,
        "inbound.setAuth" => set_auth(app, &f).await,
        "inbound.sendTest" => send_test(app, &f).await,
        "inbound.close" => close_peer(app, &f).await,
        "task.cancel" => cancel_task(app, &f).await,
        "session.cancel" => end_session(app, &f, false).await,
        "session.close" => end_session(app, &f, true).await,
        "component.reload" => reload(app, &f).await,
        "outbound.create" => connections::create(app, &f).await,
        "outbound.update" => connections::update(app, &f).await,
        "outbound.remove" => connections::remove(app, &f).await,
        "outbound.enable" => connections::set_enabled(app, &f, true).await,
        "outbound.disable" => connections::set_enabled(app, &f, false).await,
        "outbound.refresh" => connections::refresh(app, &f).await,
        "outbound.setAuth" => connections::set_auth(app, &f).await,
        "outbound.discover" => connections::discover(app, &f).await,
        _ => connections::call(app, &f).await,
    }
}

fn done(message: String) -> Value {
    json!({ "ok": true, "message": message })
}

fn record(app: &App, id: &str) -> Result<InstanceRecord, Refusal> {
    app.store_instance(id).ok_or_else(|| format!("unknown inbound id {id:?}; GET /a2a/api lists the instances"))
}

fn assembled(app: &App, id: &str) -> Result<Arc<Instance>, Refusal> {
    app.instances().into_iter().find(|i| i.record.id == id).ok_or_else(|| format!("inbound {id:?} is not assembled (its preset or component is missing; see the runtime log)"))
}

async fn save(app: &App, record: InstanceRecord) -> Result<(), Refusal> {
    let id = record.id.clone();
    app.save_instance(record).await.map_err(|e| format!("could not save inbound {id:?}: {e:#}"))
}

/// Applies the optional fields shared by create and update.
async fn apply(app: &Arc<App>, r: &mut InstanceRecord, f: &Fields<'_>) -> Result<(), Refusal> {
    use a2a_protocol::bounds::{MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_VERSION_CHARS};
    for (name, slot, max) in [("name", &mut r.name, MAX_NAME_CHARS), ("description", &mut r.description, MAX_DESCRIPTION_CHARS), ("version", &mut r.version, MAX_VERSION_CHARS)] {
        if let Some(v) = f.opt_nonempty(name)? {
            a2a_protocol::bounds::check(&format!("field \"{name}\""), v.trim(), max)?;
            *slot = v.trim().to_owned();
        }
    }
    if let Some(p) = f.opt_nonempty("endpointPath")? {
        let path = instances::normalize_endpoint(p)?;
        let all = app.store.instances().map_err(|e| e.to_string())?;
        instances::check_endpoint_free(&path, all.iter().filter(|o| o.id != r.id).map(|o| (o.id.as_str(), o.endpoint_path.as_str())))?;
        r.endpoint_path = path;
    }
    if let Some(p) = f.opt_nonempty("preset")? {
        let presets = app.config.all_presets();
        if !presets.iter().any(|x| x.id == p) {
            let ids: Vec<&str> = presets.iter().map(|x| x.id.as_str()).collect();
            return Err(format!("unknown preset {p:?}; presets: {}", ids.join(", ")));
        }
        r.preset = p.to_owned();
    }
    if f.has("authTokenEnv") {
        let name = f.str("authTokenEnv")?;
        r.auth_token_env = Some(secret_name("authTokenEnv", name)?);
    }
    if let Some(c) = f.opt_nonempty("component")? {
        // Re-read from its source, compiled and validated off the request path; refused = unchanged.
        app.host.registry.reload(c).await.map_err(|e| format!("component {c:?} was refused: {e:#}"))?;
        r.component = c.to_owned();
    }
    if let Some(limits) = f.opt_object("limits")? {
        let mut merged = serde_json::to_value(r.limits).expect("limits serialise");
        for (k, v) in limits {
            merged[k] = v.clone();
        }
        r.limits = serde_json::from_value::<Limits>(merged).map_err(|e| format!("field \"limits\": {e}"))?;
        r.limits.check().map_err(|e| format!("field \"limits\": {e}"))?;
    }
    if let Some(n) = f.opt_u64("maxBodyBytes", 1024..=64 << 20)? {
        r.limits.max_body_bytes = n;
    }
    Ok(())
}

async fn create(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let name = f.str("name")?.trim();
    a2a_protocol::bounds::check("field \"name\"", name, a2a_protocol::bounds::MAX_NAME_CHARS)?;
    let (description, version) = (f.str("description")?, f.str("version")?);
    let now = now_ms();
    let id = instances::new_id(name);
    if app.store_instance(&id).is_some() {
        return Err(format!("inbound server {id} already exists"));
    }
    let mut r = InstanceRecord {
        endpoint_path: format!("/a2a/{id}"),
        id: id.clone(),
        name: name.to_owned(),
        description: description.to_owned(),
        version: version.to_owned(),
        preset: instances::default_preset(&app.config),
        auth_token_env: None,
        enabled: f.opt_bool("enabled")?.unwrap_or(true),
        component: instances::DEFAULT_COMPONENT.into(),
        limits: app.config.limits,
        created_at: now,
        updated_at: now,
    };
    apply(app, &mut r, f).await?;
    let all = app.store.instances().map_err(|e| e.to_string())?;
    instances::check_endpoint_free(&r.endpoint_path, all.iter().map(|o| (o.id.as_str(), o.endpoint_path.as_str())))?;
    save(app, r).await?;
    Ok(json!({ "ok": true, "message": format!("inbound server {name:?} created"), "id": id }))
}

async fn update(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let mut r = record(app, id)?;
    let old_path = r.endpoint_path.clone();
    apply(app, &mut r, f).await?;
    r.updated_at = now_ms();
    let moved = r.endpoint_path != old_path;
    save(app, r).await?;
    if moved {
        app.activity.close_instance(id);
    }
    Ok(done(format!("inbound server \"{id}\" updated")))
}

async fn remove(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let r = record(app, id)?;
    crate::store::settled(app.store.delete_instance(r.id.clone())).await.map_err(|e| format!("could not remove inbound {id:?}: {e}"))?;
    app.reassemble().map_err(|e| format!("{e:#}"))?;
    app.activity.close_instance(id);
    if app.credentials.resolve(&inbound_name(id)).is_some() {
        app.credentials.set(&inbound_name(id), None).map_err(|e| format!("inbound {id:?} was removed but its stored token was not: {e:#}"))?;
    }
    Ok(done(format!("inbound server \"{id}\" removed (its tasks stay readable through /a2a/api/task)")))
}

async fn set_enabled(app: &Arc<App>, f: &Fields<'_>, enabled: bool) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let mut r = record(app, id)?;
    let word = if enabled { "enabled" } else { "disabled" };
    if r.enabled == enabled {
        return Ok(done(format!("inbound server \"{id}\" was already {word}")));
    }
    r.enabled = enabled;
    r.updated_at = now_ms();
    save(app, r).await?;
    if !enabled {
        app.activity.close_instance(id);
    }
    Ok(done(format!("inbound server \"{id}\" {word}")))
}

async fn set_auth(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let mut r = record(app, id)?;
    let token = f.auth_change(MIN_TOKEN_CHARS)?;
    let name = inbound_name(id);
    app.credentials.set(&name, token).map_err(|e| format!("the token could not be stored: {e:#}"))?;
    r.auth_token_env = token.map(|_| name.clone());
    r.updated_at = now_ms();
    save(app, r).await?;
    Ok(done(match token {
        Some(_) => format!("inbound server \"{id}\": token set (stored as {name}); callers must send Authorization: Bearer <token>"),
        None => format!("inbound server \"{id}\": token cleared; the endpoint accepts calls without a token"),
    }))
}

async fn send_test(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let instance = assembled(app, id)?;
    let mut message = json!({ "messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{ "text": f.str("text")? }] });
    if let Some(c) = f.opt_nonempty("contextId")? {
        message["contextId"] = json!(c);
    }
    if let Some(s) = f.opt_nonempty("skill")? {
        message["metadata"] = json!({ "skill": s });
    }
    let result = super::call(app, &instance, "SendMessage", json!({ "message": message })).await.map_err(|e| format!("sendTest on \"{id}\" was refused: {e}"))?;
    let (task_id, state) = match (result.get("task"), result.get("message")) {
        (Some(t), _) => (t["id"].clone(), t["status"]["state"].clone()),
        (None, Some(m)) => (m["taskId"].clone(), json!("TASK_STATE_COMPLETED")),
        _ => return Err(format!("sendTest on \"{id}\": the component answered neither a task nor a message")),
    };
    Ok(json!({ "ok": true, "message": format!("test message sent to \"{id}\": {}", state.as_str().unwrap_or("")), "taskId": task_id, "state": state, "result": result }))
}

/// Cancels one task through its instance's component (the same path as CancelTask).
async fn cancel_one(app: &Arc<App>, instance_id: &str, task_id: &str) -> Result<(), Refusal> {
    let instance = assembled(app, instance_id)?;
    super::call(app, &instance, "CancelTask", json!({ "id": task_id })).await.map(|_| ())
}

async fn cancel_task(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let row = app.store.get_task(id, None).map_err(|e| e.to_string())?.ok_or_else(|| format!("unknown task id {id:?}"))?;
    cancel_one(app, &row.instance_id, id).await.map_err(|e| format!("task {id} was not canceled: {e}"))?;
    Ok(done(format!("task {id} canceled")))
}

async fn close_peer(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let active = app.activity.close_peer(id).ok_or_else(|| format!("unknown peer id {id:?}; the snapshot's peers[] lists them"))?;
    let server = id.rsplit_once('@').map(|(_, s)| s).unwrap_or_default();
    let mut canceled = 0;
    for task in &active {
        if cancel_one(app, server, task).await.is_ok() {
            canceled += 1;
        }
    }
    Ok(done(format!("inbound peer {id} closed: its streams ended, {canceled} active task(s) canceled")))
}

/// The non-terminal tasks of a context: (instance, task id).
fn active_tasks(app: &App, context: &str, server: Option<&str>) -> Result<Vec<(String, String)>, Refusal> {
    let mut out = Vec::new();
    for state in [TaskState::Submitted, TaskState::Working, TaskState::InputRequired, TaskState::AuthRequired] {
        let filter = TaskFilter {
            instance_id: server.map(str::to_owned),
            context_id: Some(context.to_owned()),
            state: Some(state),
            limit: 100,
            start: PageStart::First,
            ..TaskFilter::default()
        };
        let page = app.store.list_tasks(&filter).map_err(|e| e.to_string())?;
        out.extend(page.tasks.into_iter().map(|t| (t.instance_id, t.id)));
    }
    Ok(out)
}

async fn end_session(app: &Arc<App>, f: &Fields<'_>, close: bool) -> Result<Value, Refusal> {
    let context = f.str("id")?;
    let server = f.opt_nonempty("serverId")?;
    let known = app.store.contexts(server, Some(context), 1).map_err(|e| e.to_string())?;
    if known.is_empty() && !server.is_some_and(|s| app.sessions.is_live(s, context)) {
        return Err(format!("unknown session {context:?}{}", server.map(|s| format!(" on {s:?}")).unwrap_or_default()));
    }
    let mut canceled = 0;
    for (instance, task) in active_tasks(app, context, server)? {
        if cancel_one(app, &instance, &task).await.is_ok() {
            canceled += 1;
        }
    }
    let mut parts = vec![format!("canceled {canceled} active task(s)")];
    if close {
        parts.push(format!("closed {} live session(s)", app.sessions.close(server, context)));
    }
    Ok(done(format!("session {context}: {}", parts.join("; "))))
}

async fn reload(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let name = f.str("name")?;
    let loaded = app.host.registry.reload(name).await.map_err(|e| format!("component {name:?} was not swapped: {e:#}"))?;
    Ok(json!({ "ok": true, "message": format!("component \"{name}\" reloaded"), "sha256": loaded.sha256 }))
}
