//! `a2a:agent/llm`: chat completions on the model the preset grants. The runtime holds the API
//! key and talks to the OpenAI-compatible upstream; the agent sends messages and tools and gets
//! the completion. A canceled turn drops the upstream request with the turn.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::bindings::a2a::agent::llm::{
    Completion, Error, Host, Message, Request, Role, ToolCall, Usage,
};
use super::progress::Budget;
use crate::sessions::openai::{Chat, Step};
use crate::sessions::{EventSink, TurnHost};

/// Most messages of one request.
pub const MAX_MESSAGES: usize = 256;
/// Most tools of one request.
pub const MAX_TOOLS: usize = 64;
/// Most bytes of one request's messages and tools.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// The llm capability of one turn.
pub struct LlmCtx {
    /// The granted model; none without the grant.
    chat: Option<Arc<Chat>>,
    host: Arc<dyn TurnHost>,
    events: EventSink,
    budget: Budget,
    /// Tokens this turn used: prompt, completion.
    pub tokens: (u64, u64),
}

impl LlmCtx {
    /// Completions on `chat` (when granted), the key from `host`, streamed answers to `events`
    /// within the turn's progress `budget`.
    pub fn prepare(
        chat: Option<Arc<Chat>>,
        host: Arc<dyn TurnHost>,
        events: EventSink,
        budget: Budget,
    ) -> Self {
        LlmCtx {
            chat,
            host,
            events,
            budget,
            tokens: (0, 0),
        }
    }
}

fn role(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// A message as the chat API reads it.
fn message(m: &Message) -> Value {
    let mut v = json!({ "role": role(m.role), "content": m.content });
    if !m.tool_calls.is_empty() {
        v["tool_calls"] = m
            .tool_calls
            .iter()
            .map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } }))
            .collect();
    }
    if let Some(id) = &m.tool_call_id {
        v["tool_call_id"] = json!(id);
    }
    v
}

/// A request's messages, tools and other fields, as the chat API reads them.
type Body = (Vec<Value>, Vec<Value>, Map<String, Value>);

/// The request's messages, tools and options as the chat API reads them, or what is over a bound.
fn body(r: &Request) -> Result<Body, Error> {
    if r.messages.len() > MAX_MESSAGES || r.tools.len() > MAX_TOOLS {
        return Err(Error::Invalid(format!(
            "a request has at most {MAX_MESSAGES} messages and {MAX_TOOLS} tools"
        )));
    }
    let messages: Vec<Value> = r.messages.iter().map(message).collect();
    let mut tools = Vec::new();
    for t in &r.tools {
        let parameters: Value = serde_json::from_str(&t.parameters).map_err(|e| {
            Error::Invalid(format!("tool {:?}: `parameters` is not JSON: {e}", t.name))
        })?;
        tools.push(json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": parameters } }));
    }
    let size = serde_json::to_string(&(&messages, &tools)).map_or(0, |s| s.len());
    if size > MAX_REQUEST_BYTES {
        return Err(Error::Invalid(format!(
            "a request has at most {MAX_REQUEST_BYTES} bytes of messages and tools"
        )));
    }
    let mut extra = Map::new();
    extra.insert("stream_options".into(), json!({ "include_usage": true }));
    if let Some(n) = r.max_tokens {
        extra.insert("max_tokens".into(), json!(n));
    }
    if let Some(t) = r.temperature {
        extra.insert("temperature".into(), json!(t));
    }
    Ok((messages, tools, extra))
}

/// Whether the model refused the request for good (an HTTP 4xx but 408 and 429, which a retry
/// may pass).
fn refused(error: &str) -> bool {
    error
        .strip_prefix("the model API answered HTTP 4")
        .is_some_and(|rest| !rest.starts_with("08") && !rest.starts_with("29"))
}

fn completion(step: Step) -> Completion {
    Completion {
        content: step.text,
        tool_calls: step
            .calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect(),
        finish_reason: step.finish_reason,
        usage: Usage {
            prompt_tokens: step.usage.0,
            completion_tokens: step.usage.1,
        },
    }
}

impl Host for LlmCtx {
    async fn complete(&mut self, request: Request) -> wasmtime::Result<Result<Completion, Error>> {
        let Some(chat) = self.chat.clone() else {
            return Ok(Err(Error::NotGranted));
        };
        let Some(key) = self.host.secret(&chat.key_env) else {
            return Ok(Err(Error::Unavailable(chat.no_key())));
        };
        let (messages, tools, extra) = match body(&request) {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        // Text the agent does not stream to the caller goes nowhere; what it streams counts
        // against the turn's progress bytes (one answer is bounded by the chat client).
        let quiet = tokio::sync::mpsc::unbounded_channel().0;
        let events = if request.stream_answer {
            if !self.budget.left() {
                return Ok(Err(Error::Invalid(
                    "the turn sent all the progress it may: stream no more answers".into(),
                )));
            }
            &self.events
        } else {
            &quiet
        };
        let answer = chat.request(&key, &messages, &tools, extra, events).await;
        Ok(match answer {
            Ok(step) => {
                if request.stream_answer {
                    let _ = self.budget.take(step.text.len());
                }
                self.tokens.0 += u64::from(step.usage.0);
                self.tokens.1 += u64::from(step.usage.1);
                Ok(completion(step))
            }
            Err(e) if refused(&e) => Err(Error::Refused(e)),
            Err(e) => Err(Error::Unavailable(e)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::bindings::a2a::agent::llm::Tool;
    use super::*;

    #[test]
    fn only_lasting_refusals_are_refused() {
        assert!(refused("the model API answered HTTP 400: bad"));
        assert!(!refused("the model API answered HTTP 429: slow down"));
        assert!(!refused("the model API answered HTTP 408: timeout"));
        assert!(!refused("the model API answered HTTP 503: down"));
    }

    #[test]
    fn requests_become_chat_messages_within_bounds() {
        let r = Request {
            messages: vec![
                Message {
                    role: Role::Assistant,
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "f".into(),
                        arguments: "{}".into(),
                    }],
                    tool_call_id: None,
                },
                Message {
                    role: Role::Tool,
                    content: "42".into(),
                    tool_calls: vec![],
                    tool_call_id: Some("c1".into()),
                },
            ],
            tools: vec![Tool {
                name: "f".into(),
                description: "d".into(),
                parameters: r#"{"type":"object"}"#.into(),
            }],
            max_tokens: Some(9),
            temperature: None,
            stream_answer: false,
        };
        let (m, t, extra) = body(&r).unwrap();
        assert_eq!(m[0]["tool_calls"][0]["function"]["name"], "f");
        assert_eq!(
            (m[1]["role"].as_str(), m[1]["tool_call_id"].as_str()),
            (Some("tool"), Some("c1"))
        );
        assert_eq!(t[0]["function"]["parameters"]["type"], "object");
        assert_eq!(extra["max_tokens"], 9);
        let mut bad = r.clone();
        bad.tools[0].parameters = "{".into();
        assert!(matches!(body(&bad), Err(Error::Invalid(e)) if e.contains("not JSON")));
        let mut many = r;
        many.messages = vec![many.messages[1].clone(); MAX_MESSAGES + 1];
        assert!(matches!(body(&many), Err(Error::Invalid(_))));
    }
}
