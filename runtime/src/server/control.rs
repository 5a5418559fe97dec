//! The control API at `/a2a/api` (SPEC §2): reads and actions over the runtime's records.

use std::sync::Arc;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::{CONTROL_BODY_LIMIT, json as answer, plain, read_body};
use crate::app::App;
use crate::host::Body;
use crate::host::registry::Source;

/// Answers one control request (the caller is loopback).
pub async fn handle(app: &Arc<App>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().trim_end_matches('/').to_owned();
    match (req.method().clone(), path.as_str()) {
        (Method::GET, "/a2a/api") => answer(200, &snapshot(app)),
        (Method::GET, "/a2a/api/components") => answer(200, &components(app)),
        (Method::POST, "/a2a/api") => {
            let body = match read_body(req, CONTROL_BODY_LIMIT).await {
                Ok((_, body)) => body,
                Err(resp) => return resp,
            };
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Object(action)) => match act(app, &action).await {
                    Ok(v) => answer(200, &v),
                    Err(message) => answer(409, &json!({ "ok": false, "message": message })),
                },
                Ok(_) => plain(400, "the body must be a JSON object with an \"action\""),
                Err(e) => plain(400, &format!("the body is not valid JSON: {e}")),
            }
        }
        (Method::GET | Method::POST, p) if p == "/a2a/api" || p.starts_with("/a2a/api/") || p.starts_with("/a2a/ui") => {
            plain(404, &format!("no control resource at {p}"))
        }
        (m, _) => {
            let mut r = plain(405, &format!("{m} is not allowed on the control API; use GET or POST"));
            r.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("GET, POST"));
            r
        }
    }
}

fn snapshot(app: &App) -> Value {
    let inbounds: Vec<Value> = app
        .instances()
        .iter()
        .map(|i| {
            let r = &i.record;
            json!({
                "id": r.id, "name": r.name, "description": r.description, "version": r.version,
                "endpointPath": r.endpoint_path, "cardPath": format!("{}/agent-card.json", r.endpoint_path),
                "cardUrl": i.endpoint_url, "preset": r.preset, "authTokenEnv": r.auth_token_env, "enabled": r.enabled,
                "component": r.component, "maxBodyBytes": r.limits.max_body_bytes, "limits": r.limits,
                "skills": i.preset.skills.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "version": env!("CARGO_PKG_VERSION"), "inbounds": inbounds })
}

fn components(app: &App) -> Value {
    let instances = app.instances();
    let list: Vec<Value> = app
        .host
        .registry
        .all()
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "source": match &c.source { Source::Embedded => "embedded".to_owned(), Source::File(p) => p.display().to_string() },
                "sha256": c.sha256, "size": c.size, "loadedAt": c.loaded_at, "fromCache": c.from_cache,
                "instances": instances.iter().filter(|i| i.record.component == c.name).map(|i| i.record.id.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    let t = &app.host.instantiate_time;
    json!({
        "components": list,
        "compilations": app.host.registry.compilations.load(std::sync::atomic::Ordering::Relaxed),
        "instantiations": t.count(),
        "instantiateP50Us": t.quantile_us(0.5),
        "instantiateP99Us": t.quantile_us(0.99),
    })
}

fn field<'a>(action: &'a serde_json::Map<String, Value>, name: &str) -> Result<&'a str, String> {
    match action.get(name) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) | None => Err(format!("missing field \"{name}\"")),
        Some(other) => Err(format!("field \"{name}\" must be a string, not {other}")),
    }
}

async fn act(app: &Arc<App>, action: &serde_json::Map<String, Value>) -> Result<Value, String> {
    match field(action, "action")? {
        "component.reload" => {
            let name = field(action, "name")?;
            let loaded = app.host.registry.reload(name).await.map_err(|e| format!("component {name:?} was not swapped: {e:#}"))?;
            Ok(json!({ "ok": true, "message": format!("component \"{name}\" reloaded"), "sha256": loaded.sha256 }))
        }
        "inbound.update" => {
            let id = field(action, "id")?;
            let mut record = app.store_instance(id).ok_or_else(|| format!("unknown inbound id {id:?}"))?;
            if action.contains_key("component") {
                let component = field(action, "component")?;
                let loaded = app.host.registry.reload(component).await.map_err(|e| format!("component {component:?} was refused: {e:#}"))?;
                record.component = loaded.name.clone();
            }
            record.updated_at = crate::tasks::now_ms();
            app.save_instance(record).await.map_err(|e| format!("could not save inbound {id}: {e:#}"))?;
            Ok(json!({ "ok": true, "message": format!("inbound server \"{id}\" updated") }))
        }
        other => Err(format!("unknown action {other:?}")),
    }
}
