//! The `openai` backend's loop as an agent: the granted model (grant `llm`) answers the
//! context's conversation, streamed to the caller, and may call the granted remote A2A agents
//! (grant `agents`) as tools until it answers or `maxSteps` requests are spent. Its `config`:
//! `systemPrompt` (optional) and `maxSteps` (default 8).

use a2a_agent::agents::{self, Reply};
use a2a_agent::history::{self, Role as Said};
use a2a_agent::llm::{self, Error, Message, Request, Role, Tool, ToolCall};
use a2a_agent::{Agent, Outcome, Turn, config};
use serde_json::Value;

struct Assistant;

/// Model requests one turn may make when `maxSteps` does not say.
const DEFAULT_STEPS: u32 = 8;

fn message(role: Role, content: String) -> Message {
    Message {
        role,
        content,
        tool_calls: Vec::new(),
        tool_call_id: None,
    }
}

/// The conversation a turn starts with: the system prompt, the context so far, the message.
fn opening(turn: &Turn) -> Vec<Message> {
    let system = config::get("systemPrompt").ok().flatten();
    let past = history::conversation().into_iter().map(|e| {
        let role = match e.role {
            Said::User => Role::User,
            Said::Agent => Role::Assistant,
        };
        message(role, e.text)
    });
    system
        .map(|s| message(Role::System, s))
        .into_iter()
        .chain(past)
        .chain([message(Role::User, turn.text.clone())])
        .collect()
}

/// The granted remote agents as the model's tools.
fn tools() -> Vec<Tool> {
    agents::granted()
        .into_iter()
        .map(|a| Tool {
            name: a.tool,
            description: a.description,
            parameters: a.parameters,
        })
        .collect()
}

/// What the model hears back from `call`: the remote answer, its question, or the error.
fn answer(call: &ToolCall) -> String {
    let arguments: Value = match serde_json::from_str(&call.arguments) {
        Ok(v) => v,
        Err(e) => return format!("error: the arguments are not JSON: {e}"),
    };
    let Some(prompt) = arguments["prompt"].as_str() else {
        return "error: the arguments need a `prompt` string".into();
    };
    let task = arguments["taskId"].as_str().map(str::to_owned);
    match agents::call(&call.name, prompt, task.as_deref()) {
        Ok(Reply::Answer(text)) => text,
        Ok(Reply::Interrupted(i)) => format!(
            "The remote agent asks: {} (call it again with taskId {:?} to answer)",
            i.question, i.task_id
        ),
        Err(e) => format!("error: {e}"),
    }
}

impl Agent for Assistant {
    fn run(turn: Turn) -> Outcome {
        let steps = config::get("maxSteps")
            .ok()
            .flatten()
            .and_then(|s| s.parse().ok())
            .unwrap_or(DEFAULT_STEPS)
            .max(1);
        let tools = tools();
        let mut messages = opening(&turn);
        for _ in 0..steps {
            let request = Request {
                messages: messages.clone(),
                tools: tools.clone(),
                max_tokens: None,
                temperature: None,
                stream_answer: true,
            };
            let step = match llm::complete(&request) {
                Ok(c) => c,
                Err(Error::NotGranted) => {
                    return Outcome::Unavailable(
                        "the preset grants no model: set grants.llm".into(),
                    );
                }
                Err(Error::Refused(e) | Error::Unavailable(e) | Error::Invalid(e)) => {
                    return Outcome::Unavailable(e);
                }
            };
            if step.tool_calls.is_empty() {
                return Outcome::Completed;
            }
            let replies: Vec<Message> = step
                .tool_calls
                .iter()
                .map(|c| Message {
                    tool_call_id: Some(c.id.clone()),
                    ..message(Role::Tool, answer(c))
                })
                .collect();
            messages.push(Message {
                tool_calls: step.tool_calls,
                ..message(Role::Assistant, step.content)
            });
            messages.extend(replies);
        }
        Outcome::Unavailable(format!(
            "the model kept calling tools: stopped after {steps} requests (maxSteps)"
        ))
    }
}

a2a_agent::export_agent!(Assistant);
