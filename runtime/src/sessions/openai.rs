//! The `openai` backend: any OpenAI-compatible chat-completions API (DeepSeek by default),
//! streamed. Text deltas go into the task as they arrive; the outbound tools (docs/outbound.md "Outbound connections") are offered
//! as function tools, their calls streamed as tool-call deltas and executed by the runtime, and
//! the loop goes on until the model answers or the step bound is reached. Cancel drops the
//! upstream request.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use a2a_protocol::execution::Progress;

use super::preset::OpenAiSettings;
use super::{Backend, BoxFuture, EventSink, TurnInput};

/// Default API base (DeepSeek's OpenAI-compatible endpoint).
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
/// Default model.
pub const DEFAULT_MODEL: &str = "deepseek-chat";
/// Default secret holding the API key.
pub const DEFAULT_KEY_ENV: &str = "DEEPSEEK_API_KEY";
/// Largest model answer read (bytes of the event stream).
const MAX_STREAM_BYTES: usize = 8 << 20;

/// The most of a refusal's body read, bytes.
const MAX_ERROR_BYTES: usize = 16 << 10;

/// `text` without `key`: some APIs quote the key they refused, and it never reaches a log or a
/// task's note.
fn redacted(text: &str, key: &str) -> String {
    if key.is_empty() {
        return text.to_owned();
    }
    text.replace(key, "[the key]")
}

/// An OpenAI-compatible chat-completions API: where, which model, with which secret.
#[derive(Clone)]
pub struct Chat {
    http: reqwest::Client,
    url: String,
    model: String,
    /// The secret holding the API key.
    pub key_env: String,
}

impl Chat {
    /// The API at `base_url` (default DeepSeek's) with `model`, its key in the secret `key_env`;
    /// requests leave through `exit` (TLS roots, proxy) and wait at most `timeout` for a byte.
    pub fn new(
        base_url: Option<&str>,
        model: Option<&str>,
        key_env: Option<&str>,
        timeout: Duration,
        exit: &crate::egress::Exit,
    ) -> Chat {
        Chat {
            http: exit
                .client(reqwest::Client::builder())
                .connect_timeout(Duration::from_secs(10))
                .read_timeout(timeout)
                .build()
                .expect("a plain HTTP client builds"),
            url: format!(
                "{}/chat/completions",
                base_url.unwrap_or(DEFAULT_BASE_URL).trim_end_matches('/')
            ),
            model: model.unwrap_or(DEFAULT_MODEL).to_owned(),
            key_env: key_env.unwrap_or(DEFAULT_KEY_ENV).to_owned(),
        }
    }
}

/// The backend of one preset.
#[derive(Clone)]
pub struct OpenAi {
    chat: Chat,
    system: Option<String>,
    max_steps: u32,
}

impl OpenAi {
    /// The backend with a preset's settings.
    /// Its requests leave through `exit` (TLS roots, proxy).
    pub fn new(preset: &OpenAiSettings, exit: &crate::egress::Exit) -> OpenAi {
        OpenAi {
            chat: Chat::new(
                preset.base_url.as_deref(),
                preset.model.as_deref(),
                preset.api_key_env.as_deref(),
                Duration::from_millis(preset.timeout_ms.unwrap_or(120_000)),
                exit,
            ),
            system: preset.system_prompt.clone(),
            max_steps: preset.max_steps.unwrap_or(8).max(1),
        }
    }
}

/// The chat messages a turn starts with: system, the context's history, the prompt.
fn opening(system: Option<&str>, input: &TurnInput) -> Vec<Value> {
    let mut messages: Vec<Value> = system
        .map(|s| json!({ "role": "system", "content": s }))
        .into_iter()
        .collect();
    for e in &input.history {
        messages.push(json!({ "role": if e.role == "agent" { "assistant" } else { "user" }, "content": e.text }));
    }
    messages.push(json!({ "role": "user", "content": input.prompt }));
    messages
}

/// One tool call the model asked for, assembled from its deltas.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Call {
    /// Its id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// Its arguments, JSON.
    pub arguments: String,
}

/// What one model request produced.
#[derive(Debug, Default, PartialEq)]
pub struct Step {
    /// The answer's text.
    pub text: String,
    /// The tools it calls.
    pub calls: Vec<Call>,
    /// Why it stopped (`stop`, `tool_calls`, `length`, …; empty when the API did not say).
    pub finish_reason: String,
    /// Tokens of the prompt and of the answer, when the API counted them.
    pub usage: (u32, u32),
}

/// Applies one streamed chunk (`choices[0].delta`), sending events as they come.
fn apply(chunk: &Value, step: &mut Step, events: &EventSink) {
    if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
        let n = |k: &str| u[k].as_u64().unwrap_or(0).min(u32::MAX as u64) as u32;
        step.usage = (n("prompt_tokens"), n("completion_tokens"));
    }
    if let Some(r) = chunk["choices"][0]["finish_reason"].as_str() {
        step.finish_reason = r.to_owned();
    }
    let delta = &chunk["choices"][0]["delta"];
    if let Some(r) = delta["reasoning_content"]
        .as_str()
        .filter(|r| !r.is_empty())
    {
        let _ = events.send(Progress::Reasoning(r.to_owned()));
    }
    if let Some(t) = delta["content"].as_str().filter(|t| !t.is_empty()) {
        step.text.push_str(t);
        let _ = events.send(Progress::TextDelta(t.to_owned()));
    }
    for tc in delta["tool_calls"].as_array().into_iter().flatten() {
        let index = tc["index"].as_u64().unwrap_or(step.calls.len() as u64) as usize;
        if index > 64 {
            continue;
        }
        while step.calls.len() <= index {
            step.calls.push(Call::default());
        }
        let call = &mut step.calls[index];
        if let Some(id) = tc["id"].as_str() {
            call.id = id.to_owned();
        }
        if let Some(n) = tc["function"]["name"].as_str() {
            call.name.push_str(n);
        }
        let args = tc["function"]["arguments"].as_str().unwrap_or("");
        call.arguments.push_str(args);
        let _ = events.send(Progress::ToolCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: args.to_owned(),
        });
    }
}

impl Chat {
    /// Why a turn cannot call the model: its key is not stored.
    pub fn no_key(&self) -> String {
        format!(
            "the model API key is not set: store it as {} (credentials file or environment)",
            self.key_env
        )
    }

    /// One streamed request of `messages` (and `tools`, and any `extra` request fields);
    /// what it produced, its text and reasoning sent to `events` as they come. An error never
    /// quotes the key.
    pub async fn request(
        &self,
        key: &str,
        messages: &[Value],
        tools: &[Value],
        extra: serde_json::Map<String, Value>,
        events: &EventSink,
    ) -> Result<Step, String> {
        use tracing::field::Empty;
        let span = tracing::info_span!(
            "model",
            otel.name = %format!("chat {}", self.model),
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = "openai",
            gen_ai.request.model = self.model.as_str(),
            gen_ai.response.finish_reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            server.address = %crate::egress::url_host(&self.url).unwrap_or_default(),
        );
        let result = self
            .send(key, messages, tools, extra, events)
            .instrument(span.clone())
            .await
            .map_err(|e| redacted(&e, key));
        match &result {
            Ok(step) => {
                span.record("gen_ai.usage.input_tokens", i64::from(step.usage.0));
                span.record("gen_ai.usage.output_tokens", i64::from(step.usage.1));
                span.record(
                    "gen_ai.response.finish_reasons",
                    step.finish_reason.as_str(),
                );
            }
            Err(_) => {
                span.record("otel.status_code", "error");
            }
        }
        result
    }

    async fn send(
        &self,
        key: &str,
        messages: &[Value],
        tools: &[Value],
        extra: serde_json::Map<String, Value>,
        events: &EventSink,
    ) -> Result<Step, String> {
        let mut body = json!({ "model": self.model, "messages": messages, "stream": true });
        if !tools.is_empty() {
            body["tools"] = json!(tools);
        }
        body.as_object_mut().expect("a JSON object").extend(extra);
        let mut trace = http::HeaderMap::new();
        crate::telemetry::trace::inject(&tracing::Span::current(), &mut trace);
        let r = self
            .http
            .post(&self.url)
            .bearer_auth(key)
            .headers(trace)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("the model API at {} is unreachable: {e}", self.url))?;
        if !r.status().is_success() {
            let status = r.status().as_u16();
            let mut body = Vec::new();
            let mut stream = r.bytes_stream();
            while let Some(Ok(chunk)) = stream.next().await {
                body.extend_from_slice(&chunk);
                if body.len() >= MAX_ERROR_BYTES {
                    break;
                }
            }
            let text = redacted(&String::from_utf8_lossy(&body), key);
            let text: String = text.chars().take(300).collect();
            return Err(format!("the model API answered HTTP {status}: {text}"));
        }
        let mut step = Step::default();
        let (mut sse, mut read) = (a2a_protocol::sse::Decoder::default(), 0usize);
        let mut stream = r.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("the model's answer broke off: {e}"))?;
            read += chunk.len();
            if read > MAX_STREAM_BYTES {
                return Err(format!(
                    "the model's answer is larger than {MAX_STREAM_BYTES} bytes"
                ));
            }
            for data in sse.push(&chunk) {
                if data.trim() == "[DONE]" {
                    return Ok(step);
                }
                let v: Value = serde_json::from_str(&data)
                    .map_err(|e| format!("the model API sent an event that is not JSON: {e}"))?;
                if let Some(e) = v.get("error") {
                    return Err(format!(
                        "the model API failed: {}",
                        e["message"].as_str().unwrap_or("no message")
                    ));
                }
                apply(&v, &mut step, events);
            }
        }
        Ok(step)
    }
}

impl OpenAi {
    async fn turn(
        &self,
        input: TurnInput,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Progress {
        let Some(key) = input.host.secret(&self.chat.key_env) else {
            return Progress::Unavailable(self.chat.no_key());
        };
        let tools: Vec<Value> = input
            .host
            .tools()
            .into_iter()
            .map(|t| json!({ "type": "function", "function": { "name": t.name, "description": t.description, "parameters": t.parameters } }))
            .collect();
        let mut messages = opening(self.system.as_deref(), &input);
        for _ in 0..self.max_steps {
            let step = tokio::select! {
                _ = cancel.cancelled() => return Progress::Failed("canceled".into()),
                s = self.chat.request(&key, &messages, &tools, Default::default(), events) => s,
            };
            let step = match step {
                Ok(s) => s,
                Err(e) => return Progress::Unavailable(e),
            };
            if step.calls.is_empty() {
                return Progress::Completed;
            }
            let calls: Vec<Value> = step.calls.iter().map(|c| json!({ "id": c.id, "type": "function", "function": { "name": c.name, "arguments": c.arguments } })).collect();
            messages
                .push(json!({ "role": "assistant", "content": step.text, "tool_calls": calls }));
            for c in &step.calls {
                let answer = input
                    .host
                    .call_tool(&c.name, &c.arguments, cancel.clone())
                    .await;
                if cancel.is_cancelled() {
                    return Progress::Failed("canceled".into());
                }
                let content = answer.unwrap_or_else(|e| format!("error: {e}"));
                messages.push(json!({ "role": "tool", "tool_call_id": c.id, "content": content }));
            }
        }
        Progress::Unavailable(format!(
            "the model kept calling tools: stopped after {} requests (maxSteps)",
            self.max_steps
        ))
    }
}

impl Backend for OpenAi {
    fn uses_history(&self) -> bool {
        true
    }

    fn run(&self, input: TurnInput, events: EventSink, cancel: CancellationToken) -> BoxFuture {
        let this = self.clone();
        Box::pin(async move {
            let last = this.turn(input, &events, &cancel).await;
            let _ = events.send(last);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_key_is_redacted_and_an_empty_one_changes_nothing() {
        assert_eq!(
            redacted("bad key: Bearer sk-123", "sk-123"),
            "bad key: Bearer [the key]"
        );
        assert_eq!(redacted("bad key", ""), "bad key");
    }

    #[test]
    fn chunks_assemble_text_and_tool_calls() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut step = Step::default();
        for c in [
            json!({"choices": [{"delta": {"reasoning_content": "hmm"}}]}),
            json!({"choices": [{"delta": {"content": "Let me "}}]}),
            json!({"choices": [{"delta": {"content": "ask."}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "a2a__r__echo", "arguments": "{\"pro"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "mpt\":\"hi\"}"}}]}}]}),
        ] {
            apply(&c, &mut step, &tx);
        }
        assert_eq!(step.text, "Let me ask.");
        assert_eq!(
            step.calls,
            [Call {
                id: "call_1".into(),
                name: "a2a__r__echo".into(),
                arguments: "{\"prompt\":\"hi\"}".into()
            }]
        );
        let mut got = Vec::new();
        while let Ok(e) = rx.try_recv() {
            got.push(e);
        }
        assert_eq!(got[0], Progress::Reasoning("hmm".into()));
        assert_eq!(got[1], Progress::TextDelta("Let me ".into()));
        assert_eq!(
            got[3],
            Progress::ToolCall {
                id: "call_1".into(),
                name: "a2a__r__echo".into(),
                arguments: "{\"pro".into()
            }
        );
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn the_opening_carries_system_history_and_prompt() {
        let history = vec![
            super::super::history::Entry {
                role: "user",
                text: "before".into(),
            },
            super::super::history::Entry {
                role: "agent",
                text: "reply".into(),
            },
        ];
        let input = TurnInput::sample("now", history);
        let m = opening(Some("be brief"), &input);
        let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
        assert_eq!(m[3]["content"], "now");
    }
}
