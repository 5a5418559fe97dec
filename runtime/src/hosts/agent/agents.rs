//! `a2a:agent/agents`: the remote A2A agents (outbound connections) the preset grants, called
//! as today's outbound tools are, with the same result contract.

use std::sync::Arc;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::bindings::a2a::agent::agents::{Agent, Host, Interruption, Reply};
use crate::sessions::{ToolSpec, TurnHost};

/// Longest prompt sent to a remote agent, bytes.
pub const MAX_PROMPT_BYTES: usize = 256 << 10;

/// The agents capability of one turn.
pub struct AgentsCtx {
    granted: Arc<Vec<String>>,
    host: Arc<dyn TurnHost>,
    cancel: CancellationToken,
}

impl AgentsCtx {
    /// The tools of `host` whose connection is one of `granted`; a call stops with `cancel`.
    pub fn prepare(
        granted: Arc<Vec<String>>,
        host: Arc<dyn TurnHost>,
        cancel: CancellationToken,
    ) -> Self {
        AgentsCtx {
            granted,
            host,
            cancel,
        }
    }

    fn visible(&self) -> Vec<ToolSpec> {
        if self.granted.is_empty() {
            return Vec::new();
        }
        self.host
            .tools()
            .into_iter()
            .filter(|t| self.granted.contains(&t.connection))
            .collect()
    }
}

impl Host for AgentsCtx {
    async fn granted(&mut self) -> wasmtime::Result<Vec<Agent>> {
        Ok(self
            .visible()
            .into_iter()
            .map(|t| Agent {
                tool: t.name,
                skill: t.skill,
                description: t.description,
                parameters: t.parameters.to_string(),
            })
            .collect())
    }

    async fn call(
        &mut self,
        tool: String,
        prompt: String,
        task_id: Option<String>,
    ) -> wasmtime::Result<Result<Reply, String>> {
        if prompt.len() > MAX_PROMPT_BYTES {
            return Ok(Err(format!(
                "a prompt has at most {MAX_PROMPT_BYTES} bytes"
            )));
        }
        if !self.visible().iter().any(|t| t.name == tool) {
            let granted = self.granted.join(", ");
            return Ok(Err(format!(
                "no granted agent {tool:?}: the preset grants the connections [{granted}] (call `granted` for their tools)"
            )));
        }
        let arguments = json!({ "prompt": prompt, "taskId": task_id }).to_string();
        let said = self
            .host
            .call_tool(&tool, &arguments, self.cancel.clone())
            .await;
        Ok(
            said.map(|text| match a2a_protocol::client::interruption(&text) {
                Some((task, question)) => Reply::Interrupted(Interruption {
                    question: question.to_owned(),
                    task_id: task.to_owned(),
                }),
                None => Reply::Answer(text),
            }),
        )
    }
}
