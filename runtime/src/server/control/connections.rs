//! The outbound actions of SPEC §2.2: connections to remote A2A agents.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::outbound::{self, connect, record};
use crate::store::{ConnectionRecord, SkillOverride, Store, settled};
use crate::tasks::now_ms;
use control_fields::{Fields, Refusal, secret_name};

async fn save(app: &App, r: ConnectionRecord) -> Result<(), Refusal> {
    let id = r.id.clone();
    settled(app.store.put_connection(r)).await.map_err(|e| format!("could not save outbound {id:?}: {e}"))
}

/// Saves, then (re)connects when enabled: a failed connect keeps the record and answers 409.
async fn save_and_connect(app: &Arc<App>, r: ConnectionRecord, done: String, extra: Value) -> Result<Value, Refusal> {
    save(app, r.clone()).await?;
    let message = if r.enabled {
        connect(app, &r).await.map_err(|e| format!("{done}, but connecting failed: {e} (the connection is saved as failed; outbound.refresh retries)"))?;
        format!("{done}; connected")
    } else {
        app.outbound.disconnect(&r.id);
        done
    };
    let mut v = json!({ "ok": true, "message": message });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    Ok(v)
}

fn apply(r: &mut ConnectionRecord, f: &Fields<'_>, app: &App) -> Result<(), Refusal> {
    if let Some(n) = f.opt_nonempty("name")? {
        a2a_protocol::bounds::check("field \"name\"", n.trim(), a2a_protocol::bounds::MAX_NAME_CHARS)?;
        r.name = n.trim().to_owned();
    }
    if let Some(p) = f.opt_nonempty("preset")? {
        if !app.config.all_presets().iter().any(|x| x.id == p) {
            return Err(format!("unknown preset {p:?}"));
        }
        r.preset = Some(p.to_owned());
    }
    if let Some(t) = f.opt_u64("timeoutMs", 100..=outbound::MAX_TIMEOUT_MS)? {
        r.timeout_ms = t;
    }
    if f.has("disabledSkills") {
        let list = f.0["disabledSkills"].as_array().ok_or("field \"disabledSkills\" must be a list of skill ids")?;
        r.disabled_skills = list.iter().map(|v| v.as_str().map(str::to_owned).ok_or("field \"disabledSkills\" must be a list of strings")).collect::<Result<_, _>>()?;
    }
    if let Some(a) = f.opt_bool("allowPrivate")? {
        r.allow_private = a;
    }
    if let Some(o) = f.opt_object("skillOverrides")? {
        r.skill_overrides = serde_json::from_value::<BTreeMap<String, SkillOverride>>(Value::Object(o.clone()))
            .map_err(|e| format!("field \"skillOverrides\": {e} (expected {{\"<skill id>\": {{\"name\"?, \"description\"?}}}})"))?;
    }
    Ok(())
}

fn card_url(f: &Fields<'_>) -> Result<String, Refusal> {
    outbound::check_card_url(f.str("agentCardUrl")?).map_err(|e| format!("field \"agentCardUrl\" {e}"))
}

/// `outbound.create`
pub async fn create(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let name = f.str("name")?.trim().to_owned();
    a2a_protocol::bounds::check("field \"name\"", &name, a2a_protocol::bounds::MAX_NAME_CHARS)?;
    let url = card_url(f)?;
    let now = now_ms();
    let id = crate::instances::new_id(&name);
    let mut r = ConnectionRecord {
        id: id.clone(),
        name: name.clone(),
        agent_card_url: url,
        bearer_token_env: None,
        preset: None,
        enabled: f.opt_bool("enabled")?.unwrap_or(true),
        timeout_ms: outbound::DEFAULT_TIMEOUT_MS,
        disabled_skills: Vec::new(),
        skill_overrides: BTreeMap::new(),
        allow_private: false,
        created_at: now,
        updated_at: now,
    };
    if f.has("bearerTokenEnv") {
        r.bearer_token_env = Some(secret_name("bearerTokenEnv", f.str("bearerTokenEnv")?)?);
    }
    apply(&mut r, f, app)?;
    save_and_connect(app, r, format!("outbound connection {name:?} created"), json!({ "id": id })).await
}

/// `outbound.update` (never the card URL)
pub async fn update(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let mut r = record(app, id)?;
    if f.has("agentCardUrl") {
        return Err("outbound.update never changes agentCardUrl: remove the connection and create it again".into());
    }
    apply(&mut r, f, app)?;
    r.updated_at = now_ms();
    save_and_connect(app, r, format!("outbound \"{id}\" updated"), json!({})).await
}

/// `outbound.remove`
pub async fn remove(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let r = record(app, id)?;
    settled(app.store.delete_connection(r.id.clone())).await.map_err(|e| format!("could not remove outbound {id:?}: {e}"))?;
    app.outbound.forget(id);
    let name = crate::credentials::outbound_name(id);
    if r.bearer_token_env.as_deref() == Some(name.as_str()) {
        app.credentials.set(&name, None).map_err(|e| format!("outbound {id:?} was removed but its stored token was not: {e:#}"))?;
    }
    Ok(json!({ "ok": true, "message": format!("outbound \"{id}\" removed") }))
}

/// `outbound.enable` / `outbound.disable`
pub async fn set_enabled(app: &Arc<App>, f: &Fields<'_>, enabled: bool) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let mut r = record(app, id)?;
    r.enabled = enabled;
    r.updated_at = now_ms();
    let word = if enabled { "enabled" } else { "disabled" };
    save_and_connect(app, r, format!("outbound \"{id}\" {word}"), json!({})).await
}

/// `outbound.refresh`
pub async fn refresh(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let r = record(app, id)?;
    if !r.enabled {
        return Err(format!("outbound \"{id}\" is disabled; enable it to connect"));
    }
    save_and_connect(app, r, format!("outbound \"{id}\" refreshed"), json!({})).await
}

/// `outbound.setAuth`: the token goes to the credentials layer as `A2A_OUTBOUND_<ID>`.
pub async fn set_auth(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let mut r = record(app, id)?;
    // The remote decides its tokens' strength: no minimum length here.
    let token = f.auth_change(1)?;
    let name = crate::credentials::outbound_name(id);
    app.credentials.set(&name, token).map_err(|e| format!("the token could not be stored: {e:#}"))?;
    r.bearer_token_env = token.map(|_| name.clone());
    r.updated_at = now_ms();
    let done = match token {
        Some(_) => format!("outbound \"{id}\": token set (stored as {name})"),
        None => format!("outbound \"{id}\": token cleared"),
    };
    save_and_connect(app, r, done, json!({})).await
}

/// `outbound.discover`: the remote card's preview, nothing created.
pub async fn discover(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let url = card_url(f)?;
    let token = f.opt_str("token")?.filter(|t| !t.is_empty()).map(str::to_owned);
    let preview = outbound::discover(app, &url, token, f.opt_bool("allowPrivate")?.unwrap_or(false)).await.map_err(|e| format!("cannot discover {url}: {e}"))?;
    Ok(json!({ "ok": true, "message": format!("discovered {}", preview["name"].as_str().unwrap_or("an agent")), "preview": preview }))
}

/// `outbound.call`: the tool's text result.
pub async fn call(app: &Arc<App>, f: &Fields<'_>) -> Result<Value, Refusal> {
    let id = f.str("id")?;
    let (skill, prompt) = (f.str("skill")?, f.str("prompt")?);
    let task_id = f.opt_nonempty("taskId")?.map(str::to_owned);
    let context = f.opt_nonempty("contextId")?.map_or_else(|| outbound::context_for(id, "control-api"), str::to_owned);
    // The call runs on its own task: when the caller goes away, the guard aborts it and the
    // client component still gets to cancel the remote task.
    let abort = CancellationToken::new();
    let _guard = abort.clone().drop_guard();
    let (app2, id2, skill, prompt) = (app.clone(), id.to_owned(), skill.to_owned(), prompt.to_owned());
    let run = tokio::spawn(async move { outbound::call(&app2, &id2, &skill, &prompt, task_id, context, abort).await });
    let result = run.await.map_err(|e| format!("the call failed: {e}"))??;
    Ok(json!({ "ok": true, "message": format!("outbound \"{id}\" answered"), "result": result }))
}
