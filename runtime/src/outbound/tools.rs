//! Remote skills as the tools of session turns (docs/outbound.md "Outbound connections").

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Live, Outbound, Status};
use crate::records::ConnectionRecord;
use crate::sessions::{ToolResult, ToolSpec, Toolbox, TurnHost};

/// One tool: a remote skill as a session sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// Its name (docs/outbound.md "Outbound connections").
    pub name: String,
    /// The connection.
    pub connection_id: String,
    /// Its name.
    pub connection: String,
    /// The remote skill id.
    pub skill: String,
    /// Shown name.
    pub title: String,
    /// What the model reads.
    pub description: String,
}

/// The tools of a connected, enabled connection, with overrides applied and disabled skills left out.
pub fn tools(r: &ConnectionRecord, live: &Live) -> Vec<Tool> {
    let Some(card) = live
        .card
        .as_ref()
        .filter(|_| r.enabled && live.status == Status::Connected)
    else {
        return Vec::new();
    };
    let skills: Vec<&Value> = card["skills"]
        .as_array()
        .map(|s| s.iter().collect())
        .unwrap_or_default();
    let ids: Vec<String> = a2a_protocol::client::skill_ids(card)
        .into_iter()
        .filter(|id| !r.disabled_skills.contains(id))
        .collect();
    let names =
        a2a_protocol::tools::names(&r.name, &ids.iter().map(String::as_str).collect::<Vec<_>>());
    ids.into_iter()
        .zip(names)
        .map(|(id, name)| {
            let skill = skills.iter().find(|s| s["id"] == id.as_str());
            let o = r.skill_overrides.get(&id);
            let title = o
                .and_then(|o| o.name.clone())
                .or_else(|| skill.and_then(|s| s["name"].as_str().map(str::to_owned)))
                .unwrap_or_else(|| id.clone());
            let about = o
                .and_then(|o| o.description.clone())
                .or_else(|| skill.and_then(|s| s["description"].as_str().map(str::to_owned)))
                .unwrap_or_default();
            let agent = card["name"].as_str().unwrap_or(&r.name);
            Tool {
                name,
                connection_id: r.id.clone(),
                connection: r.name.clone(),
                skill: id,
                description: format!("{title} — remote A2A agent \"{agent}\". {about}")
                    .trim_end()
                    .to_owned(),
                title,
            }
        })
        .collect()
}

/// A stable, opaque remote context id for one caller conversation with one connection.
pub fn context_for(connection_id: &str, caller: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{connection_id}\u{0}{caller}").as_bytes());
    format!("a2a-edge-{}", hex::encode(&digest[..12]))
}

/// The turns' toolbox: the outbound connections.
pub struct SessionToolbox(pub Arc<Outbound>);

impl Toolbox for SessionToolbox {
    fn for_turn(&self, preset: &str, caller: String) -> Arc<dyn TurnHost> {
        Arc::new(SessionTools {
            outbound: self.0.clone(),
            preset: preset.to_owned(),
            caller,
        })
    }
}

/// The tools and secrets a session turn sees: the outbound tools of connections open to its
/// preset, called with a remote context stable per (instance, context, connection).
struct SessionTools {
    outbound: Arc<Outbound>,
    preset: String,
    /// `<instance>/<context>`: the caller the remote context is derived from.
    caller: String,
}

impl SessionTools {
    fn visible(&self) -> Vec<Tool> {
        let records = self.outbound.records();
        records
            .iter()
            .filter(|r| r.preset.as_deref().is_none_or(|p| p == self.preset))
            .flat_map(|r| tools(r, &self.outbound.live(&r.id)))
            .collect()
    }
}

impl TurnHost for SessionTools {
    fn secret(&self, name: &str) -> Option<String> {
        self.outbound.secret(name)
    }

    fn tools(&self) -> Vec<ToolSpec> {
        self.visible()
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name,
                connection: t.connection,
                skill: t.skill,
                description: t.description,
                parameters: a2a_protocol::tools::parameters(),
            })
            .collect()
    }

    fn call_tool(&self, name: &str, arguments: &str, cancel: CancellationToken) -> ToolResult {
        let tool = self.visible().into_iter().find(|t| t.name == name);
        let args: Result<Value, _> = serde_json::from_str(if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        });
        let (outbound, caller) = (self.outbound.clone(), self.caller.clone());
        let name = name.to_owned();
        Box::pin(async move {
            let tool = tool.ok_or_else(|| format!("there is no tool {name:?}"))?;
            let args = args.map_err(|e| format!("the arguments of {name} are not JSON: {e}"))?;
            let prompt = args["prompt"]
                .as_str()
                .ok_or_else(|| format!("{name} needs a \"prompt\" string"))?;
            let task_id = args["taskId"]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            let context = context_for(&tool.connection_id, &caller);
            outbound
                .call(
                    &tool.connection_id,
                    &tool.skill,
                    prompt,
                    task_id,
                    context,
                    cancel,
                )
                .await
        })
    }
}
