//! `a2a-edge component …`: the components the runtime has loaded, reloaded or swapped in.

use clap::Subcommand;
use control_api::{Action, Component, InboundSettings, InboundUpdate, Text};

use super::{Control, s, table};

/// `a2a-edge component …`
#[derive(Subcommand)]
pub enum ComponentCmd {
    /// List the components: servers, the outbound client and agents, with their instances.
    List,
    /// Read a component again from its source (the data directory's components/ folder) and
    /// compile it; requests after that run the new code.
    Reload {
        /// The component's name.
        name: String,
    },
    /// Serve an instance with another loaded component, without a restart.
    Swap {
        /// Instance id.
        instance: String,
        /// The component's name.
        name: String,
    },
}

impl Control {
    /// `component …`
    pub async fn component(&self, cmd: ComponentCmd) -> anyhow::Result<()> {
        match cmd {
            ComponentCmd::List => {
                let v = self.get("/components").await?;
                self.print(&v, |v| {
                    let header = ["NAME", "KIND", "SOURCE", "SIZE", "SHA256", "INSTANCES"];
                    table::print(&header, &v["components"], |c| {
                        let instances: Vec<String> = c["instances"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .map(s)
                            .collect();
                        let sha = s(&c["sha256"]);
                        vec![
                            s(&c["name"]),
                            s(&c["kind"]),
                            s(&c["source"]),
                            s(&c["size"]),
                            sha.chars().take(12).collect(),
                            instances.join(","),
                        ]
                    })
                });
                Ok(())
            }
            ComponentCmd::Reload { name } => {
                self.action(Action::ComponentReload(Component { name: Text(name) }))
                    .await
            }
            ComponentCmd::Swap { instance, name } => {
                let settings = InboundSettings {
                    component: Some(Text(name)),
                    ..InboundSettings::default()
                };
                let update = InboundUpdate::new(Text(instance), None, None, None, settings);
                self.action(Action::InboundUpdate(update)).await
            }
        }
    }
}
