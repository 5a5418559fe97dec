//! `a2a:agent/history`: the turn's context's conversation, rebuilt from its stored tasks only
//! when the agent asks.

use std::sync::Arc;

use super::bindings::a2a::agent::history::{Entry, Host, Role};
use crate::sessions::{TurnInput, history};
use crate::store::Tasks;

/// The history capability of one turn.
pub struct HistoryCtx {
    store: Arc<dyn Tasks>,
    instance_id: String,
    context_id: String,
    principal: String,
    task_id: String,
}

impl HistoryCtx {
    /// The conversation of the turn's context on its instance, without the turn's own task.
    pub fn prepare(store: Arc<dyn Tasks>, turn: &TurnInput) -> Self {
        HistoryCtx {
            store,
            instance_id: turn.instance_id.clone(),
            context_id: turn.context_id.clone(),
            principal: turn.principal.clone(),
            task_id: turn.task_id.clone(),
        }
    }
}

impl Host for HistoryCtx {
    async fn conversation(&mut self) -> wasmtime::Result<Vec<Entry>> {
        let entries = history::rebuild(
            &*self.store,
            &self.instance_id,
            &self.context_id,
            Some(&self.principal),
            &self.task_id,
        )
        .await;
        Ok(entries
            .into_iter()
            .map(|e| Entry {
                role: if e.role == "agent" {
                    Role::Agent
                } else {
                    Role::User
                },
                text: e.text,
            })
            .collect())
    }
}
