//! A2A 0.3 over HTTP+JSON: the `/v1/…` paths of the 0.3 proto (`a2a.v1`), served as their 1.0
//! methods. Bodies are that proto's JSON, which differs from 1.0's in a few names: a message
//! holds `content`, a file part `fileWithUri` / `fileWithBytes` / `mimeType` / `name`, a data
//! part a nested `data` object, and a push config is `{name: "tasks/{id}/pushNotificationConfigs/{id}",
//! pushNotificationConfig}`. States and roles are the same enum names. 0.3 clients parse answers
//! strictly, so only the proto's fields go out.

use serde_json::{Map, Value, json};

use super::{
    copy, copy_obj, data_object, ends_stream, push_config_in, push_notification_config, rename_obj,
};
use crate::errors::{ErrorKind, RpcError};
use crate::rest::{self, Call, Unrouted};

/// The path prefix of the 0.3 binding.
const PREFIX: &str = "/v1/";

/// Whether `path` (relative to the interface URL) is a 0.3 path: it begins `/v1/`. A 1.0
/// request to a tenant named `v1` says `A2A-Version: 1.0` and is not read as 0.3.
pub fn is_path(path: &str) -> bool {
    path.starts_with(PREFIX)
}

/// Routes a 0.3 request (`path` from `/v1/`) as the 1.0 call it stands for, its body read in.
pub fn route(verb: &str, path: &str, query: &str, body: &[u8]) -> Result<Call, Unrouted> {
    let below = &path[PREFIX.len() - 1..];
    if below.trim_end_matches('/') == "/card" {
        if verb != "GET" {
            let error = RpcError::new(
                ErrorKind::MethodNotFound,
                format!("{verb} is not allowed on {path}; use GET"),
            );
            return Err(Unrouted {
                error,
                allow: Some("GET"),
            });
        }
        return Ok(Call {
            method: "GetExtendedAgentCard",
            params: json!({}),
        });
    }
    // The 1.0 routes have the same shapes below the prefix; the body is read here.
    let Call { method, params } = rest::route(verb, below, query, b"")?;
    let mut params = params.as_object().cloned().unwrap_or_default();
    if params.contains_key("tenant") {
        return Err(Unrouted {
            error: RpcError::new(
                ErrorKind::MethodNotFound,
                format!("no A2A 0.3 operation at {path}"),
            ),
            allow: None,
        });
    }
    let body = rest::body_fields(body)?;
    match method {
        "SendMessage" | "SendStreamingMessage" => {
            if let Some(m) = body.get("message") {
                params.insert("message".into(), message_in(m));
            }
            if let Some(c) = body.get("configuration") {
                params.insert("configuration".into(), configuration_in(c));
            }
            copy(&body, &mut params, &["metadata"]);
        }
        "CreateTaskPushNotificationConfig" => {
            let config = body
                .get("config")
                .map_or(&Value::Null, |c| &c["pushNotificationConfig"]);
            let task_id = params.get("taskId").and_then(Value::as_str);
            let mut c = push_config_in(config, task_id);
            if let Some(id) = body.get("configId").filter(|id| id.as_str() != Some("")) {
                c.insert("id".into(), id.clone());
            }
            params = c;
        }
        // CancelTask's body only names the task again; the others take none.
        _ => {}
    }
    Ok(Call {
        method,
        params: Value::Object(params),
    })
}

/// The 1.0 `SendMessageConfiguration` of a 0.3 one. `blocking` is a proto3 bool: absent is
/// false, as the 0.3 SDK's server reads it.
fn configuration_in(c: &Value) -> Value {
    let mut out = Map::new();
    copy_obj(c, &mut out, &["acceptedOutputModes", "historyLength"]);
    if c.get("blocking") != Some(&Value::Bool(true)) {
        out.insert("returnImmediately".into(), Value::Bool(true));
    }
    if let Some(push) = c.get("pushNotification") {
        out.insert(
            "taskPushNotificationConfig".into(),
            Value::Object(push_config_in(push, None)),
        );
    }
    Value::Object(out)
}

/// The members a message has in both versions (1.0's `referenceTaskIds` has no 0.3 field).
const MESSAGE_FIELDS: [&str; 6] = [
    "messageId",
    "contextId",
    "taskId",
    "role",
    "metadata",
    "extensions",
];

/// `m`'s shared members, and its parts (`from`) under `to`, each mapped by `part`.
fn message(m: &Value, from: &str, to: &str, part: fn(&Value) -> Value) -> Value {
    let mut out = Map::new();
    copy_obj(m, &mut out, &MESSAGE_FIELDS);
    let parts = m[from].as_array().map(Vec::as_slice).unwrap_or(&[]);
    out.insert(to.into(), parts.iter().map(part).collect());
    Value::Object(out)
}

/// The 1.0 form of a 0.3 proto message: `content` is `parts`.
fn message_in(m: &Value) -> Value {
    message(m, "content", "parts", part_in)
}

fn part_in(p: &Value) -> Value {
    let mut out = Map::new();
    if let Some(file) = p.get("file") {
        rename_obj(file, &mut out, "fileWithUri", "url");
        if let Some(b) = file.get("fileWithBytes") {
            out.insert("raw".into(), bytes_in(b));
        }
        rename_obj(file, &mut out, "mimeType", "mediaType");
        rename_obj(file, &mut out, "name", "filename");
    } else if let Some(data) = p.get("data") {
        out.insert(
            "data".into(),
            data.get("data").cloned().unwrap_or(json!({})),
        );
    } else {
        copy_obj(p, &mut out, &["text"]);
    }
    copy_obj(p, &mut out, &["metadata"]);
    Value::Object(out)
}

/// A part's 1.0 `raw` (base64) of 0.3's `fileWithBytes`. The 0.3 SDKs keep a file as its
/// base64 text and put that text in the proto's `bytes`, so on the wire it is base64 twice; one
/// layer comes off. A `fileWithBytes` that is not base64 text once decoded (a client that sent
/// the file's own bytes) is taken as it is.
fn bytes_in(wire: &Value) -> Value {
    let Some(text) = wire.as_str() else {
        return wire.clone();
    };
    match crate::types::decode_base64(text).map(String::from_utf8) {
        Ok(Ok(inner)) if crate::types::decode_base64(&inner).is_ok() => Value::String(inner),
        _ => wire.clone(),
    }
}

/// 0.3's `fileWithBytes` of a part's 1.0 `raw`: the base64 text encoded once more, as the 0.3
/// SDKs read it.
fn bytes_out(raw: &Value) -> Value {
    use base64::Engine;
    match raw.as_str() {
        Some(text) => Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
        None => raw.clone(),
    }
}

/// The 0.3 answer to `method` (its 1.0 name) of its 1.0 `result`.
pub fn result_out(method: &str, result: &Value) -> Value {
    match method {
        "SendMessage" | "SendStreamingMessage" | "SubscribeToTask" => event_out(result),
        "GetTask" | "CancelTask" => task_out(result),
        "ListTasks" => {
            let mut out = Map::new();
            let tasks = result["tasks"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            out.insert("tasks".into(), tasks.iter().map(task_out).collect());
            copy_obj(result, &mut out, &["nextPageToken"]);
            Value::Object(out)
        }
        "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig" => {
            push_config_out(result)
        }
        "ListTaskPushNotificationConfigs" => {
            let mut out = Map::new();
            let configs = result["configs"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            out.insert(
                "configs".into(),
                configs.iter().map(push_config_out).collect(),
            );
            copy_obj(result, &mut out, &["nextPageToken"]);
            Value::Object(out)
        }
        "DeleteTaskPushNotificationConfig" => json!({}),
        _ => result.clone(),
    }
}

/// The 0.3 `StreamResponse` (or `SendMessageResponse`) of a 1.0 one: the same members, each in
/// its 0.3 fields; a status update says whether it is `final`.
pub fn event_out(response: &Value) -> Value {
    if let Some(t) = response.get("task") {
        return json!({ "task": task_out(t) });
    }
    if let Some(m) = response.get("message") {
        return json!({ "message": message_out(m) });
    }
    if let Some(u) = response.get("statusUpdate") {
        let mut out = Map::new();
        copy_obj(u, &mut out, &["taskId", "contextId", "metadata"]);
        out.insert("status".into(), status_out(&u["status"]));
        let state = u["status"]["state"].as_str().unwrap_or("");
        out.insert("final".into(), Value::Bool(ends_stream(state)));
        return json!({ "statusUpdate": out });
    }
    if let Some(u) = response.get("artifactUpdate") {
        let mut out = Map::new();
        copy_obj(
            u,
            &mut out,
            &["taskId", "contextId", "append", "lastChunk", "metadata"],
        );
        out.insert("artifact".into(), artifact_out(&u["artifact"]));
        return json!({ "artifactUpdate": out });
    }
    response.clone()
}

fn task_out(t: &Value) -> Value {
    let mut out = Map::new();
    copy_obj(t, &mut out, &["id", "contextId", "metadata"]);
    out.insert("status".into(), status_out(&t["status"]));
    if let Some(a) = t.get("artifacts").and_then(Value::as_array) {
        out.insert("artifacts".into(), a.iter().map(artifact_out).collect());
    }
    if let Some(h) = t.get("history").and_then(Value::as_array) {
        out.insert("history".into(), h.iter().map(message_out).collect());
    }
    Value::Object(out)
}

fn status_out(s: &Value) -> Value {
    let mut out = Map::new();
    copy_obj(s, &mut out, &["timestamp"]);
    if let Some(state) = s["state"].as_str() {
        // The one state whose name changed: 0.3's proto spells it CANCELLED.
        let state = match state {
            "TASK_STATE_CANCELED" => "TASK_STATE_CANCELLED",
            other => other,
        };
        out.insert("state".into(), json!(state));
    }
    if let Some(m) = s.get("message") {
        out.insert("message".into(), message_out(m));
    }
    Value::Object(out)
}

fn artifact_out(a: &Value) -> Value {
    let mut out = Map::new();
    copy_obj(
        a,
        &mut out,
        &[
            "artifactId",
            "name",
            "description",
            "metadata",
            "extensions",
        ],
    );
    let parts = a["parts"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    out.insert("parts".into(), parts.iter().map(part_out).collect());
    Value::Object(out)
}

/// The 0.3 proto form of a 1.0 message.
fn message_out(m: &Value) -> Value {
    message(m, "parts", "content", part_out)
}

fn part_out(p: &Value) -> Value {
    let mut out = Map::new();
    if p.get("raw").is_some() || p.get("url").is_some() {
        let mut file = Map::new();
        rename_obj(p, &mut file, "url", "fileWithUri");
        if let Some(raw) = p.get("raw") {
            file.insert("fileWithBytes".into(), bytes_out(raw));
        }
        rename_obj(p, &mut file, "mediaType", "mimeType");
        rename_obj(p, &mut file, "filename", "name");
        out.insert("file".into(), Value::Object(file));
    } else if let Some(d) = p.get("data") {
        out.insert("data".into(), json!({ "data": data_object(d) }));
    } else {
        copy_obj(p, &mut out, &["text"]);
    }
    copy_obj(p, &mut out, &["metadata"]);
    Value::Object(out)
}

/// The 0.3 proto `TaskPushNotificationConfig` of a 1.0 one.
fn push_config_out(c: &Value) -> Value {
    let config = push_notification_config(c);
    let name = format!(
        "tasks/{}/pushNotificationConfigs/{}",
        c["taskId"].as_str().unwrap_or(""),
        c["id"].as_str().unwrap_or("")
    );
    json!({ "name": name, "pushNotificationConfig": config })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(verb: &str, path: &str, query: &str, body: &str) -> Call {
        route(verb, path, query, body.as_bytes()).unwrap_or_else(|u| panic!("{path}: {u:?}"))
    }

    #[test]
    fn the_v1_paths_route_to_the_1_0_methods() {
        assert!(is_path("/v1/message:send"));
        assert!(!is_path("/message:send") && !is_path("/v1"));
        let cases = [
            ("POST", "/v1/message:send", "SendMessage"),
            ("POST", "/v1/message:stream", "SendStreamingMessage"),
            ("GET", "/v1/tasks/t1", "GetTask"),
            ("POST", "/v1/tasks/t1:cancel", "CancelTask"),
            ("GET", "/v1/tasks/t1:subscribe", "SubscribeToTask"),
            ("GET", "/v1/tasks", "ListTasks"),
            (
                "POST",
                "/v1/tasks/t1/pushNotificationConfigs",
                "CreateTaskPushNotificationConfig",
            ),
            (
                "GET",
                "/v1/tasks/t1/pushNotificationConfigs",
                "ListTaskPushNotificationConfigs",
            ),
            (
                "GET",
                "/v1/tasks/t1/pushNotificationConfigs/p",
                "GetTaskPushNotificationConfig",
            ),
            (
                "DELETE",
                "/v1/tasks/t1/pushNotificationConfigs/p",
                "DeleteTaskPushNotificationConfig",
            ),
            ("GET", "/v1/card", "GetExtendedAgentCard"),
        ];
        for (verb, path, method) in cases {
            assert_eq!(call(verb, path, "", "").method, method, "{verb} {path}");
        }
        let get = call("GET", "/v1/tasks/t%201", "historyLength=2", "");
        assert_eq!(get.params, json!({"id": "t 1", "historyLength": 2}));
        let cancel = call("POST", "/v1/tasks/t1:cancel", "", r#"{"name":"tasks/t1"}"#);
        assert_eq!(cancel.params, json!({"id": "t1"}));
        let get = call("GET", "/v1/tasks/t1/pushNotificationConfigs/p", "", "");
        assert_eq!(get.params, json!({"taskId": "t1", "id": "p"}));
    }

    #[test]
    fn unknown_paths_verbs_and_bodies_are_refused() {
        let refused = |verb: &str, path: &str, body: &str| {
            route(verb, path, "", body.as_bytes()).expect_err(path)
        };
        assert_eq!(
            refused("POST", "/v1/card", "").allow,
            Some("GET"),
            "405 with Allow"
        );
        assert_eq!(
            refused("DELETE", "/v1/message:send", "").allow,
            Some("POST")
        );
        let e = refused("GET", "/v1/t/tasks/x", "").error;
        assert_eq!(e.kind, ErrorKind::MethodNotFound);
        assert!(e.message.contains("0.3"), "{}", e.message);
        assert_eq!(
            refused("POST", "/v1/message:send", "{").error.kind,
            ErrorKind::ParseError
        );
        assert_eq!(
            refused("POST", "/v1/message:send", "[]").error.kind,
            ErrorKind::InvalidParams
        );
    }

    #[test]
    fn a_send_comes_in_as_1_0() {
        let body = json!({
            "message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c",
                "content": [
                    {"text": "hi", "metadata": {"a": 1}},
                    {"file": {"fileWithBytes": "YUdrPQ==", "mimeType": "text/plain", "name": "a.txt"}},
                    {"file": {"fileWithUri": "https://x/y.png"}},
                    {"data": {"data": {"k": "v"}}}
                ]},
            "configuration": {"historyLength": 2, "acceptedOutputModes": ["text/plain"],
                "pushNotification": {"url": "https://hook", "token": "t",
                    "authentication": {"schemes": ["Bearer"], "credentials": "c"}}},
            "metadata": {"m": true}
        });
        let sent = call("POST", "/v1/message:send", "", &body.to_string());
        assert_eq!(sent.params, super::super::sent_1_0());
        let blocking = call(
            "POST",
            "/v1/message:send",
            "",
            r#"{"message":{},"configuration":{"blocking":true}}"#,
        );
        assert_eq!(blocking.params["configuration"], json!({}));
        let bare = call("POST", "/v1/message:send", "", r#"{"message":{}}"#);
        assert_eq!(
            bare.params.get("configuration"),
            None,
            "no config: 1.0 blocks"
        );
    }

    #[test]
    fn file_bytes_are_base64_twice_as_the_0_3_sdks_send_and_read_them() {
        // What the 0.3 Python SDK sends for a file whose base64 is "aGk=" ("hi").
        assert_eq!(bytes_in(&json!("YUdrPQ==")), json!("aGk="));
        assert_eq!(bytes_out(&json!("aGk=")), json!("YUdrPQ=="));
        // The file's own bytes (a binary PNG header) are not base64 text once decoded: kept.
        assert_eq!(bytes_in(&json!("iVBORw0KGgo=")), json!("iVBORw0KGgo="));
    }

    #[test]
    fn a_push_config_comes_in_with_its_task_and_id() {
        let body = json!({"parent": "tasks/t1", "configId": "p1",
            "config": {"name": "tasks/t1/pushNotificationConfigs/p1",
                "pushNotificationConfig": {"url": "https://hook", "token": "tok"}}});
        let created = call(
            "POST",
            "/v1/tasks/t1/pushNotificationConfigs",
            "",
            &body.to_string(),
        );
        assert_eq!(
            created.params,
            json!({"taskId": "t1", "id": "p1", "url": "https://hook", "token": "tok"})
        );
        let config = json!({"taskId": "t1", "id": "p1", "url": "https://hook",
            "authentication": {"scheme": "Bearer", "credentials": "c"}});
        let named = json!({"name": "tasks/t1/pushNotificationConfigs/p1",
            "pushNotificationConfig": {"id": "p1", "url": "https://hook",
                "authentication": {"schemes": ["Bearer"], "credentials": "c"}}});
        assert_eq!(result_out("GetTaskPushNotificationConfig", &config), named);
        assert_eq!(
            result_out(
                "ListTaskPushNotificationConfigs",
                &json!({"configs": [config]})
            ),
            json!({"configs": [named]})
        );
        assert_eq!(
            result_out("DeleteTaskPushNotificationConfig", &json!({})),
            json!({})
        );
    }

    #[test]
    fn results_go_out_in_the_0_3_proto_fields_only() {
        let task = json!({"id": "t", "contextId": "c", "metadata": {"x": 1},
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00Z",
                "message": {"messageId": "a", "role": "ROLE_AGENT", "referenceTaskIds": ["r"],
                    "parts": [{"text": "done"}]}},
            "artifacts": [{"artifactId": "r", "name": "n",
                "parts": [{"data": [1, 2]}, {"url": "u", "mediaType": "image/png", "filename": "f"},
                    {"data": {"k": 1}}, {"raw": "aGk="}]}],
            "history": [{"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}]});
        let wire = json!({"id": "t", "contextId": "c", "metadata": {"x": 1},
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-01-01T00:00:00Z",
                "message": {"messageId": "a", "role": "ROLE_AGENT", "content": [{"text": "done"}]}},
            "artifacts": [{"artifactId": "r", "name": "n",
                "parts": [{"data": {"data": {"value": [1, 2]}}},
                    {"file": {"fileWithUri": "u", "mimeType": "image/png", "name": "f"}},
                    {"data": {"data": {"k": 1}}}, {"file": {"fileWithBytes": "YUdrPQ=="}}]}],
            "history": [{"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}]}]});
        assert_eq!(
            result_out("SendMessage", &json!({ "task": task })),
            json!({ "task": wire })
        );
        assert_eq!(result_out("GetTask", &task), wire);
        assert_eq!(result_out("CancelTask", &task), wire);
        assert_eq!(
            result_out(
                "ListTasks",
                &json!({"tasks": [task], "nextPageToken": "n", "pageSize": 1})
            ),
            json!({"tasks": [wire], "nextPageToken": "n"})
        );
        let m = json!({"messageId": "x", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]});
        assert_eq!(
            result_out("SendMessage", &json!({ "message": m })),
            json!({"message": {"messageId": "x", "role": "ROLE_AGENT", "content": [{"text": "hi"}]}})
        );
    }

    #[test]
    fn stream_events_say_final_when_the_task_settles_or_waits() {
        let update = |state: &str| {
            event_out(&json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": state}}}))
        };
        assert_eq!(
            update("TASK_STATE_WORKING"),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_WORKING"}, "final": false}})
        );
        for state in [
            "TASK_STATE_COMPLETED",
            "TASK_STATE_INPUT_REQUIRED",
            "TASK_STATE_REJECTED",
        ] {
            assert_eq!(update(state)["statusUpdate"]["final"], true, "{state}");
        }
        let canceled = update("TASK_STATE_CANCELED");
        assert_eq!(
            (
                canceled["statusUpdate"]["status"]["state"].as_str(),
                &canceled["statusUpdate"]["final"]
            ),
            (Some("TASK_STATE_CANCELLED"), &json!(true))
        );
        let artifact = event_out(&json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
            "append": true, "lastChunk": false,
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}}));
        assert_eq!(
            artifact,
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": true,
                "lastChunk": false, "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}})
        );
    }
}
