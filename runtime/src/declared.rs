//! The configuration's declarations reconciled with the store on every start: each declared
//! instance and connection is created when missing, and every field it declares wins. An
//! invalid declaration refuses the start, naming the file, the entry and the field.

use crate::clock::now_ms;
use crate::config::Config;
use crate::instances;
use crate::store::Store;

/// Where a declaration sits, for errors: `config <file>: [[kind]] entry <n> ("<name>")`.
fn declared_at(config: &Config, kind: &str, index: usize, name: &str) -> String {
    let file = config.source.as_ref().map_or_else(|| "the configuration".to_owned(), |p| format!("config {}", p.display()));
    format!("{file}: [[{kind}]] entry {} ({name:?})", index + 1)
}

/// Reconciles the declared instances (on a first start without any, `demo`);
/// `component_exists` tells whether a component name is loaded.
pub async fn seed_instances(config: &Config, store: &dyn Store, component_exists: impl Fn(&str) -> bool) -> anyhow::Result<()> {
    let mut all = store.instances().await?;
    let now = now_ms();
    let mut changed = Vec::new();
    for (index, decl) in config.instances.iter().enumerate() {
        let at = declared_at(config, "instances", index, &decl.name);
        let stored = match &decl.id {
            Some(id) => all.iter().position(|r| &r.id == id),
            None => all.iter().position(|r| r.name == decl.name),
        };
        let record = instances::reconcile(decl, stored.map(|i| &all[i]), config, &component_exists, now).map_err(|(field, why)| anyhow::anyhow!("{at}: field {field:?}: {why}"))?;
        let others = all.iter().filter(|o| o.id != record.id).map(|o| (o.id.as_str(), o.endpoint_path.as_str()));
        instances::check_endpoint_free(&record.endpoint_path, others).map_err(|why| anyhow::anyhow!("{at}: field \"endpointPath\": {why}"))?;
        match stored {
            Some(i) if all[i] == record => continue,
            Some(i) => all[i] = record.clone(),
            None => all.push(record.clone()),
        }
        changed.push((stored.is_some(), record));
    }
    if all.is_empty() && config.instances.is_empty() {
        changed.push((false, instances::demo(config, now)));
    }
    for (existed, record) in changed {
        tracing::info!(id = %record.id, "{}", if existed { "updated inbound instance from the configuration" } else { "created inbound instance" });
        store.put_instance(record).await?;
    }
    Ok(())
}

/// Reconciles the declared outbound connections, like instances.
pub async fn seed_connections(config: &Config, store: &dyn Store) -> anyhow::Result<()> {
    let existing = store.connections().await?;
    let now = now_ms();
    for (index, d) in config.connections.iter().enumerate() {
        let stored = match &d.id {
            Some(id) => existing.iter().find(|r| &r.id == id),
            None => existing.iter().find(|r| r.name == d.name),
        };
        let record = crate::outbound::reconcile(d, stored, config, now)
            .map_err(|(field, why)| anyhow::anyhow!("{}: field {field:?}: {why}", declared_at(config, "connections", index, &d.name)))?;
        if stored == Some(&record) {
            continue;
        }
        tracing::info!(id = %record.id, "{} outbound connection from the configuration", if stored.is_some() { "updated" } else { "created" });
        store.put_connection(record).await?;
    }
    Ok(())
}
