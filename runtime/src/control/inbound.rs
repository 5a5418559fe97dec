//! The inbound actions (docs/control.md "Control API › Actions"): create, update, remove, enable/disable, set the token,
//! send a test message.

use std::sync::Arc;

use control_api::{
    InboundCreate, InboundSetAuth, InboundSettings, InboundUpdate, Refusal, SendTest, auth_change,
    secret_name,
};
use serde_json::{Value, json};

use super::done;
use crate::app::App;
use crate::clock::now_ms;
use crate::credentials::inbound_name;
use crate::instances::{self, Instance};
use crate::records::{InstanceRecord, Limits};

/// The shortest inbound bearer token accepted without `allowWeak`.
const MIN_TOKEN_CHARS: usize = 16;

/// The stored record of an instance.
pub fn record(app: &App, id: &str) -> Result<InstanceRecord, Refusal> {
    app.record(id)
        .ok_or_else(|| format!("unknown inbound id {id:?}; GET /a2a/api lists the instances"))
}

/// The instance as it is served.
pub fn assembled(app: &App, id: &str) -> Result<Arc<Instance>, Refusal> {
    app.instances().into_iter().find(|i| i.record.id == id).ok_or_else(|| format!("inbound {id:?} is not assembled (its preset or component is missing; see the runtime log)"))
}

pub(super) async fn save(app: &App, record: InstanceRecord) -> Result<(), Refusal> {
    let id = record.id.clone();
    app.save_instance(record)
        .await
        .map_err(|e| format!("could not save inbound {id:?}: {e:#}"))
}

/// Refuses an endpoint path another instance serves, or one nested in (or around) it.
fn endpoint_free(app: &App, r: &InstanceRecord) -> Result<(), Refusal> {
    let all = app.records();
    instances::check_endpoint_free(
        &r.endpoint_path,
        all.iter()
            .filter(|o| o.id != r.id)
            .map(|o| (o.id.as_str(), o.endpoint_path.as_str())),
    )
}

/// Sets a card field (`name`, `description`, `version`) within its bound.
fn set_text(slot: &mut String, name: &str, value: Option<&str>, max: usize) -> Result<(), Refusal> {
    if let Some(v) = value {
        a2a_protocol::bounds::check(&format!("field \"{name}\""), v.trim(), max)?;
        *slot = v.trim().to_owned();
    }
    Ok(())
}

/// Applies the fields create and update share.
async fn apply(app: &Arc<App>, r: &mut InstanceRecord, f: &InboundSettings) -> Result<(), Refusal> {
    if let Some(p) = &f.endpoint_path {
        r.endpoint_path = instances::normalize_endpoint(p.as_str())?;
        endpoint_free(app, r)?;
    }
    if let Some(p) = &f.preset {
        let presets = app.presets();
        if !presets.iter().any(|x| x.id == p.as_str()) {
            let ids: Vec<&str> = presets.iter().map(|x| x.id.as_str()).collect();
            return Err(format!(
                "unknown preset {:?}; presets: {}",
                p.as_str(),
                ids.join(", ")
            ));
        }
        r.preset = p.0.clone();
    }
    if let Some(name) = &f.auth_token_env {
        r.auth_token_env = Some(secret_name("authTokenEnv", name.as_str())?);
    }
    if let Some(c) = &f.component {
        // Re-read from its source, compiled and validated off the request path; refused = unchanged.
        app.host
            .registry
            .reload(c.as_str())
            .await
            .map_err(|e| format!("component {:?} was refused: {e:#}", c.as_str()))?;
        r.component = c.0.clone();
    }
    if let Some(limits) = &f.limits {
        let mut merged = serde_json::to_value(r.limits).expect("limits serialise");
        for (k, v) in &limits.0 {
            merged[k] = v.clone();
        }
        r.limits = serde_json::from_value::<Limits>(merged)
            .map_err(|e| format!("field \"limits\": {e}"))?;
        r.limits
            .check()
            .map_err(|e| format!("field \"limits\": {e}"))?;
    }
    if let Some(n) = f.max_body_bytes {
        r.limits.max_body_bytes = n.0;
    }
    if let Some(p) = f.push_notifications {
        r.push_notifications = p.0;
    }
    if let Some(c) = f.compat03 {
        r.compat03 = c.0;
    }
    if let Some(reuse) = f.reuse_instances {
        r.reuse_instances = reuse.0;
    }
    Ok(())
}

/// `inbound.create`
pub async fn create(app: &Arc<App>, a: &InboundCreate) -> Result<Value, Refusal> {
    use a2a_protocol::bounds::{MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_VERSION_CHARS};
    let name = a.name.as_str().trim();
    let now = now_ms();
    let id = match &a.id {
        Some(id) => {
            instances::check_id(id.as_str()).map_err(|e| format!("field \"id\" {e}"))?;
            id.as_str().to_owned()
        }
        None => instances::new_id(name),
    };
    if app.record(&id).is_some() {
        return Err(format!("inbound server {id} already exists"));
    }
    let secret = crate::credentials::inbound_name(&id);
    if let Some(other) = app
        .records()
        .iter()
        .find(|r| crate::credentials::inbound_name(&r.id) == secret)
    {
        return Err(format!(
            "field \"id\" {id:?} would share the token secret {secret} with inbound server {}: choose another id",
            other.id
        ));
    }
    if !a.allow_duplicate_name.is_some_and(|f| f.0)
        && let Some(other) = app.records().iter().find(|r| r.name == name)
    {
        return Err(format!(
            "the name {name:?} is taken by inbound server {}: choose another name, or send \"allowDuplicateName\": true",
            other.id
        ));
    }
    let preset = instances::default_preset(&app.presets());
    let mut r = InstanceRecord {
        enabled: a.enabled.is_none_or(|e| e.0),
        ..InstanceRecord::new(
            &id,
            preset,
            instances::DEFAULT_COMPONENT,
            app.config.limits,
            now,
        )
    };
    set_text(&mut r.name, "name", Some(name), MAX_NAME_CHARS)?;
    set_text(
        &mut r.description,
        "description",
        Some(a.description.as_str()),
        MAX_DESCRIPTION_CHARS,
    )?;
    set_text(
        &mut r.version,
        "version",
        Some(a.version.as_str()),
        MAX_VERSION_CHARS,
    )?;
    apply(app, &mut r, &a.settings()).await?;
    endpoint_free(app, &r)?;
    save(app, r).await?;
    Ok(json!({ "ok": true, "message": format!("inbound server {name:?} created"), "id": id }))
}

/// `inbound.update`
pub async fn update(app: &Arc<App>, a: &InboundUpdate) -> Result<Value, Refusal> {
    use a2a_protocol::bounds::{MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS, MAX_VERSION_CHARS};
    let id = a.id.as_str();
    let mut r = record(app, id)?;
    let old_path = r.endpoint_path.clone();
    set_text(
        &mut r.name,
        "name",
        a.name.as_ref().map(|t| t.as_str()),
        MAX_NAME_CHARS,
    )?;
    set_text(
        &mut r.description,
        "description",
        a.description.as_ref().map(|t| t.as_str()),
        MAX_DESCRIPTION_CHARS,
    )?;
    set_text(
        &mut r.version,
        "version",
        a.version.as_ref().map(|t| t.as_str()),
        MAX_VERSION_CHARS,
    )?;
    apply(app, &mut r, &a.settings()).await?;
    r.updated_at = now_ms();
    let moved = r.endpoint_path != old_path;
    save(app, r).await?;
    if moved {
        app.services().activity.close_instance(id);
    }
    Ok(done(format!("inbound server \"{id}\" updated")))
}

/// `inbound.remove`
pub async fn remove(app: &Arc<App>, id: &str) -> Result<Value, Refusal> {
    record(app, id)?;
    app.remove_instance(id)
        .await
        .map_err(|e| format!("could not remove inbound {id:?}: {e:#}"))?;
    app.services().activity.close_instance(id);
    if app.credentials.resolve(&inbound_name(id)).is_some() {
        app.credentials
            .set(&inbound_name(id), None)
            .await
            .map_err(|e| {
                format!("inbound {id:?} was removed but its stored token was not: {e:#}")
            })?;
    }
    Ok(done(format!(
        "inbound server \"{id}\" removed (its tasks stay readable through /a2a/api/task)"
    )))
}

/// `inbound.enable` / `inbound.disable`
pub async fn set_enabled(app: &Arc<App>, id: &str, enabled: bool) -> Result<Value, Refusal> {
    let mut r = record(app, id)?;
    let word = if enabled { "enabled" } else { "disabled" };
    if r.enabled == enabled {
        return Ok(done(format!("inbound server \"{id}\" was already {word}")));
    }
    r.enabled = enabled;
    r.updated_at = now_ms();
    save(app, r).await?;
    if !enabled {
        app.services().activity.close_instance(id);
    }
    Ok(done(format!("inbound server \"{id}\" {word}")))
}

/// `inbound.setAuth`: the token goes to the credentials layer as `A2A_INBOUND_<ID>`.
pub async fn set_auth(app: &Arc<App>, a: &InboundSetAuth) -> Result<Value, Refusal> {
    let id = a.id.as_str();
    let mut r = record(app, id)?;
    let token = auth_change(a.token.as_ref(), a.clear, a.allow_weak, MIN_TOKEN_CHARS)?;
    let name = inbound_name(id);
    app.credentials
        .set(&name, token)
        .await
        .map_err(|e| format!("the token could not be stored: {e:#}"))?;
    r.auth_token_env = token.map(|_| name.clone());
    r.updated_at = now_ms();
    let keys_left = crate::identity::required(&r);
    save(app, r).await?;
    Ok(done(match token {
        Some(_) => format!(
            "inbound server \"{id}\": token set (stored as {name}); callers must send Authorization: Bearer <token>"
        ),
        None if keys_left => {
            format!("inbound server \"{id}\": token cleared; its API keys still guard the endpoint")
        }
        None => format!(
            "inbound server \"{id}\": token cleared; the endpoint accepts calls without a token"
        ),
    }))
}

/// `inbound.sendTest`: a SendMessage through the instance's own component.
pub async fn send_test(app: &Arc<App>, a: &SendTest) -> Result<Value, Refusal> {
    let id = a.id.as_str();
    let instance = assembled(app, id)?;
    let mut message = json!({ "messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{ "text": a.text.as_str() }] });
    if let Some(c) = &a.context_id {
        message["contextId"] = json!(c.as_str());
    }
    if let Some(s) = &a.skill {
        message["metadata"] = json!({ "skill": s.as_str() });
    }
    let result = super::call(app, &instance, "SendMessage", json!({ "message": message }))
        .await
        .map_err(|e| format!("sendTest on \"{id}\" was refused: {e}"))?;
    let (task_id, state) = match (result.get("task"), result.get("message")) {
        (Some(t), _) => (t["id"].clone(), t["status"]["state"].clone()),
        (None, Some(m)) => (m["taskId"].clone(), json!("TASK_STATE_COMPLETED")),
        _ => {
            return Err(format!(
                "sendTest on \"{id}\": the component answered neither a task nor a message"
            ));
        }
    };
    Ok(
        json!({ "ok": true, "message": format!("test message sent to \"{id}\": {}", state.as_str().unwrap_or("")), "taskId": task_id, "state": state, "result": result }),
    )
}
