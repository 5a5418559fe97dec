//! A context's conversation rebuilt from its persisted tasks (docs/protocol.md "A2A methods": from the inputs and
//! outputs of the tasks, not a verbatim turn log), so a session resumes after a restart.

use a2a_protocol::{Part, Role, Task};
use serde::Serialize;

use crate::store::{PageStart, TaskFilter, Tasks};

/// Most tasks of a context read back.
const MAX_TASKS: u32 = 50;

/// One message of the conversation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Entry {
    /// `user` or `agent`.
    pub role: &'static str,
    /// Its text.
    pub text: String,
}

/// The conversation of `context_id` on an instance (of `principal`'s tasks only, when named),
/// oldest first, without `exclude_task`: each task's user messages, then its output (artifact
/// text, or the agent's status message).
pub async fn rebuild(
    store: &dyn Tasks,
    instance_id: &str,
    context_id: &str,
    principal: Option<&str>,
    exclude_task: &str,
) -> Vec<Entry> {
    let filter = TaskFilter {
        instance_id: Some(instance_id.to_owned()),
        context_id: Some(context_id.to_owned()),
        principal: principal.map(str::to_owned),
        limit: MAX_TASKS,
        start: PageStart::First,
        ..TaskFilter::default()
    };
    let Ok(page) = store.list_tasks(filter).await else {
        return Vec::new();
    };
    let mut tasks: Vec<(u64, Task)> = page
        .tasks
        .iter()
        .filter(|r| r.id != exclude_task)
        .filter_map(|r| Some((r.created_at, serde_json::from_str::<Task>(&r.body).ok()?)))
        .collect();
    tasks.sort_by_key(|(at, _)| *at);
    let mut out = Vec::new();
    for (_, task) in tasks {
        for m in task.history.iter().filter(|m| m.role == Role::User) {
            out.push(Entry {
                role: "user",
                text: text(&m.parts),
            });
        }
        let output: String = task
            .artifacts
            .iter()
            .map(|a| text(&a.parts))
            .collect::<Vec<_>>()
            .join("\n");
        let output = if output.is_empty() {
            task.status
                .message
                .as_ref()
                .map(|m| text(&m.parts))
                .unwrap_or_default()
        } else {
            output
        };
        if !output.is_empty() {
            out.push(Entry {
                role: "agent",
                text: output,
            });
        }
    }
    out
}

fn text(parts: &[Part]) -> String {
    a2a_protocol::prompt::render(parts)
}
