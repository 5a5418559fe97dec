//! The outbound actions (docs/outbound.md "Outbound connections"): connections to remote A2A
//! agents.

use std::collections::BTreeMap;
use std::sync::Arc;

use control_api::{
    Call, Discover, OutboundCreate, OutboundSetAuth, OutboundSetOAuth, OutboundSettings,
    OutboundUpdate, Refusal, auth_change, secret_name,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::done;
use crate::app::App;
use crate::clock::now_ms;
use crate::credentials::outbound_name;
use crate::outbound::context_for;
use crate::records::{ConnectionRecord, OAuthClient, SkillOverride};

async fn save(app: &App, r: ConnectionRecord) -> Result<(), Refusal> {
    let id = r.id.clone();
    app.outbound
        .save(r)
        .await
        .map_err(|e| format!("could not save outbound {id:?}: {e}"))
}

/// Saves, then (re)connects when enabled: a failed connect keeps the record and answers 409.
async fn save_and_connect(
    app: &Arc<App>,
    r: ConnectionRecord,
    done: String,
    extra: Value,
) -> Result<Value, Refusal> {
    let same = r.clone();
    replace_credentials(app, &same, r, done, extra).await
}

/// Saves `r`, which replaces `old`'s credentials, deletes the secrets `old` had stored that `r`
/// no longer names (after the save, so a failed save loses no secret), then (re)connects as
/// [`save_and_connect`].
async fn replace_credentials(
    app: &Arc<App>,
    old: &ConnectionRecord,
    r: ConnectionRecord,
    done: String,
    extra: Value,
) -> Result<Value, Refusal> {
    save(app, r.clone()).await?;
    forget_stored(app, old, &r).await?;
    let message = if r.enabled {
        app.outbound.connect(&r).await.map_err(|e| format!("{done}, but connecting failed: {e} (the connection is saved as failed; outbound.refresh retries)"))?;
        format!("{done}; connected")
    } else {
        app.outbound.disconnect(&r.id);
        done
    };
    let mut v = super::done(message);
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    Ok(v)
}

fn apply(
    r: &mut ConnectionRecord,
    f: &OutboundSettings,
    name: Option<&str>,
    app: &App,
) -> Result<(), Refusal> {
    if let Some(n) = name {
        a2a_protocol::bounds::check(
            "field \"name\"",
            n.trim(),
            a2a_protocol::bounds::MAX_NAME_CHARS,
        )?;
        r.name = n.trim().to_owned();
    }
    if let Some(p) = &f.preset {
        if !app.presets().iter().any(|x| x.id == p.as_str()) {
            return Err(format!("unknown preset {:?}", p.as_str()));
        }
        r.preset = Some(p.0.clone());
    }
    if let Some(t) = f.timeout_ms {
        r.timeout_ms = t.0;
    }
    if let Some(list) = &f.disabled_skills {
        r.disabled_skills = list.0.clone();
    }
    if let Some(a) = f.allow_private {
        r.allow_private = a.0;
    }
    if let Some(o) = &f.skill_overrides {
        r.skill_overrides = serde_json::from_value::<BTreeMap<String, SkillOverride>>(Value::Object(o.0.clone()))
            .map_err(|e| format!("field \"skillOverrides\": {e} (expected {{\"<skill id>\": {{\"name\"?, \"description\"?}}}})"))?;
    }
    Ok(())
}

fn card_url(url: &str) -> Result<String, Refusal> {
    crate::records::check_card_url(url).map_err(|e| format!("field \"agentCardUrl\" {e}"))
}

/// `outbound.create`
pub async fn create(app: &Arc<App>, a: &OutboundCreate) -> Result<Value, Refusal> {
    let name = a.name.as_str().trim().to_owned();
    let now = now_ms();
    let id = crate::instances::new_id(&name);
    let mut r = ConnectionRecord {
        id: id.clone(),
        agent_card_url: card_url(a.agent_card_url.as_str())?,
        enabled: a.enabled.is_none_or(|e| e.0),
        timeout_ms: crate::records::DEFAULT_TIMEOUT_MS,
        created_at: now,
        updated_at: now,
        ..ConnectionRecord::default()
    };
    if let Some(env) = &a.bearer_token_env {
        r.bearer_token_env = Some(secret_name("bearerTokenEnv", env.as_str())?);
    }
    apply(&mut r, &a.settings(), Some(&name), app)?;
    save_and_connect(
        app,
        r,
        format!("outbound connection {name:?} created"),
        json!({ "id": id }),
    )
    .await
}

/// `outbound.update` (never the card URL)
pub async fn update(app: &Arc<App>, a: &OutboundUpdate) -> Result<Value, Refusal> {
    let id = a.id.as_str();
    let mut r = app.outbound.record(id)?;
    if a.agent_card_url.as_ref().is_some_and(|v| !v.is_null()) {
        return Err(
            "outbound.update never changes agentCardUrl: remove the connection and create it again"
                .into(),
        );
    }
    apply(
        &mut r,
        &a.settings(),
        a.name.as_ref().map(|n| n.as_str()),
        app,
    )?;
    r.updated_at = now_ms();
    save_and_connect(app, r, format!("outbound \"{id}\" updated"), json!({})).await
}

/// `outbound.remove`
pub async fn remove(app: &Arc<App>, id: &str) -> Result<Value, Refusal> {
    let r = app.outbound.record(id)?;
    app.outbound
        .remove(id)
        .await
        .map_err(|e| format!("could not remove outbound {id:?}: {e}"))?;
    forget_stored(app, &r, &ConnectionRecord::default())
        .await
        .map_err(|e| format!("outbound {id:?} was removed but {e}"))?;
    Ok(done(format!("outbound \"{id}\" removed")))
}

/// The name a connection's client secret is stored under when given to `outbound.setOAuth`.
fn stored_client_secret(id: &str) -> String {
    format!("{}_CLIENT_SECRET", outbound_name(id))
}

/// The secrets `r` names (its token's, its client secret's).
fn secrets(r: &ConnectionRecord) -> [Option<&str>; 2] {
    [
        r.bearer_token_env.as_deref(),
        r.oauth.as_ref().map(|c| c.client_secret_env.as_str()),
    ]
}

/// Deletes the secrets the control API stored for `old` (its token, its client secret) that
/// `new` does not name; secrets the operator named stay.
async fn forget_stored(
    app: &App,
    old: &ConnectionRecord,
    new: &ConnectionRecord,
) -> Result<(), Refusal> {
    let (had, has) = (secrets(old), secrets(new));
    for own in [outbound_name(&old.id), stored_client_secret(&old.id)] {
        let named = Some(own.as_str());
        if had.contains(&named) && !has.contains(&named) {
            app.credentials
                .set(&own, None)
                .await
                .map_err(|e| format!("its stored secret {own} could not be deleted: {e:#}"))?;
        }
    }
    Ok(())
}

/// `outbound.enable` / `outbound.disable`
pub async fn set_enabled(app: &Arc<App>, id: &str, enabled: bool) -> Result<Value, Refusal> {
    let mut r = app.outbound.record(id)?;
    r.enabled = enabled;
    r.updated_at = now_ms();
    let word = if enabled { "enabled" } else { "disabled" };
    save_and_connect(app, r, format!("outbound \"{id}\" {word}"), json!({})).await
}

/// `outbound.refresh`
pub async fn refresh(app: &Arc<App>, id: &str) -> Result<Value, Refusal> {
    let r = app.outbound.record(id)?;
    if !r.enabled {
        return Err(format!(
            "outbound \"{id}\" is disabled; enable it to connect"
        ));
    }
    save_and_connect(app, r, format!("outbound \"{id}\" refreshed"), json!({})).await
}

/// `outbound.setAuth`: the token goes to the credentials layer as `A2A_OUTBOUND_<ID>`.
pub async fn set_auth(app: &Arc<App>, a: &OutboundSetAuth) -> Result<Value, Refusal> {
    let id = a.id.as_str();
    let old = app.outbound.record(id)?;
    let mut r = old.clone();
    // The remote decides its tokens' strength: no minimum length here.
    let token = auth_change(a.token.as_ref(), a.clear, None, 1)?;
    let name = outbound_name(id);
    app.credentials
        .set(&name, token)
        .await
        .map_err(|e| format!("the token could not be stored: {e:#}"))?;
    // A static token replaces an OAuth client.
    r.oauth = None;
    r.bearer_token_env = token.map(|_| name.clone());
    r.updated_at = now_ms();
    let done = match token {
        Some(_) => format!("outbound \"{id}\": token set (stored as {name})"),
        None => format!("outbound \"{id}\": token cleared"),
    };
    replace_credentials(app, &old, r, done, json!({})).await
}

/// `outbound.setOAuth`: the connection gets its bearer tokens from an OAuth 2.0 token endpoint
/// (client credentials), replacing a static token; `clear` removes the client.
pub async fn set_oauth(app: &Arc<App>, a: &OutboundSetOAuth) -> Result<Value, Refusal> {
    let id = a.id.as_str();
    let old = app.outbound.record(id)?;
    let mut r = old.clone();
    let done = if a.clear.is_some_and(|c| c.0) {
        if r.oauth.is_none() {
            return Err(format!("outbound {id:?} has no OAuth client"));
        }
        r.oauth = None;
        format!("outbound \"{id}\": OAuth client removed; it sends no token")
    } else {
        let (Some(token_url), Some(client_id)) = (&a.token_url, &a.client_id) else {
            return Err("set tokenUrl and clientId (or clear: true to remove the client)".into());
        };
        let secret_env = match (&a.client_secret, &a.client_secret_env) {
            (Some(_), Some(_)) => {
                return Err("give either clientSecret or clientSecretEnv, not both".into());
            }
            (None, None) => {
                return Err("give clientSecret (stored by the runtime) or clientSecretEnv (the name of a secret already set)".into());
            }
            (None, Some(name)) => secret_name("clientSecretEnv", name.as_str())?,
            (Some(_), None) => stored_client_secret(id),
        };
        let c = OAuthClient {
            token_url: token_url.as_str().trim().to_owned(),
            client_id: client_id.as_str().to_owned(),
            client_secret_env: secret_env.clone(),
            scopes: a.scopes.as_ref().map(|n| n.0.clone()).unwrap_or_default(),
        };
        c.check()?;
        if let Some(secret) = &a.client_secret {
            let secret = auth_change(Some(secret), None, None, 1)
                .map_err(|e| e.replace("\"token\"", "\"clientSecret\""))?;
            app.credentials
                .set(&secret_env, secret)
                .await
                .map_err(|e| format!("the client secret could not be stored: {e:#}"))?;
        }
        // An OAuth client replaces a static token.
        r.bearer_token_env = None;
        let done = format!(
            "outbound \"{id}\": bearer tokens from {} as client {} (secret {secret_env})",
            c.token_url, c.client_id
        );
        r.oauth = Some(c);
        done
    };
    r.updated_at = now_ms();
    replace_credentials(app, &old, r, done, json!({})).await
}

/// `outbound.discover`: the remote card's preview, nothing created.
pub async fn discover(app: &Arc<App>, a: &Discover) -> Result<Value, Refusal> {
    let url = card_url(a.agent_card_url.as_str())?;
    let token = a
        .token
        .as_ref()
        .filter(|t| !t.0.is_empty())
        .map(|t| t.0.clone());
    let preview = app
        .outbound
        .discover(&url, token, a.allow_private.is_some_and(|p| p.0))
        .await
        .map_err(|e| format!("cannot discover {url}: {e}"))?;
    Ok(
        json!({ "ok": true, "message": format!("discovered {}", preview["name"].as_str().unwrap_or("an agent")), "preview": preview }),
    )
}

/// `outbound.call`: the tool's text result.
pub async fn call(app: &Arc<App>, a: &Call) -> Result<Value, Refusal> {
    let id = a.id.as_str().to_owned();
    let task_id = a.task_id.as_ref().map(|t| t.0.clone());
    let context = a
        .context_id
        .as_ref()
        .map_or_else(|| context_for(&id, "control-api"), |c| c.0.clone());
    // The call runs on its own task: when the caller goes away, the guard aborts it and the
    // client component still gets to cancel the remote task.
    let abort = CancellationToken::new();
    let _guard = abort.clone().drop_guard();
    let (outbound, skill, prompt, which) = (
        app.outbound.clone(),
        a.skill.0.clone(),
        a.prompt.0.clone(),
        id.clone(),
    );
    let run = tokio::spawn(async move {
        outbound
            .call(&which, &skill, &prompt, task_id, context, abort)
            .await
    });
    let result = run.await.map_err(|e| format!("the call failed: {e}"))??;
    Ok(json!({ "ok": true, "message": format!("outbound \"{id}\" answered"), "result": result }))
}
