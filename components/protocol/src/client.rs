//! The outbound client's decisions (docs/outbound.md "Outbound connections"): which interface of a remote card to call, how a
//! streamed or polled remote task is assembled, what the tool answers, and when to retry.

use serde_json::{Value, json};

use crate::{Artifact, Message, Part, StreamResponse, Task, TaskState};

/// Where and how to call a remote agent.
#[derive(Clone, Debug, PartialEq)]
pub struct Endpoint {
    /// The JSON-RPC URL.
    pub url: String,
    /// Whether the card announces streaming.
    pub streaming: bool,
    /// The agent speaks A2A 0.3 only: calls go out in 0.3 ([`crate::compat03`]).
    pub v03: bool,
}

/// Checks a remote AgentCard and picks its JSON-RPC interface: for protocol 1.0, else for 0.3
/// (a 1.0 card's 0.3 entry, or a 0.3 card's `url` or `additionalInterfaces`).
pub fn endpoint(card: &Value) -> Result<Endpoint, String> {
    let Some(obj) = card.as_object() else {
        return Err("the agent card is not a JSON object".into());
    };
    if !obj.contains_key("name") {
        return Err("the agent card has no \"name\" (is this an A2A card?)".into());
    }
    let interfaces = match &card["supportedInterfaces"] {
        Value::Array(faces) => faces.clone(),
        Value::Null => Vec::new(),
        _ => return Err("the agent card's supportedInterfaces is not a list".into()),
    };
    let version_is = |v: &Value, major_minor: &str| {
        v.as_str().is_some_and(|s| {
            s == major_minor
                || s.strip_prefix(major_minor)
                    .is_some_and(|r| r.starts_with('.'))
        })
    };
    let jsonrpc = |version: &str| {
        interfaces
            .iter()
            .find(|i| {
                i["protocolBinding"] == "JSONRPC" && version_is(&i["protocolVersion"], version)
            })
            .and_then(|i| i["url"].as_str())
    };
    let (url, v03) = match (jsonrpc("1.0"), jsonrpc("0.3").or_else(|| url_03(card))) {
        (Some(url), _) => (url, false),
        (None, Some(url)) => (url, true),
        (None, None) => {
            let found: Vec<String> = interfaces
                .iter()
                .map(|i| {
                    format!(
                        "{} {}",
                        i["protocolBinding"].as_str().unwrap_or("?"),
                        i["protocolVersion"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            return Err(format!(
                "the agent card announces no JSONRPC interface for protocol 1.0 or 0.3 (found: {})",
                if found.is_empty() {
                    "none".into()
                } else {
                    found.join(", ")
                }
            ));
        }
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err("the card's JSONRPC interface has no http(s) url".into());
    }
    Ok(Endpoint {
        url: url.to_owned(),
        streaming: card["capabilities"]["streaming"] == true,
        v03,
    })
}

/// The JSON-RPC URL of an A2A 0.3 card (`protocolVersion` 0.3.x): its `url` when its preferred
/// transport is JSON-RPC, else its `additionalInterfaces` entry for JSON-RPC.
fn url_03(card: &Value) -> Option<&str> {
    let version = card["protocolVersion"].as_str()?;
    if !crate::compat03::is_v03(version) {
        return None;
    }
    let preferred = card["preferredTransport"].as_str().unwrap_or("JSONRPC");
    if preferred.eq_ignore_ascii_case("JSONRPC") {
        return card["url"].as_str();
    }
    card["additionalInterfaces"]
        .as_array()?
        .iter()
        .find(|i| i["transport"] == "JSONRPC")?["url"]
        .as_str()
}

/// What `outbound.discover` shows of a remote card.
pub fn preview(card: &Value) -> Result<Value, String> {
    let e = endpoint(card)?;
    let skills: Vec<Value> =
        card["skills"].as_array().map(|s| s.iter().map(|k| json!({ "id": k["id"], "name": k["name"], "description": k["description"] })).collect()).unwrap_or_default();
    Ok(json!({
        "name": card["name"], "version": card["version"], "description": card["description"],
        "endpoint": e.url, "protocolVersion": if e.v03 { "0.3" } else { "1.0" },
        "skills": skills, "capabilities": card["capabilities"],
    }))
}

/// The ids of a card's skills, in order (a card without skills offers `chat`).
pub fn skill_ids(card: &Value) -> Vec<String> {
    let ids: Vec<String> = card["skills"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter_map(|k| k["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        vec![crate::card::DEFAULT_SKILL.into()]
    } else {
        ids
    }
}

/// A remote task as its frames reveal it.
#[derive(Clone, Debug, Default)]
pub struct Remote {
    /// The task, once known.
    pub task: Option<Task>,
    /// A direct message answer.
    pub message: Option<Message>,
}

impl Remote {
    /// Applies one result (a stream frame, a SendMessage answer or a GetTask task).
    pub fn apply(&mut self, r: StreamResponse) {
        match r {
            StreamResponse::Task(t) => self.task = Some(t),
            StreamResponse::Message(m) => self.message = Some(m),
            StreamResponse::StatusUpdate(s) => {
                if let Some(t) = &mut self.task {
                    t.status = s.status;
                } else {
                    self.task = Some(Task {
                        id: s.task_id,
                        context_id: s.context_id,
                        status: s.status,
                        artifacts: Vec::new(),
                        history: Vec::new(),
                        metadata: None,
                    });
                }
            }
            StreamResponse::ArtifactUpdate(a) => {
                let task = self.task.get_or_insert_with(|| Task {
                    id: a.task_id.clone(),
                    context_id: a.context_id.clone(),
                    status: crate::TaskStatus {
                        state: TaskState::Working,
                        message: None,
                        timestamp: None,
                    },
                    artifacts: Vec::new(),
                    history: Vec::new(),
                    metadata: None,
                });
                merge(&mut task.artifacts, a.artifact, a.append);
            }
        }
    }

    /// The remote task id, once known.
    pub fn task_id(&self) -> Option<&str> {
        self.task
            .as_ref()
            .map(|t| t.id.as_str())
            .or_else(|| self.message.as_ref().and_then(|m| m.task_id.as_deref()))
    }

    /// Whether nothing more will change without a new message: a message answer, or a task
    /// that is terminal or waiting for input or auth.
    pub fn settled(&self) -> bool {
        self.message.is_some()
            || self
                .task
                .as_ref()
                .is_some_and(|t| t.status.state.is_terminal() || t.status.state.is_interrupted())
    }

    /// The tool's answer (docs/outbound.md "Outbound connections"): the artifacts' text; `[remote agent <STATE> task=<id>] <message>`
    /// when it waits for input or auth (see [`interruption`]); an error with the remote message
    /// when it failed.
    pub fn outcome(&self) -> Result<String, String> {
        if let Some(m) = &self.message {
            return Ok(nonempty(text(&m.parts)));
        }
        let Some(t) = &self.task else {
            return Err("the remote agent answered neither a task nor a message".into());
        };
        let said = t
            .status
            .message
            .as_ref()
            .map(|m| text(&m.parts))
            .unwrap_or_default();
        match t.status.state {
            TaskState::Failed | TaskState::Rejected => Err(if said.is_empty() {
                format!(
                    "remote agent task {} ended {}",
                    t.id,
                    t.status.state.as_str()
                )
            } else {
                said
            }),
            TaskState::Canceled => Err(format!("remote agent task {} was canceled", t.id)),
            s if s.is_interrupted() => Ok(format!("{MARKER}{} task={}] {said}", s.as_str(), t.id)
                .trim_end()
                .to_owned()),
            _ => Ok(nonempty(
                t.artifacts
                    .iter()
                    .map(|a| text(&a.parts))
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
        }
    }
}

fn merge(artifacts: &mut Vec<Artifact>, a: Artifact, append: bool) {
    match artifacts
        .iter_mut()
        .find(|x| x.artifact_id == a.artifact_id)
    {
        Some(existing) if append => existing.parts.extend(a.parts),
        Some(existing) => *existing = a,
        None => artifacts.push(a),
    }
}

fn text(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| p.text.as_deref())
        .collect::<Vec<_>>()
        .join("")
}

fn nonempty(s: String) -> String {
    if s.trim().is_empty() {
        "(remote agent returned no output)".into()
    } else {
        s
    }
}

/// Retries of a failed request (transport error or 5xx): at most this many.
pub const MAX_RETRIES: u32 = 2;

/// Wait before retry `attempt` (1-based), ms.
pub fn retry_delay_ms(attempt: u32) -> u64 {
    250 * 3u64.pow(attempt.saturating_sub(1).min(4))
}

/// Wait before poll `n` (0-based) of a task that is still running, ms: 200, 400, 800 … up to 2 s.
pub fn poll_delay_ms(n: u32) -> u64 {
    (200u64 << n.min(4)).min(2000)
}

/// Whether an HTTP status is worth retrying.
pub fn retryable(status: u16) -> bool {
    status >= 500
}

/// An http(s) URL split for an outgoing request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// `https`.
    pub https: bool,
    /// `host[:port]`.
    pub authority: &'a str,
    /// The path and query (`/` when the URL has none); the fragment is dropped.
    pub path_and_query: String,
}

/// Splits an http(s) URL: the authority ends at the first `/`, `?` or `#`. A URL with
/// credentials in it (`user@host`) or without a host is refused.
pub fn split_url(url: &str) -> Result<Target<'_>, String> {
    let (https, rest) = match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(r), _) => (true, r),
        (None, Some(r)) => (false, r),
        _ => return Err(format!("{url} is not an http(s) URL")),
    };
    let rest = rest.split('#').next().unwrap_or("");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.is_empty() || authority.contains('@') {
        return Err(format!("{url} must name a host (and no user:password@)"));
    }
    let path_and_query = if tail.starts_with('/') {
        tail.to_owned()
    } else {
        format!("/{tail}")
    };
    Ok(Target {
        https,
        authority,
        path_and_query,
    })
}

/// How an interrupted remote task's outcome starts.
const MARKER: &str = "[remote agent ";

/// The remote task an outcome says is waiting, and what it asks: `(task id, question)`.
pub fn interruption(outcome: &str) -> Option<(&str, &str)> {
    let rest = outcome.strip_prefix(MARKER)?;
    let (head, question) = rest.split_once(']')?;
    let (state, task) = head.split_once(" task=")?;
    TaskState::from_name(state)
        .filter(|s| s.is_interrupted())
        .map(|_| (task, question.trim_start()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn urls_split_at_the_first_delimiter() {
        let t = |u| split_url(u).map(|t| (t.https, t.authority.to_owned(), t.path_and_query));
        assert_eq!(t("http://h?x=1"), Ok((false, "h".into(), "/?x=1".into())));
        assert_eq!(
            t("https://h:8443/a/b?c=d#frag"),
            Ok((true, "h:8443".into(), "/a/b?c=d".into()))
        );
        assert_eq!(t("http://h"), Ok((false, "h".into(), "/".into())));
        assert_eq!(t("http://h#x/y"), Ok((false, "h".into(), "/".into())));
        assert!(t("ftp://h/").is_err());
        assert!(t("http:///x").is_err());
        assert!(t("http://user:pw@h/").is_err());
    }

    use super::*;

    fn card(interfaces: Value) -> Value {
        json!({ "name": "r", "version": "2.0", "capabilities": { "streaming": true }, "skills": [{"id": "s1", "name": "S"}], "supportedInterfaces": interfaces })
    }

    #[test]
    fn picks_the_jsonrpc_1_0_interface() {
        let c = card(json!([
            { "url": "http://x/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0" },
            { "url": "http://x/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
            { "url": "http://x/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0" },
        ]));
        assert_eq!(
            endpoint(&c).unwrap(),
            Endpoint {
                url: "http://x/rpc".into(),
                streaming: true,
                v03: false,
            }
        );
        let only_old = card(
            json!([{ "url": "http://x/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3" }]),
        );
        let old = endpoint(&only_old).unwrap();
        assert_eq!((old.url.as_str(), old.v03), ("http://x/old", true));
        let grpc_only =
            card(json!([{ "url": "x:1", "protocolBinding": "GRPC", "protocolVersion": "1.0" }]));
        assert!(
            endpoint(&grpc_only)
                .unwrap_err()
                .contains("found: GRPC 1.0")
        );
        assert!(
            endpoint(&json!({"name": "x"}))
                .unwrap_err()
                .contains("found: none")
        );
        assert!(
            endpoint(&json!([1]))
                .unwrap_err()
                .contains("not a JSON object")
        );
        let bad_url = card(
            json!([{ "url": "ftp://x", "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }]),
        );
        assert!(endpoint(&bad_url).is_err());
        let p = preview(&c).unwrap();
        assert_eq!(p["endpoint"], "http://x/rpc");
        assert_eq!(p["skills"][0]["id"], "s1");
        assert_eq!(skill_ids(&c), ["s1"]);
        assert_eq!(skill_ids(&json!({})), ["chat"]);
    }

    #[test]
    fn reads_a_0_3_card() {
        let old = json!({"name": "o", "protocolVersion": "0.3.0", "url": "http://x/a2a", "preferredTransport": "JSONRPC",
            "capabilities": {"streaming": false}, "skills": []});
        assert_eq!(
            endpoint(&old).unwrap(),
            Endpoint {
                url: "http://x/a2a".into(),
                streaming: false,
                v03: true
            }
        );
        let grpc_first = json!({"name": "o", "protocolVersion": "0.3.0", "url": "x:50051", "preferredTransport": "GRPC",
            "additionalInterfaces": [{"url": "x:50051", "transport": "GRPC"}, {"url": "http://x/rpc", "transport": "JSONRPC"}]});
        assert_eq!(endpoint(&grpc_first).unwrap().url, "http://x/rpc");
        let too_old = json!({"name": "o", "protocolVersion": "0.2.5", "url": "http://x/a2a"});
        assert!(endpoint(&too_old).is_err());
    }

    fn frame(v: Value) -> StreamResponse {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn assembles_streamed_chunks_and_formats_the_outcome() {
        let mut r = Remote::default();
        r.apply(frame(json!({"task": {"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}})));
        assert!(!r.settled());
        r.apply(frame(json!({"artifactUpdate": {"taskId": "t1", "contextId": "c", "artifact": {"artifactId": "a", "parts": [{"text": "Hel"}]}}})));
        r.apply(frame(
            json!({"artifactUpdate": {"taskId": "t1", "contextId": "c", "append": true, "lastChunk": true, "artifact": {"artifactId": "a", "parts": [{"text": "lo"}]}}}),
        ));
        r.apply(frame(json!({"statusUpdate": {"taskId": "t1", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}})));
        assert!(r.settled());
        assert_eq!(r.task_id(), Some("t1"));
        assert_eq!(r.outcome().unwrap(), "Hello");
    }

    #[test]
    fn an_interrupted_outcome_names_its_task_and_question() {
        let mut r = Remote::default();
        r.apply(frame(json!({"task": {"id": "t7", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "which city?"}]}}}})));
        let said = r.outcome().unwrap();
        assert_eq!(interruption(&said), Some(("t7", "which city?")));
        assert_eq!(
            interruption("[remote agent TASK_STATE_COMPLETED task=t] x"),
            None
        );
        assert_eq!(interruption("plain answer"), None);
    }

    #[test]
    fn outcomes_per_state() {
        let with = |state: &str, msg: Option<&str>, artifacts: Value| {
            let mut r = Remote::default();
            let status = match msg {
                Some(m) => {
                    json!({"state": state, "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": m}]}})
                }
                None => json!({"state": state}),
            };
            r.apply(frame(json!({"task": {"id": "t9", "contextId": "c", "status": status, "artifacts": artifacts}})));
            r.outcome()
        };
        assert_eq!(
            with("TASK_STATE_FAILED", Some("disk full"), json!([])),
            Err("disk full".into())
        );
        assert!(
            with("TASK_STATE_REJECTED", None, json!([]))
                .unwrap_err()
                .contains("t9")
        );
        assert_eq!(
            with("TASK_STATE_INPUT_REQUIRED", Some("which file?"), json!([])),
            Ok("[remote agent TASK_STATE_INPUT_REQUIRED task=t9] which file?".into())
        );
        assert_eq!(
            with("TASK_STATE_AUTH_REQUIRED", None, json!([])),
            Ok("[remote agent TASK_STATE_AUTH_REQUIRED task=t9]".into())
        );
        assert_eq!(
            with("TASK_STATE_COMPLETED", None, json!([])),
            Ok("(remote agent returned no output)".into())
        );
        let two = json!([{"artifactId": "a", "parts": [{"text": "one"}]}, {"artifactId": "b", "parts": [{"data": {"k": 1}}]}, {"artifactId": "c", "parts": [{"text": "two"}]}]);
        assert_eq!(
            with("TASK_STATE_COMPLETED", None, two),
            Ok("one\ntwo".into())
        );
        assert!(
            with("TASK_STATE_CANCELED", None, json!([]))
                .unwrap_err()
                .contains("canceled")
        );
        let mut m = Remote::default();
        m.apply(frame(json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "taskId": "t2", "parts": [{"text": "direct"}]}})));
        assert!(m.settled());
        assert_eq!(
            (m.task_id(), m.outcome()),
            (Some("t2"), Ok("direct".into()))
        );
    }

    #[test]
    fn retry_and_poll_schedules() {
        assert_eq!((retry_delay_ms(1), retry_delay_ms(2)), (250, 750));
        assert_eq!(
            (poll_delay_ms(0), poll_delay_ms(1), poll_delay_ms(9)),
            (200, 400, 2000)
        );
        assert!(retryable(503) && retryable(500) && !retryable(404) && !retryable(401));
    }
}
