//! The API-key actions (docs/auth.md "Authentication"): named clients of an instance, each with its
//! own key, shown once at creation; the record keeps only its hash, so a revocation reaches every
//! node with the record.

use std::sync::Arc;

use control_api::{KeyCreate, KeyRevoke, Refusal};
use serde_json::{Value, json};

use super::done;
use super::inbound::{assembled, record, save};
use crate::app::App;
use crate::clock::now_ms;
use crate::identity::api_keys::{self, MAX_KEYS};

/// `inbound.keys.create`: the key, in the answer only.
pub async fn create(app: &Arc<App>, a: &KeyCreate) -> Result<Value, Refusal> {
    let (id, name) = (a.id.as_str(), a.name.as_str());
    api_keys::check_name(name)?;
    let mut r = record(app, id)?;
    match r.api_keys.iter().find(|k| k.name == name) {
        Some(k) if k.revoked_at.is_some() => {
            return Err(format!(
                "a revoked client of inbound {id:?} was named {name:?}, and its tasks stay its own: pick another name"
            ));
        }
        Some(_) => {
            return Err(format!(
                "inbound {id:?} already has a key named {name:?}: pick another name (or revoke it and use a new name)"
            ));
        }
        None => {}
    }
    if r.api_keys.len() >= MAX_KEYS {
        return Err(format!(
            "inbound {id:?} has {MAX_KEYS} keys, the most it keeps: revoke one first"
        ));
    }
    let skills = a.skills.clone().map(|s| s.0).unwrap_or_default();
    if !skills.is_empty() {
        let announced = assembled(app, id)?.announced_skills();
        if let Some(unknown) = skills.iter().find(|s| !announced.contains(s)) {
            return Err(format!(
                "inbound {id:?} announces no skill {unknown:?} (it announces {})",
                announced.join(", ")
            ));
        }
    }
    let key = api_keys::new_key();
    let rate = a.rate_per_second.map(|r| r.0 as f64);
    r.api_keys
        .push(api_keys::record(name, &key, skills, rate, now_ms()));
    r.updated_at = now_ms();
    save(app, r).await?;
    Ok(json!({
        "ok": true,
        "message": format!("inbound {id:?}: key {name:?} created; it is shown this once: the client sends it as X-API-Key (or Authorization: Bearer)"),
        "name": name,
        "key": key,
    }))
}

/// `inbound.keys.list`: the clients, never their keys or hashes.
pub fn list(app: &App, id: &str) -> Result<Value, Refusal> {
    let r = record(app, id)?;
    Ok(json!({ "ok": true, "keys": super::views::keys(&r) }))
}

/// `inbound.keys.revoke`: the key stops working at once (on every node at its next look). The
/// instance's last credential goes only when asked to open it.
pub async fn revoke(app: &Arc<App>, a: &KeyRevoke) -> Result<Value, Refusal> {
    let (id, name) = (a.id.as_str(), a.name.as_str());
    let mut r = record(app, id)?;
    let now = now_ms();
    let Some(key) = r
        .api_keys
        .iter_mut()
        .find(|k| k.name == name && k.revoked_at.is_none())
    else {
        return Err(format!(
            "inbound {id:?} has no working key named {name:?} (inbound.keys.list shows its keys)"
        ));
    };
    key.revoked_at = Some(now);
    key.hash.clear();
    if !crate::identity::required(&r) && !a.open.is_some_and(|o| o.0) {
        return Err(format!(
            "key {name:?} is the last credential of inbound {id:?}: without it the instance takes calls from anyone, who then share the token's principal (its tasks). Create another key or set a token first, or pass \"open\": true to open it"
        ));
    }
    r.updated_at = now;
    save(app, r).await?;
    Ok(done(format!("inbound {id:?}: key {name:?} revoked")))
}
