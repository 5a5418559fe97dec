//! The configuration's declarations reconciled with the store on every start: each declared
//! instance and connection is created when missing, and every field it declares wins. An
//! invalid declaration refuses the start, naming the file, the entry and the field.

use std::path::Path;

use crate::clock::now_ms;
use crate::config::{Config, ConnectionDecl, InstanceDecl};
use crate::credentials::check_secret_name;
use crate::instances::{self, DEFAULT_COMPONENT, default_preset, new_id, normalize_endpoint};
use crate::records::{
    ConnectionRecord, DEFAULT_TIMEOUT_MS, InstanceRecord, MAX_TIMEOUT_MS, check_card_url,
};
use crate::store::Records;

/// Where a declaration sits, for errors: `config <file>: [[kind]] entry <n> ("<name>")`.
fn declared_at(config: &Config, kind: &str, index: usize, name: &str) -> String {
    let file = config.source.as_ref().map_or_else(
        || "the configuration".to_owned(),
        |p| format!("config {}", p.display()),
    );
    format!("{file}: [[{kind}]] entry {} ({name:?})", index + 1)
}

/// Reconciles the declared instances (on a first start without any, `demo`);
/// `component_exists` tells whether a component name is loaded.
pub async fn seed_instances(
    config: &Config,
    store: &dyn Records,
    component_exists: impl Fn(&str) -> bool,
) -> anyhow::Result<()> {
    plan_instances(config, store, component_exists)
        .await?
        .write(store)
        .await
}

/// The instance records once the declarations are applied, and the writes that get there.
pub struct InstancePlan {
    /// Every instance record, as stored after [`InstancePlan::write`].
    pub records: Vec<InstanceRecord>,
    /// The records to write, each with whether it existed.
    changed: Vec<(bool, InstanceRecord)>,
}

impl InstancePlan {
    /// Writes the changed records, logging each.
    pub async fn write(self, store: &dyn Records) -> anyhow::Result<()> {
        for (existed, record) in self.changed {
            tracing::info!(id = %record.id, "{}", if existed { "updated inbound instance from the configuration" } else { "created inbound instance" });
            store.put_instance(record).await?;
        }
        Ok(())
    }
}

/// What [`seed_instances`] would write, checked whole and written nowhere.
pub async fn plan_instances(
    config: &Config,
    store: &dyn Records,
    component_exists: impl Fn(&str) -> bool,
) -> anyhow::Result<InstancePlan> {
    let mut all = store.instances().await?;
    let now = now_ms();
    let mut changed = Vec::new();
    for (index, decl) in config.instances.iter().enumerate() {
        let at = declared_at(config, "instances", index, &decl.name);
        let stored = match &decl.id {
            Some(id) => all.iter().position(|r| &r.id == id),
            None => all.iter().position(|r| r.name == decl.name),
        };
        let record = instance(
            decl,
            stored.map(|i| &all[i]),
            config,
            &component_exists,
            now,
        )
        .map_err(|(field, why)| anyhow::anyhow!("{at}: field {field:?}: {why}"))?;
        let others = all
            .iter()
            .filter(|o| o.id != record.id)
            .map(|o| (o.id.as_str(), o.endpoint_path.as_str()));
        instances::check_endpoint_free(&record.endpoint_path, others)
            .map_err(|why| anyhow::anyhow!("{at}: field \"endpointPath\": {why}"))?;
        match stored {
            Some(i) if all[i] == record => continue,
            Some(i) => all[i] = record.clone(),
            None => all.push(record.clone()),
        }
        changed.push((stored.is_some(), record));
    }
    if all.is_empty() && config.instances.is_empty() {
        let demo = demo(config, now);
        all.push(demo.clone());
        changed.push((false, demo));
    }
    Ok(InstancePlan {
        records: all,
        changed,
    })
}

/// What `a2a-edge config check` finds: the declarations reconciled against an empty store as a
/// first start would, components named being built in or a `.wasm` in `components_dir`, and
/// the TLS files read. Answers the numbers of declared instances and connections.
pub async fn check(config: &Config, components_dir: &Path) -> anyhow::Result<(usize, usize)> {
    let store = crate::store::memory::MemoryStore::default();
    let exists = |name: &str| {
        crate::engine::registry::EMBEDDED
            .iter()
            .any(|(n, _)| *n == name)
            || components_dir.join(format!("{name}.wasm")).is_file()
    };
    seed_instances(config, &store, exists).await?;
    seed_connections(config, &store).await?;
    if let Some(tls) = &config.tls {
        crate::tls::Tls::load(tls.clone())?;
    }
    Ok((config.instances.len(), config.connections.len()))
}

/// Reconciles the declared outbound connections, like instances.
pub async fn seed_connections(config: &Config, store: &dyn Records) -> anyhow::Result<()> {
    let existing = store.connections().await?;
    let now = now_ms();
    for (index, d) in config.connections.iter().enumerate() {
        let stored = match &d.id {
            Some(id) => existing.iter().find(|r| &r.id == id),
            None => existing.iter().find(|r| r.name == d.name),
        };
        let record = connection(d, stored, config, now).map_err(|(field, why)| {
            anyhow::anyhow!(
                "{}: field {field:?}: {why}",
                declared_at(config, "connections", index, &d.name)
            )
        })?;
        if stored == Some(&record) {
            continue;
        }
        tracing::info!(id = %record.id, "{} outbound connection from the configuration", if stored.is_some() { "updated" } else { "created" });
        store.put_connection(record).await?;
    }
    Ok(())
}

/// A declaration's field that is wrong, and why.
pub type DeclError = (&'static str, String);

/// A declared `name`, trimmed; never empty.
pub fn declared_name(name: &str) -> Result<String, DeclError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(("name", "must not be empty".into()));
    }
    a2a_protocol::bounds::check("it", name, a2a_protocol::bounds::MAX_NAME_CHARS)
        .map_err(|e| ("name", e))?;
    Ok(name.to_owned())
}

/// A new record for a declared instance, with the defaults of every field.
fn new_instance(d: &InstanceDecl, config: &Config, now: u64) -> Result<InstanceRecord, DeclError> {
    let id = d.id.clone().unwrap_or_else(|| new_id(&d.name));
    if d.id.is_some() {
        crate::instances::check_id(&id).map_err(|e| ("id", e))?;
    }
    let preset = default_preset(&config.all_presets());
    Ok(InstanceRecord {
        name: d.name.clone(),
        version: "0.1.0".into(),
        ..InstanceRecord::new(&id, preset, DEFAULT_COMPONENT, config.limits, now)
    })
}

/// A declared preset that exists.
fn known_preset(config: &Config, p: &str) -> Result<String, DeclError> {
    let presets = config.all_presets();
    if presets.iter().any(|x| x.id == p) {
        return Ok(p.to_owned());
    }
    let ids: Vec<&str> = presets.iter().map(|x| x.id.as_str()).collect();
    Err((
        "preset",
        format!("unknown preset {p:?} (presets: {})", ids.join(", ")),
    ))
}

/// The record a declared instance should have: `stored` (the record it matches, if any) with
/// every field the declaration declares applied, or a new record. `component_exists` tells
/// whether a component name is loaded.
pub fn instance(
    d: &InstanceDecl,
    stored: Option<&InstanceRecord>,
    config: &Config,
    component_exists: impl Fn(&str) -> bool,
    now: u64,
) -> Result<InstanceRecord, DeclError> {
    use a2a_protocol::bounds::{MAX_DESCRIPTION_CHARS, MAX_VERSION_CHARS, check};
    let mut r = match stored {
        Some(r) => r.clone(),
        None => new_instance(d, config, now)?,
    };
    let before = r.clone();
    r.name = declared_name(&d.name)?;
    if let Some(v) = &d.description {
        check("it", v, MAX_DESCRIPTION_CHARS).map_err(|e| ("description", e))?;
        r.description = v.clone();
    }
    if let Some(v) = &d.version {
        check("it", v, MAX_VERSION_CHARS).map_err(|e| ("version", e))?;
        r.version = v.clone();
    }
    if let Some(p) = &d.endpoint_path {
        r.endpoint_path = normalize_endpoint(p).map_err(|e| ("endpointPath", e))?;
    }
    if let Some(p) = &d.preset {
        r.preset = known_preset(config, p)?;
    }
    if let Some(name) = &d.auth_token_env {
        r.auth_token_env = Some(check_secret_name(name).map_err(|e| ("authTokenEnv", e))?);
    }
    if let Some(o) = &d.oidc {
        o.check().map_err(|e| ("oidc", e))?;
        crate::identity::oidc::check_https(o).map_err(|e| ("oidc", e))?;
        r.oidc = Some(o.clone());
    }
    if let Some(m) = &d.mtls {
        config.client_certificates().map_err(|e| ("mtls", e))?;
        r.mtls = Some(m.clone());
    }
    r.enabled = d.enabled.unwrap_or(r.enabled);
    r.push_notifications = d.push_notifications.unwrap_or(r.push_notifications);
    r.compat03 = d.compat03.unwrap_or(r.compat03);
    r.reuse_instances = d.reuse_instances.unwrap_or(r.reuse_instances);
    if let Some(c) = &d.component {
        if !component_exists(c) {
            let why = format!(
                "no component {c:?} is loaded (built in: {DEFAULT_COMPONENT}; others come from the data directory's components/ folder)"
            );
            return Err(("component", why));
        }
        r.component = c.clone();
    }
    if let Some(l) = d.limits {
        l.check().map_err(|e| ("limits", e))?;
        r.limits = l;
    }
    if stored.is_some() && r != before {
        r.updated_at = now;
    }
    Ok(r)
}

/// The instance a newcomer gets on a first start without config: `demo` on the echo preset.
pub fn demo(config: &Config, now: u64) -> InstanceRecord {
    let decl = InstanceDecl {
        id: Some("demo".into()),
        name: "demo".into(),
        description: Some("Echo agent: replies with what you send.".into()),
        ..InstanceDecl::default()
    };
    instance(&decl, None, config, |_| true, now).expect("the demo declaration is valid")
}

/// The record a declared connection should have: `stored` with every declared field applied,
/// or a new record.
pub fn connection(
    d: &ConnectionDecl,
    stored: Option<&ConnectionRecord>,
    config: &Config,
    now: u64,
) -> Result<ConnectionRecord, DeclError> {
    let mut r = stored.cloned().unwrap_or_else(|| ConnectionRecord {
        id: d.id.clone().unwrap_or_else(|| new_id(&d.name)),
        enabled: true,
        timeout_ms: DEFAULT_TIMEOUT_MS,
        created_at: now,
        updated_at: now,
        ..ConnectionRecord::default()
    });
    let before = r.clone();
    r.name = declared_name(&d.name)?;
    r.agent_card_url = check_card_url(&d.agent_card_url).map_err(|e| ("agentCardUrl", e))?;
    if let Some(name) = &d.bearer_token_env {
        r.bearer_token_env = Some(check_secret_name(name).map_err(|e| ("bearerTokenEnv", e))?);
    }
    if let Some(c) = &d.oauth {
        if d.bearer_token_env.is_some() {
            return Err((
                "oauth",
                "takes the place of bearerTokenEnv: declare one of them".into(),
            ));
        }
        c.check().map_err(|e| ("oauth", e))?;
        r.oauth = Some(c.clone());
        r.bearer_token_env = None;
    }
    if let Some(p) = &d.preset {
        r.preset = Some(known_preset(config, p)?);
    }
    if let Some(e) = d.enabled {
        r.enabled = e;
    }
    if let Some(t) = d.timeout_ms {
        if !(100..=MAX_TIMEOUT_MS).contains(&t) {
            return Err(("timeoutMs", format!("must be from 100 to {MAX_TIMEOUT_MS}")));
        }
        r.timeout_ms = t;
    }
    if let Some(list) = &d.disabled_skills {
        r.disabled_skills = list.clone();
    }
    if let Some(o) = &d.skill_overrides {
        r.skill_overrides = o.clone();
    }
    if let Some(a) = d.allow_private {
        r.allow_private = a;
    }
    if stored.is_some() && r != before {
        r.updated_at = now;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_win_for_the_fields_they_declare() {
        let config = Config::default();
        let decl = InstanceDecl {
            id: Some("bot".into()),
            name: "Bot".into(),
            ..InstanceDecl::default()
        };
        let created = instance(&decl, None, &config, |_| true, 1).unwrap();
        assert_eq!(
            (
                created.endpoint_path.as_str(),
                created.preset.as_str(),
                created.enabled
            ),
            ("/a2a/bot", "echo", true)
        );
        // The control API changed it; a declaration that says nothing about those fields keeps them.
        let mut stored = created.clone();
        stored.description = "from the API".into();
        stored.enabled = false;
        assert_eq!(
            instance(&decl, Some(&stored), &config, |_| true, 2).unwrap(),
            stored,
            "nothing declared changed: no write"
        );
        let edited = InstanceDecl {
            preset: Some("scripted".into()),
            enabled: Some(true),
            ..decl.clone()
        };
        let r = instance(&edited, Some(&stored), &config, |_| true, 3).unwrap();
        assert_eq!(
            (
                r.preset.as_str(),
                r.enabled,
                r.description.as_str(),
                r.updated_at
            ),
            ("scripted", true, "from the API", 3)
        );
    }

    #[test]
    fn invalid_declarations_name_the_field() {
        let config = Config::default();
        let field = |d: InstanceDecl| {
            instance(&d, None, &config, |c| c == DEFAULT_COMPONENT, 1)
                .unwrap_err()
                .0
        };
        let base = InstanceDecl {
            name: "x".into(),
            ..InstanceDecl::default()
        };
        assert_eq!(
            field(InstanceDecl {
                preset: Some("nope".into()),
                ..base.clone()
            }),
            "preset"
        );
        assert_eq!(
            field(InstanceDecl {
                component: Some("nope".into()),
                ..base.clone()
            }),
            "component"
        );
        assert_eq!(
            field(InstanceDecl {
                endpoint_path: Some("/a2a/../api".into()),
                ..base.clone()
            }),
            "endpointPath"
        );
        assert_eq!(
            field(InstanceDecl {
                auth_token_env: Some("1 bad".into()),
                ..base.clone()
            }),
            "authTokenEnv"
        );
        assert_eq!(
            field(InstanceDecl {
                id: Some("a/b".into()),
                ..base.clone()
            }),
            "id"
        );
        assert_eq!(
            field(InstanceDecl {
                limits: Some(crate::records::Limits {
                    keep_alive_ms: 1,
                    ..Default::default()
                }),
                ..base.clone()
            }),
            "limits"
        );
    }
}
