//! SIGHUP: the config file read again and applied without a restart. The declarations
//! (`[[instances]]` with their limits, `[[connections]]`) are reconciled with the store as on a
//! start, the `[[presets]]` replace the running ones (new turns run on them, running turns
//! finish on theirs), and the instance table is swapped (in-flight requests keep the instances
//! they began with); TLS files are already taken up whenever they change. Settings read only at
//! start (listeners, storage, runtime, …) that differ from the ones in effect are named in the
//! log as waiting for a restart. A file that does not load or check, drops a preset an instance
//! runs on, or needs a larger agent pool changes nothing.

use anyhow::Context;
use serde_json::Value;
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::app::App;
use crate::config::Config;
use crate::sessions::preset::Preset;

/// Applies the declarations of the file the process was started with.
pub async fn reload(app: &App) -> anyhow::Result<()> {
    let path = app
        .config
        .source
        .as_deref()
        .context("serve was started without --config: there is no file to read again")?;
    let file = Config::load(path)?;
    // Only the declarations and presets change at run time: they are read against the
    // settings in effect.
    let mut next = app.config.clone();
    next.instances = file.instances.clone();
    next.connections = file.connections.clone();
    next.presets = file.presets.clone();
    // Checked whole first, so a bad entry further down leaves nothing half applied.
    crate::declared::check(&next, &app.data_dir.join("components")).await?;
    let presets = next.all_presets();
    let running = app.presets();
    let new_presets = *running != *presets;
    if new_presets {
        app.agents.fits(&presets)?;
    }
    let plan =
        crate::declared::plan_instances(&next, &*app.store, |c| app.host.registry.get(c).is_some())
            .await?;
    if let Some(r) = plan
        .records
        .iter()
        .find(|r| !presets.iter().any(|p| p.id == r.preset))
    {
        anyhow::bail!(
            "instance {:?} runs on preset {:?}, which the file no longer has: move the instance to another preset first (a2a-edge inbound update {} --preset ID)",
            r.id,
            r.preset,
            r.id
        );
    }
    let written = async {
        plan.write(&*app.store).await?;
        crate::declared::seed_connections(&next, &*app.store).await
    }
    .await;
    // Whatever was written is served, also when a later write failed.
    if new_presets {
        let (added, removed, changed) = differences(&running, &presets);
        app.set_presets(presets).await?;
        tracing::info!(added = ?added, removed = ?removed, changed = ?changed, "presets changed: new turns run on them");
    } else {
        app.reassemble().await?;
    }
    app.outbound.follow().await?;
    written.context("applied in part (the store failed after some declarations were written)")?;
    let waiting = restart_only(&app.config, &file);
    if !waiting.is_empty() {
        tracing::warn!(
            file = %path.display(),
            sections = %waiting.join(", "),
            "these settings differ from the ones in effect and apply at the next restart"
        );
    }
    Ok(())
}

/// The ids of the presets `b` adds to `a`, removes from it, and changes.
fn differences(a: &[Preset], b: &[Preset]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let find = |list: &[Preset], id: &str| list.iter().find(|p| p.id == id).cloned();
    let ids = |list: &[Preset], keep: &dyn Fn(&Preset) -> bool| {
        list.iter()
            .filter(|p| keep(p))
            .map(|p| p.id.clone())
            .collect()
    };
    (
        ids(b, &|p| find(a, &p.id).is_none()),
        ids(a, &|p| find(b, &p.id).is_none()),
        ids(b, &|p| find(a, &p.id).is_some_and(|q| q != *p)),
    )
}

/// The top-level settings that differ between `a` and `b`, declarations aside.
fn restart_only(a: &Config, b: &Config) -> Vec<String> {
    let (Ok(Value::Object(a)), Ok(Value::Object(b))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return Vec::new();
    };
    a.keys()
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .filter(|k| !matches!(k.as_str(), "instances" | "connections" | "presets"))
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// The SIGHUP stream, taken before the process starts serving so that a signal during start-up
/// is kept for [`on_sighup`] instead of ending the process.
pub fn hangups() -> anyhow::Result<Signal> {
    signal(SignalKind::hangup()).context("installing the SIGHUP handler")
}

/// Re-reads the config on every hangup until the process ends, logging what happened.
pub fn on_sighup(app: std::sync::Arc<App>, mut hangups: Signal) {
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let file = app
                .config
                .source
                .as_deref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            match reload(&app).await {
                Ok(()) => tracing::info!(file, "configuration reloaded"),
                Err(e) => tracing::error!(
                    file,
                    error = %format!("{e:#}"),
                    "configuration not reloaded as a whole; what it could not apply keeps the running values"
                ),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preset_differences_name_added_removed_and_changed_ids() {
        let a: Config = toml::from_str(
            "[[presets]]\nid = \"a\"\nbackend = \"echo\"\n[[presets]]\nid = \"b\"\nbackend = \"echo\"\n",
        )
        .unwrap();
        let b: Config = toml::from_str(
            "[[presets]]\nid = \"b\"\nbackend = \"scripted\"\n[[presets]]\nid = \"c\"\nbackend = \"echo\"\n",
        )
        .unwrap();
        let (added, removed, changed) = differences(&a.presets, &b.presets);
        assert_eq!(
            (added, removed, changed),
            (
                vec!["c".to_owned()],
                vec!["a".to_owned()],
                vec!["b".to_owned()]
            )
        );
        assert_eq!(differences(&a.presets, &a.presets), Default::default());
        // Presets change at run time; a difference in them is not one waiting for a restart.
        assert!(restart_only(&a, &b).is_empty());
    }

    #[test]
    fn settings_read_at_start_are_named_declarations_are_not() {
        let a: Config = toml::from_str("[[instances]]\nname = \"a\"\n").unwrap();
        let mut b: Config =
            toml::from_str("[[instances]]\nname = \"b\"\n[sessions]\nmaxLive = 5\n").unwrap();
        assert_eq!(restart_only(&a, &b), ["sessions"]);
        b.well_known_instance = Some("b".into());
        assert_eq!(restart_only(&a, &b), ["sessions", "wellKnownInstance"]);
        assert!(restart_only(&a, &a).is_empty());
    }
}
