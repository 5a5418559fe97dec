//! `a2a-edge send <card-url> "text"`: an A2A 1.0 client. Reads the card, picks its JSON-RPC
//! interface, sends the message (streaming when asked and announced) and prints the agent's text
//! as it arrives, data parts as JSON and file parts as their name, type and size (`--save DIR`
//! writes them). Exit status: 0 when the task completed (or is waiting for input), 1 otherwise.

use anyhow::{Context, bail};
use base64::Engine as _;
use clap::Args;
use futures_util::StreamExt;
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;

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
    /// API key (sent as X-API-Key); default: the A2A_API_KEY environment variable.
    #[arg(long, env = "A2A_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Give up after this many seconds without the whole answer.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
    /// Write the files the agent answers with (inline bytes) into this directory.
    #[arg(long)]
    pub save: Option<PathBuf>,
}

/// Runs `send`; with `json`, every JSON-RPC result is printed (one per line) instead of text.
// The send command from request to printed answer, in the order it happens: it reads better
// whole.
pub async fn run(a: SendArgs, json: bool) -> anyhow::Result<()> {
    let secs = a.timeout;
    tokio::time::timeout(std::time::Duration::from_secs(secs), send(a, json))
        .await
        .map_err(|_| anyhow::anyhow!("no whole answer within {secs} s (--timeout)"))?
}

async fn send(a: SendArgs, json: bool) -> anyhow::Result<()> {
    if let Some(dir) = &a.save {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create --save directory {}", dir.display()))?;
    }
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
    if let Some(k) = &a.api_key {
        req = req.header("X-API-Key", k);
    }
    let r = req
        .send()
        .await
        .with_context(|| format!("cannot reach {endpoint}"))?;
    if r.status().as_u16() == 401 {
        if a.token.is_some() || a.api_key.is_some() {
            let said: Value = r.json().await.unwrap_or_default();
            let why = said["error"]["message"]
                .as_str()
                .unwrap_or("invalid credentials");
            bail!(
                "{endpoint} refused the credentials given ({why}): check the --token or --api-key (or A2A_TOKEN, A2A_API_KEY)"
            );
        }
        bail!(
            "{endpoint} wants a bearer token or an API key: pass --token (or set A2A_TOKEN) or --api-key (or set A2A_API_KEY)"
        );
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
        at_line_start: true,
        save: a.save.clone(),
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
    /// What was printed ends with a newline (or nothing was).
    at_line_start: bool,
    /// Where files are written.
    save: Option<PathBuf>,
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
            // A chunk as it came, its newlines included.
            let text = render(&a["artifact"]["parts"], self.save.as_deref())?;
            if !text.is_empty() {
                print!("{text}");
                let _ = std::io::stdout().flush();
                self.printed = true;
                self.at_line_start = text.ends_with('\n');
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
            match (self.printed, output(task, self.save.as_deref())?) {
                (true, _) if !self.at_line_start => println!(),
                (true, _) => {}
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

/// A task's artifacts as `send` prints them (files not written), if any.
pub fn output_text(task: &Value) -> Option<String> {
    output(task, None).ok().flatten()
}

/// A task's artifacts as [`render`] shows them, if any.
fn output(task: &Value, save: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    let Some(artifacts) = task["artifacts"].as_array() else {
        return Ok(None);
    };
    let mut shown = Vec::new();
    for a in artifacts {
        let t = render(&a["parts"], save)?;
        let t = t.trim_end_matches('\n');
        if !t.is_empty() {
            shown.push(t.to_owned());
        }
    }
    Ok((!shown.is_empty()).then(|| shown.join("\n")))
}

/// Parts as a terminal shows them: text as it is, data as JSON on a line of its own, files as
/// `[file name (type, N bytes)]` (written into `save` when given; a file by URL is named, not
/// fetched).
fn render(parts: &Value, save: Option<&std::path::Path>) -> anyhow::Result<String> {
    let mut out = String::new();
    let line = |out: &mut String, s: String| {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&s);
        out.push('\n');
    };
    for p in parts.as_array().into_iter().flatten() {
        let name = p["filename"].as_str().unwrap_or("file");
        let media = p["mediaType"]
            .as_str()
            .unwrap_or("application/octet-stream");
        if let Some(t) = p["text"].as_str() {
            out.push_str(t);
        } else if let Some(d) = p.get("data") {
            line(&mut out, d.to_string());
        } else if let Some(raw) = p["raw"].as_str() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(raw)
                .context("the agent sent a file whose bytes are not base64")?;
            let kept = match save {
                Some(dir) => format!(" saved as {}", saved(dir, name, &bytes)?.display()),
                None => "; --save DIR writes it".to_owned(),
            };
            line(
                &mut out,
                format!("[file {name} ({media}, {} bytes){kept}]", bytes.len()),
            );
        } else if let Some(url) = p["url"].as_str() {
            line(&mut out, format!("[file {name} ({media}) at {url}]"));
        }
    }
    Ok(out)
}

/// Writes `bytes` into `dir` under the last component of `name` (never a path the agent
/// chose), numbered when the name is taken; the file written.
fn saved(dir: &std::path::Path, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
    let base = std::path::Path::new(name)
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.starts_with('.'))
        .unwrap_or("file");
    let mut path = dir.join(base);
    for n in 1.. {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut f) => {
                f.write_all(bytes)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                path = dir.join(format!("{n}-{base}"));
            }
            Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
        }
    }
    Ok(path)
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
