//! SIGHUP: the config file read again and applied without a restart. The declarations
//! (`[[instances]]` with their limits, `[[connections]]`) are reconciled with the store as on a
//! start and the instance table swapped (in-flight requests keep the instances they began
//! with); TLS files are already taken up whenever they change. Sections read only at start
//! (listeners, storage, runtime, presets, …) are named in the log as waiting for a restart. A
//! file that does not load changes nothing.

use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use crate::app::App;
use crate::config::Config;

/// Applies the file `running` was loaded from; answers the new configuration, or why nothing
/// was applied.
pub async fn reload(app: &App, running: &Config) -> anyhow::Result<Config> {
    let path = running
        .source
        .as_deref()
        .context("serve was started without --config: there is no file to read again")?;
    let next = Config::load(path)?;
    // Checked whole first, so a bad entry further down leaves nothing half applied.
    crate::declared::check(&next, &app.data_dir.join("components")).await?;
    crate::declared::seed_instances(&next, &*app.store, |c| app.host.registry.get(c).is_some())
        .await?;
    crate::declared::seed_connections(&next, &*app.store).await?;
    app.reassemble().await?;
    app.outbound.follow().await?;
    let waiting = restart_only(running, &next);
    if !waiting.is_empty() {
        tracing::warn!(
            file = %path.display(),
            sections = %waiting.join(", "),
            "these settings changed in the config file and apply at the next restart"
        );
    }
    Ok(next)
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
        .filter(|k| !matches!(k.as_str(), "instances" | "connections"))
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// Re-reads the config on every SIGHUP until the process ends, logging what happened.
pub fn on_sighup(app: std::sync::Arc<App>, mut running: Config) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            let file = running
                .source
                .as_deref()
                .map(Path::display)
                .map(|d| d.to_string());
            match reload(&app, &running).await {
                Ok(next) => {
                    tracing::info!(
                        file = file.as_deref().unwrap_or(""),
                        "configuration reloaded"
                    );
                    running = next;
                }
                Err(e) => tracing::error!(
                    file = file.as_deref().unwrap_or(""),
                    error = %format!("{e:#}"),
                    "configuration not reloaded; the running one stays"
                ),
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
