//! A2A 0.3 beside 1.0 (docs/protocol.md "A2A 0.3"): the 0.3 JSON-RPC methods run as their 1.0
//! successors, their params translated in, their results and stream events translated out, so a
//! 0.3 caller and a 1.0 caller of one agent see the same tasks. Pure JSON to JSON.
//!
//! 0.3 shapes: `kind` discriminators (`task`, `message`, `status-update`, `artifact-update`;
//! parts `text`, `file`, `data`), lowercase kebab states and roles, `final` on status updates,
//! `blocking` where 1.0 has `returnImmediately`, push configs nested under
//! `pushNotificationConfig`.

use serde_json::{Map, Value, json};

use crate::methods::LEGACY_METHODS;

pub mod rest;

/// The version a 0.3 card announces.
pub const VERSION: &str = "0.3.0";

/// The 1.0 method a 0.3 method name runs as.
pub fn method(name: &str) -> Option<&'static str> {
    LEGACY_METHODS
        .iter()
        .find(|(old, _)| *old == name)
        .map(|(_, new)| *new)
}

/// The 0.3 name of a 1.0 method, if 0.3 has it.
pub fn name_03(method: &str) -> Option<&'static str> {
    LEGACY_METHODS
        .iter()
        .find(|(_, new)| *new == method)
        .map(|(old, _)| *old)
}

/// A method as called: its 1.0 name and the protocol version it was called in.
pub fn as_1_0(name: &str) -> (&str, &'static str) {
    match method(name) {
        Some(successor) => (successor, "0.3"),
        None => (name, "1.0"),
    }
}

/// Whether an `A2A-Version` names 0.3 (`0.3`, `0.3.x`).
pub fn is_v03(version: &str) -> bool {
    let v = version.trim();
    v == "0.3" || v.strip_prefix("0.3.").is_some_and(|p| !p.is_empty())
}

/// The 1.0 params of a 0.3 call to `method` (its 1.0 name).
pub fn params_in(method: &str, params: &Value) -> Value {
    let p = params.as_object().cloned().unwrap_or_default();
    match method {
        "SendMessage" | "SendStreamingMessage" => {
            let mut out = Map::new();
            if let Some(m) = p.get("message") {
                out.insert("message".into(), message_in(m));
            }
            if let Some(c) = p.get("configuration").and_then(Value::as_object) {
                let mut conf = Map::new();
                copy(c, &mut conf, &["acceptedOutputModes", "historyLength"]);
                if c.get("blocking") == Some(&Value::Bool(false)) {
                    conf.insert("returnImmediately".into(), Value::Bool(true));
                }
                if let Some(push) = c.get("pushNotificationConfig") {
                    conf.insert(
                        "taskPushNotificationConfig".into(),
                        Value::Object(push_config_in(push, None)),
                    );
                }
                out.insert("configuration".into(), Value::Object(conf));
            }
            copy(&p, &mut out, &["metadata"]);
            Value::Object(out)
        }
        "CreateTaskPushNotificationConfig" => {
            let task_id = p.get("taskId").and_then(Value::as_str);
            Value::Object(push_config_in(
                p.get("pushNotificationConfig").unwrap_or(&Value::Null),
                task_id,
            ))
        }
        // 0.3 named the task `id` and the config `pushNotificationConfigId`; a get may name
        // the task alone (0.3's TaskIdParams form, from when a task had one config): that config
        // is the one set without an id, which 0.3 and this agent store under the task's id.
        "GetTaskPushNotificationConfig" | "DeleteTaskPushNotificationConfig" => {
            let mut out = Map::new();
            rename(&p, &mut out, "id", "taskId");
            rename(&p, &mut out, "pushNotificationConfigId", "id");
            if method == "GetTaskPushNotificationConfig"
                && out.get("id").is_none_or(|v| v.is_null() || *v == "")
                && let Some(task) = p.get("id")
            {
                out.insert("id".into(), task.clone());
            }
            Value::Object(out)
        }
        "ListTaskPushNotificationConfigs" => {
            let mut out = Map::new();
            rename(&p, &mut out, "id", "taskId");
            Value::Object(out)
        }
        "ListTasks" => {
            let mut out = p.clone();
            if let Some(s) = p.get("status").and_then(Value::as_str) {
                out.insert("status".into(), Value::String(state_in(s)));
            }
            Value::Object(out)
        }
        // GetTask, CancelTask, SubscribeToTask: `id`, `historyLength`, `metadata` as in 1.0.
        _ => Value::Object(p),
    }
}

/// The 0.3 result of the 1.0 `result` of `method`.
pub fn result_out(method: &str, result: &Value) -> Value {
    match method {
        "SendMessage" | "SendStreamingMessage" | "SubscribeToTask" => event_out(result),
        "GetTask" | "CancelTask" => task_out(result),
        "ListTasks" => {
            let mut out = result.as_object().cloned().unwrap_or_default();
            if let Some(tasks) = result.get("tasks").and_then(Value::as_array) {
                out.insert("tasks".into(), tasks.iter().map(task_out).collect());
            }
            Value::Object(out)
        }
        "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => {
            push_config_out(result)
        }
        "ListTaskPushNotificationConfigs" => result
            .get("configs")
            .and_then(Value::as_array)
            .map(|c| c.iter().map(push_config_out).collect())
            .unwrap_or_else(|| json!([])),
        "DeleteTaskPushNotificationConfig" => Value::Null,
        _ => result.clone(),
    }
}

/// The 0.3 params of a 1.0 call the outbound client makes to a 0.3 agent (`SendMessage`,
/// `SendStreamingMessage`, `GetTask`, `CancelTask`).
pub fn params_out(method: &str, params: &Value) -> Value {
    let mut out = params.as_object().cloned().unwrap_or_default();
    if matches!(method, "SendMessage" | "SendStreamingMessage") {
        if let Some(m) = params.get("message") {
            out.insert("message".into(), message_out(m));
        }
        if let Some(c) = params.get("configuration").and_then(Value::as_object) {
            let mut conf = c.clone();
            if conf.remove("returnImmediately") == Some(Value::Bool(true)) {
                conf.insert("blocking".into(), Value::Bool(false));
            }
            out.insert("configuration".into(), Value::Object(conf));
        }
    }
    Value::Object(out)
}

/// The 1.0 result of a 0.3 agent's answer to `method` (its 1.0 name): a bare task for
/// `GetTask` and `CancelTask`, else a `StreamResponse` (its one member).
pub fn result_in(method: &str, result: &Value) -> Value {
    match method {
        "GetTask" | "CancelTask" => task_in(result),
        _ => event_in(result),
    }
}

/// The 1.0 `StreamResponse` of a 0.3 event (or send result), by its `kind`.
pub fn event_in(event: &Value) -> Value {
    match event["kind"].as_str() {
        Some("task") => json!({ "task": task_in(event) }),
        Some("message") => json!({ "message": message_in(event) }),
        Some("status-update") => {
            let mut u = untagged(event);
            u.remove("final");
            u.insert("status".into(), IN.status(&event["status"]));
            json!({ "statusUpdate": u })
        }
        Some("artifact-update") => {
            let mut u = untagged(event);
            u.insert("artifact".into(), IN.artifact(&event["artifact"]));
            json!({ "artifactUpdate": u })
        }
        _ => event.clone(),
    }
}

/// The 1.0 form of a 0.3 task.
pub fn task_in(task: &Value) -> Value {
    IN.task(untagged(task), task)
}

/// `value`'s members without `kind`.
fn untagged(value: &Value) -> Map<String, Value> {
    let mut out = value.as_object().cloned().unwrap_or_default();
    out.remove("kind");
    out
}

/// A 0.3 event (or send result) of a 1.0 `StreamResponse` / `SendMessageResponse`: its one
/// member, `kind`-tagged; a status update says whether it is `final`.
pub fn event_out(response: &Value) -> Value {
    if let Some(t) = response.get("task") {
        return task_out(t);
    }
    if let Some(m) = response.get("message") {
        return message_out(m);
    }
    if let Some(u) = response.get("statusUpdate") {
        let mut out = tagged("status-update", u);
        let state = u["status"]["state"].as_str().unwrap_or("");
        out.insert("final".into(), Value::Bool(ends_stream(state)));
        out.insert("status".into(), OUT.status(&u["status"]));
        return Value::Object(out);
    }
    if let Some(u) = response.get("artifactUpdate") {
        let mut out = tagged("artifact-update", u);
        out.insert("artifact".into(), OUT.artifact(&u["artifact"]));
        return Value::Object(out);
    }
    response.clone()
}

/// Whether a status update in a 1.0 `state` is `final` in 0.3: the task settled, or waits for
/// its caller; either way a 0.3 stream ends there.
fn ends_stream(state: &str) -> bool {
    matches!(
        state,
        "TASK_STATE_COMPLETED"
            | "TASK_STATE_FAILED"
            | "TASK_STATE_CANCELED"
            | "TASK_STATE_REJECTED"
            | "TASK_STATE_INPUT_REQUIRED"
            | "TASK_STATE_AUTH_REQUIRED"
    )
}

/// The 0.3 form of a 1.0 task.
pub fn task_out(task: &Value) -> Value {
    OUT.task(tagged("task", task), task)
}

/// `value`'s members with `kind` first.
fn tagged(kind: &str, value: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(kind.into()));
    if let Some(o) = value.as_object() {
        out.extend(o.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    out
}

/// How the nested shapes of a task map, one way or the other.
struct Shapes {
    state: fn(&str) -> String,
    message: fn(&Value) -> Value,
    part: fn(&Value) -> Value,
}

/// 1.0 to 0.3.
const OUT: Shapes = Shapes {
    state: state_out,
    message: message_out,
    part: part_out,
};

/// 0.3 to 1.0.
const IN: Shapes = Shapes {
    state: state_in,
    message: message_in,
    part: part_in,
};

impl Shapes {
    /// `base` (the task's own members, tagged or not) with its status, artifacts and history
    /// mapped.
    fn task(&self, mut base: Map<String, Value>, task: &Value) -> Value {
        base.insert("status".into(), self.status(&task["status"]));
        if let Some(a) = task.get("artifacts").and_then(Value::as_array) {
            base.insert(
                "artifacts".into(),
                a.iter().map(|a| self.artifact(a)).collect(),
            );
        }
        if let Some(h) = task.get("history").and_then(Value::as_array) {
            base.insert("history".into(), h.iter().map(self.message).collect());
        }
        Value::Object(base)
    }

    fn status(&self, status: &Value) -> Value {
        let mut out = status.as_object().cloned().unwrap_or_default();
        let state = status["state"].as_str().unwrap_or("");
        out.insert("state".into(), Value::String((self.state)(state)));
        if let Some(m) = status.get("message") {
            out.insert("message".into(), (self.message)(m));
        }
        Value::Object(out)
    }

    fn artifact(&self, artifact: &Value) -> Value {
        let mut out = artifact.as_object().cloned().unwrap_or_default();
        if let Some(parts) = artifact.get("parts").and_then(Value::as_array) {
            out.insert("parts".into(), parts.iter().map(self.part).collect());
        }
        Value::Object(out)
    }
}

/// The 0.3 form of a 1.0 message.
pub fn message_out(m: &Value) -> Value {
    let mut out = tagged("message", m);
    let role = match m["role"].as_str() {
        Some("ROLE_AGENT") => "agent",
        _ => "user",
    };
    out.insert("role".into(), Value::String(role.into()));
    if let Some(parts) = m.get("parts").and_then(Value::as_array) {
        out.insert("parts".into(), parts.iter().map(part_out).collect());
    }
    Value::Object(out)
}

/// The 1.0 form of a 0.3 message.
pub fn message_in(m: &Value) -> Value {
    let mut out = m.as_object().cloned().unwrap_or_default();
    out.remove("kind");
    let role = match m["role"].as_str() {
        Some("agent") => "ROLE_AGENT",
        Some("user") => "ROLE_USER",
        // Anything else is left for the 1.0 parser to refuse, naming it.
        Some(other) => other,
        None => "ROLE_UNSPECIFIED",
    };
    out.insert("role".into(), Value::String(role.into()));
    if let Some(parts) = m.get("parts").and_then(Value::as_array) {
        out.insert("parts".into(), parts.iter().map(part_in).collect());
    }
    Value::Object(out)
}

fn part_out(p: &Value) -> Value {
    let mut out = Map::new();
    if let Some(t) = p.get("text") {
        out.insert("kind".into(), json!("text"));
        out.insert("text".into(), t.clone());
    } else if p.get("raw").is_some() || p.get("url").is_some() {
        let mut file = Map::new();
        rename_obj(p, &mut file, "raw", "bytes");
        rename_obj(p, &mut file, "url", "uri");
        rename_obj(p, &mut file, "mediaType", "mimeType");
        rename_obj(p, &mut file, "filename", "name");
        out.insert("kind".into(), json!("file"));
        out.insert("file".into(), Value::Object(file));
    } else if let Some(d) = p.get("data") {
        out.insert("kind".into(), json!("data"));
        out.insert("data".into(), data_object(d));
    }
    if let Some(m) = p.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    Value::Object(out)
}

/// A 1.0 data part's value as 0.3 holds it: an object (any other value as `{"value": …}`).
fn data_object(d: &Value) -> Value {
    match d {
        Value::Object(_) => d.clone(),
        other => json!({ "value": other }),
    }
}

fn part_in(p: &Value) -> Value {
    let mut out = Map::new();
    match p["kind"].as_str() {
        Some("file") => {
            let file = &p["file"];
            rename_obj(file, &mut out, "bytes", "raw");
            rename_obj(file, &mut out, "uri", "url");
            rename_obj(file, &mut out, "mimeType", "mediaType");
            rename_obj(file, &mut out, "name", "filename");
        }
        Some("data") => {
            out.insert("data".into(), p["data"].clone());
        }
        _ => {
            if let Some(t) = p.get("text") {
                out.insert("text".into(), t.clone());
            }
        }
    }
    if let Some(m) = p.get("metadata") {
        out.insert("metadata".into(), m.clone());
    }
    Value::Object(out)
}

/// A 1.0 state (`TASK_STATE_INPUT_REQUIRED`) as 0.3 writes it (`input-required`).
pub fn state_out(state: &str) -> String {
    match state.strip_prefix("TASK_STATE_") {
        Some("UNSPECIFIED") | None => "unknown".into(),
        Some(s) => s.to_ascii_lowercase().replace('_', "-"),
    }
}

/// A 0.3 state as 1.0 writes it (`unknown`, or none, is unspecified).
pub fn state_in(state: &str) -> String {
    match state {
        "" | "unknown" => "TASK_STATE_UNSPECIFIED".into(),
        s => format!("TASK_STATE_{}", s.to_ascii_uppercase().replace('-', "_")),
    }
}

/// A 1.0 push config from a 0.3 `PushNotificationConfig` (and its task).
fn push_config_in(c: &Value, task_id: Option<&str>) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(t) = task_id {
        out.insert("taskId".into(), json!(t));
    }
    copy_obj(c, &mut out, &["id", "url", "token"]);
    if let Some(a) = c.get("authentication") {
        let scheme = a["schemes"]
            .as_array()
            .and_then(|s| s.first())
            .cloned()
            .unwrap_or(Value::Null);
        let mut auth = Map::new();
        auth.insert("scheme".into(), scheme);
        copy_obj(a, &mut auth, &["credentials"]);
        out.insert("authentication".into(), Value::Object(auth));
    }
    out
}

/// The 0.3 `TaskPushNotificationConfig` of a 1.0 one.
fn push_config_out(c: &Value) -> Value {
    json!({ "taskId": c["taskId"], "pushNotificationConfig": push_notification_config(c) })
}

/// The 0.3 `PushNotificationConfig` of a 1.0 push config (the same in both 0.3 bindings).
fn push_notification_config(c: &Value) -> Map<String, Value> {
    let mut config = Map::new();
    copy_obj(c, &mut config, &["id", "url", "token"]);
    if let Some(a) = c.get("authentication") {
        let mut auth = Map::new();
        auth.insert("schemes".into(), json!([a["scheme"]]));
        copy_obj(a, &mut auth, &["credentials"]);
        config.insert("authentication".into(), Value::Object(auth));
    }
    config
}

fn copy(from: &Map<String, Value>, to: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        if let Some(v) = from.get(*k) {
            to.insert((*k).into(), v.clone());
        }
    }
}

fn copy_obj(from: &Value, to: &mut Map<String, Value>, keys: &[&str]) {
    if let Some(o) = from.as_object() {
        copy(o, to, keys);
    }
}

fn rename(from: &Map<String, Value>, to: &mut Map<String, Value>, old: &str, new: &str) {
    if let Some(v) = from.get(old) {
        to.insert(new.into(), v.clone());
    }
}

fn rename_obj(from: &Value, to: &mut Map<String, Value>, old: &str, new: &str) {
    if let Some(o) = from.as_object() {
        rename(o, to, old, new);
    }
}

/// The 1.0 params both 0.3 bindings' test sends come in as: every kind of part, a push config,
/// and a send that returns at once.
#[cfg(test)]
fn sent_1_0() -> Value {
    json!({
        "message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c",
            "parts": [
                {"text": "hi", "metadata": {"a": 1}},
                {"raw": "aGk=", "mediaType": "text/plain", "filename": "a.txt"},
                {"url": "https://x/y.png"},
                {"data": {"k": "v"}}
            ]},
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 2, "returnImmediately": true,
            "taskPushNotificationConfig": {"url": "https://hook", "token": "t", "authentication": {"scheme": "Bearer", "credentials": "c"}}},
        "metadata": {"m": true}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_and_versions() {
        assert_eq!(method("message/send"), Some("SendMessage"));
        assert_eq!(method("tasks/resubscribe"), Some("SubscribeToTask"));
        assert_eq!(
            method("agent/getAuthenticatedExtendedCard"),
            Some("GetExtendedAgentCard")
        );
        assert_eq!(method("SendMessage"), None);
        assert_eq!(as_1_0("tasks/get"), ("GetTask", "0.3"));
        assert_eq!(as_1_0("GetTask"), ("GetTask", "1.0"));
        assert_eq!(name_03("SubscribeToTask"), Some("tasks/resubscribe"));
        assert_eq!(name_03("Nope"), None);
        for v in ["0.3", "0.3.0", " 0.3.1 "] {
            assert!(is_v03(v), "{v}");
        }
        for v in ["1.0", "0.30", "0.3.", "0.2.5", ""] {
            assert!(!is_v03(v), "{v}");
        }
    }

    #[test]
    fn a_send_comes_in_as_1_0() {
        let p = json!({
            "message": {"kind": "message", "messageId": "m1", "role": "user", "contextId": "c",
                "parts": [
                    {"kind": "text", "text": "hi", "metadata": {"a": 1}},
                    {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}},
                    {"kind": "file", "file": {"uri": "https://x/y.png"}},
                    {"kind": "data", "data": {"k": "v"}}
                ]},
            "configuration": {"blocking": false, "historyLength": 2, "acceptedOutputModes": ["text/plain"],
                "pushNotificationConfig": {"url": "https://hook", "token": "t", "authentication": {"schemes": ["Bearer"], "credentials": "c"}}},
            "metadata": {"m": true}
        });
        assert_eq!(params_in("SendMessage", &p), sent_1_0());
        // Blocking is 0.3's default, as 1.0's.
        let blocking = params_in(
            "SendMessage",
            &json!({"message": {}, "configuration": {"blocking": true}}),
        );
        assert_eq!(blocking["configuration"], json!({}));
    }

    #[test]
    fn results_go_out_as_0_3() {
        let task = json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-01T00:00:00Z",
                "message": {"messageId": "a", "role": "ROLE_AGENT", "parts": [{"text": "more?"}]}},
            "artifacts": [{"artifactId": "r", "parts": [{"data": [1, 2]}, {"url": "u", "mediaType": "image/png"}]}],
            "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}]});
        let out = result_out("SendMessage", &json!({ "task": task }));
        assert_eq!(
            out,
            json!({"kind": "task", "id": "t", "contextId": "c",
                "status": {"state": "input-required", "timestamp": "2026-01-01T00:00:00Z",
                    "message": {"kind": "message", "messageId": "a", "role": "agent", "parts": [{"kind": "text", "text": "more?"}]}},
                "artifacts": [{"artifactId": "r", "parts": [{"kind": "data", "data": {"value": [1, 2]}},
                    {"kind": "file", "file": {"uri": "u", "mimeType": "image/png"}}]}],
                "history": [{"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}]})
        );
        assert_eq!(
            result_out("GetTask", &task)["status"]["state"],
            "input-required"
        );
        let message = result_out(
            "SendMessage",
            &json!({"message": {"messageId": "x", "role": "ROLE_AGENT", "parts": []}}),
        );
        assert_eq!(
            (message["kind"].as_str(), message["role"].as_str()),
            (Some("message"), Some("agent"))
        );
    }

    #[test]
    fn status_updates_say_when_they_are_final() {
        for (state, last) in [
            ("TASK_STATE_WORKING", false),
            ("TASK_STATE_SUBMITTED", false),
            ("TASK_STATE_COMPLETED", true),
            ("TASK_STATE_CANCELED", true),
            ("TASK_STATE_AUTH_REQUIRED", true),
        ] {
            let e = event_out(
                &json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": state}}}),
            );
            assert_eq!(e["kind"], "status-update");
            assert_eq!(e["final"], last, "{state}");
        }
        let e = event_out(
            &json!({"artifactUpdate": {"taskId": "t", "append": true, "lastChunk": false,
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}}),
        );
        assert_eq!(
            e,
            json!({"kind": "artifact-update", "taskId": "t", "append": true, "lastChunk": false,
                "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "x"}]}})
        );
    }

    #[test]
    fn push_configs_both_ways() {
        let set = json!({"taskId": "t", "pushNotificationConfig": {"id": "p", "url": "https://h", "token": "k",
            "authentication": {"schemes": ["Bearer"], "credentials": "c"}}});
        let v1 = params_in("CreateTaskPushNotificationConfig", &set);
        assert_eq!(
            v1,
            json!({"taskId": "t", "id": "p", "url": "https://h", "token": "k",
                "authentication": {"scheme": "Bearer", "credentials": "c"}})
        );
        assert_eq!(result_out("GetTaskPushNotificationConfig", &v1), set);
        assert_eq!(
            params_in("GetTaskPushNotificationConfig", &json!({"id": "t"})),
            json!({"taskId": "t", "id": "t"}),
            "0.3's TaskIdParams form gets the config set without an id"
        );
        assert_eq!(
            params_in("DeleteTaskPushNotificationConfig", &json!({"id": "t"})),
            json!({"taskId": "t"}),
            "a delete names its config"
        );
        assert_eq!(
            result_out("ListTaskPushNotificationConfigs", &json!({"configs": [v1]})),
            json!([set])
        );
        assert_eq!(
            params_in(
                "GetTaskPushNotificationConfig",
                &json!({"id": "t", "pushNotificationConfigId": "p"})
            ),
            json!({"taskId": "t", "id": "p"})
        );
        assert_eq!(
            params_in("ListTaskPushNotificationConfigs", &json!({"id": "t"})),
            json!({"taskId": "t"})
        );
        assert_eq!(
            result_out("DeleteTaskPushNotificationConfig", &json!({})),
            Value::Null
        );
    }

    #[test]
    fn the_outbound_client_speaks_0_3_and_reads_its_answers_as_1_0() {
        let params = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], "contextId": "c"},
            "configuration": {"returnImmediately": true}});
        let old = params_out("SendMessage", &params);
        assert_eq!(
            old,
            json!({"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}], "contextId": "c"},
                "configuration": {"blocking": false}})
        );
        assert_eq!(
            params_in("SendMessage", &old),
            params,
            "the round trip is the identity"
        );
        assert_eq!(
            params_out("GetTask", &json!({"id": "t"})),
            json!({"id": "t"})
        );

        // Every 1.0 answer survives the trip out and back.
        let task = json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED", "message": {"messageId": "a", "role": "ROLE_AGENT", "parts": [{"text": "ok"}]}},
            "artifacts": [{"artifactId": "r", "parts": [{"text": "x"}, {"raw": "aGk=", "mediaType": "text/plain"}, {"data": {"k": 1}}]}]});
        for response in [
            json!({ "task": task }),
            json!({"message": {"messageId": "x", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}),
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true, "artifact": {"artifactId": "r", "parts": [{"text": "y"}]}}}),
        ] {
            assert_eq!(
                result_in("SendStreamingMessage", &event_out(&response)),
                response
            );
        }
        assert_eq!(result_in("GetTask", &task_out(&task)), task);
        assert_eq!(
            result_in(
                "GetTask",
                &json!({"kind": "task", "id": "t", "status": {"state": "unknown"}})
            )["status"]["state"],
            "TASK_STATE_UNSPECIFIED"
        );
    }

    #[test]
    fn states_both_ways() {
        for (v1, v03) in [
            ("TASK_STATE_SUBMITTED", "submitted"),
            ("TASK_STATE_WORKING", "working"),
            ("TASK_STATE_INPUT_REQUIRED", "input-required"),
            ("TASK_STATE_AUTH_REQUIRED", "auth-required"),
            ("TASK_STATE_COMPLETED", "completed"),
            ("TASK_STATE_REJECTED", "rejected"),
        ] {
            assert_eq!(state_out(v1), v03);
            assert_eq!(state_in(v03), v1);
        }
        assert_eq!(state_out("TASK_STATE_UNSPECIFIED"), "unknown");
    }
}
