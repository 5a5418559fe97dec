//! `a2a-edge send <card-url> "text"`: an A2A 1.0 client. Reads the card, picks its JSON-RPC
//! interface, sends the message (streaming when asked and announced) and prints the agent's text
//! as it arrives. Exit status: 0 when the task completed (or is waiting for input), 1 otherwise.

use anyhow::{Context, bail};
use clap::Args;
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::io::Write;

/// Arguments of `send`.
#[derive(Args)]
pub struct SendArgs {
    /// The agent's card URL (…/agent-card.json), or its JSON-RPC endpoint.
    pub card_url: String,
    /// The message text.
    pub text: String,
    /// Stream the answer (SSE) as it is produced.
    #[arg(long)]
    pub stream: bool,
    /// Continue this conversation.
    #[arg(long)]
    pub context: Option<String>,
    /// Continue this task (one waiting for input).
    #[arg(long)]
    pub task: Option<String>,
    /// Skill to ask for (metadata.skill).
    #[arg(long)]
    pub skill: Option<String>,
    /// Bearer token; default: the A2A_TOKEN environment variable.
    #[arg(long, env = "A2A_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Runs `send`; with `json`, every JSON-RPC result is printed (one per line) instead of text.
// The send command from request to printed answer, in the order it happens: it reads better
// whole.
pub async fn run(a: SendArgs, json: bool) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let endpoint = endpoint(&http, &a.card_url).await?;
    let mut message = json!({ "messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER", "parts": [{ "text": a.text }] });
    if let Some(c) = &a.context {
        message["contextId"] = json!(c);
    }
    if let Some(t) = &a.task {
        message["taskId"] = json!(t);
    }
    if let Some(s) = &a.skill {
        message["metadata"] = json!({ "skill": s });
    }
    let method = if a.stream {
        "SendStreamingMessage"
    } else {
        "SendMessage"
    };
    let body =
        json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": { "message": message } });
    let mut req = http
        .post(&endpoint)
        .header("A2A-Version", "1.0")
        .json(&body);
    if a.stream {
        req = req.header("Accept", "text/event-stream");
    }
    if let Some(t) = &a.token {
        req = req.bearer_auth(t);
    }
    let r = req
        .send()
        .await
        .with_context(|| format!("cannot reach {endpoint}"))?;
    if r.status().as_u16() == 401 {
        bail!("{endpoint} wants a bearer token: pass --token or set A2A_TOKEN");
    }
    if !r.status().is_success() {
        let status = r.status().as_u16();
        bail!(
            "{endpoint} answered HTTP {status}: {}",
            r.text().await.unwrap_or_default()
        );
    }
    let is_sse = r
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let mut out = Printer {
        json,
        printed: false,
    };
    let last = if is_sse {
        let mut last = Value::Null;
        let mut events = a2a_protocol::sse::Decoder::default();
        let mut stream = r.bytes_stream();
        while let Some(chunk) = stream.next().await {
            for data in events.push(&chunk.context("the stream broke off")?) {
                let v: Value = serde_json::from_str(&data)
                    .context("the agent sent an event that is not JSON")?;
                last = out.frame(&v)?;
            }
        }
        last
    } else {
        let v: Value = r.json().await.context("the agent's answer is not JSON")?;
        out.frame(&v)?
    };
    out.finish(&last)
}

/// The JSON-RPC endpoint: the card's JSONRPC interface, or the URL itself when it is not a card.
async fn endpoint(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let r = http
        .get(url)
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    let card: Option<Value> = if r.status().is_success() {
        r.json().await.ok()
    } else {
        None
    };
    let Some(card) = card.filter(|c| c.get("supportedInterfaces").is_some()) else {
        if url.ends_with("agent-card.json") {
            bail!("{url} is not an AgentCard");
        }
        return Ok(url.to_owned());
    };
    let interfaces = card["supportedInterfaces"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    interfaces
        .iter()
        .find(|i| i["protocolBinding"] == "JSONRPC")
        .and_then(|i| i["url"].as_str())
        .map(str::to_owned)
        .with_context(|| format!("the card at {url} announces no JSONRPC interface"))
}

struct Printer {
    json: bool,
    printed: bool,
}

impl Printer {
    /// Prints one result (a stream frame or the whole answer); returns it.
    fn frame(&mut self, v: &Value) -> anyhow::Result<Value> {
        if let Some(e) = v.get("error") {
            bail!(
                "the agent answered error {}: {}",
                e["code"],
                e["message"].as_str().unwrap_or("")
            );
        }
        let result = v["result"].clone();
        if self.json {
            println!("{result}");
            return Ok(result);
        }
        if let Some(a) = result.get("artifactUpdate") {
            let text = text_of(&a["artifact"]["parts"]);
            if !text.is_empty() {
                print!("{text}");
                let _ = std::io::stdout().flush();
                self.printed = true;
            }
        }
        Ok(result)
    }

    /// Prints what the last result holds that was not printed yet, and decides the exit status.
    fn finish(self, last: &Value) -> anyhow::Result<()> {
        if let Some(m) = last.get("message") {
            if !self.json {
                println!("{}", message_text(m).unwrap_or_default());
            }
            return Ok(());
        }
        let task = last.get("task").unwrap_or(last);
        let state = task["status"]["state"].as_str().unwrap_or("").to_owned();
        if !self.json {
            match (self.printed, output_text(task)) {
                (true, _) => println!(),
                (false, Some(t)) => println!("{t}"),
                (false, None) => {}
            }
            let note = message_text(&task["status"]["message"])
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            eprintln!(
                "task {} {} (context {}){note}",
                task["id"].as_str().unwrap_or("?"),
                state.trim_start_matches("TASK_STATE_"),
                task["contextId"].as_str().unwrap_or("?")
            );
        }
        match state.as_str() {
            "TASK_STATE_COMPLETED"
            | "TASK_STATE_INPUT_REQUIRED"
            | "TASK_STATE_AUTH_REQUIRED"
            | "TASK_STATE_WORKING"
            | "TASK_STATE_SUBMITTED" => Ok(()),
            other => bail!("the task ended {}", other.trim_start_matches("TASK_STATE_")),
        }
    }
}

/// The text of a task's artifacts, if any.
pub fn output_text(task: &Value) -> Option<String> {
    let text: Vec<String> = task["artifacts"]
        .as_array()?
        .iter()
        .map(|a| text_of(&a["parts"]))
        .filter(|t| !t.is_empty())
        .collect();
    (!text.is_empty()).then(|| text.join("\n"))
}

/// The text of a message, if any.
pub fn message_text(m: &Value) -> Option<String> {
    let t = text_of(&m["parts"]);
    (!t.is_empty()).then_some(t)
}

fn text_of(parts: &Value) -> String {
    parts
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default()
}
