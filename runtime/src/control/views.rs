//! The control API's own shapes (docs/control.md "Control API › Reads"): inbound views, TaskRecords (never the protocol
//! Task), session rows.

use std::collections::{HashMap, HashSet};

use a2a_protocol::{Role, Task, TaskState};
use serde_json::{Value, json};

use crate::app::App;
use crate::identity::Scheme;
use crate::instances::Instance;
use crate::records::InstanceRecord;
use crate::store::{ContextSummary, PushStatus, TaskRow};

/// An inbound instance as the snapshot shows it.
pub fn inbound(app: &App, r: &InstanceRecord, assembled: Option<&Instance>) -> Value {
    let presets = app.presets();
    let skills: Vec<Value> = presets
        .iter()
        .find(|p| p.id == r.preset)
        .map(|p| {
            if p.skills.is_empty() {
                let chat = a2a_protocol::card::DEFAULT_SKILL;
                vec![json!({"id": chat, "name": chat})]
            } else {
                p.skills.iter().map(|s| json!({"id": s.id, "name": s.name.clone().unwrap_or_else(|| s.id.clone()), "description": s.description})).collect()
            }
        })
        .unwrap_or_default();
    json!({
        "id": r.id, "name": r.name, "description": r.description, "version": r.version,
        "endpointPath": r.endpoint_path, "cardPath": format!("{}/agent-card.json", r.endpoint_path),
        "cardUrl": format!("{}{}/agent-card.json", app.base_url, r.endpoint_path), "endpointUrl": format!("{}{}", app.base_url, r.endpoint_path), "preset": r.preset,
        "authTokenEnv": r.auth_token_env, "apiKeys": keys(r), "oidc": r.oidc, "mtls": r.mtls, "schemes": crate::identity::schemes(r).map(Scheme::name).collect::<Vec<_>>(), "enabled": r.enabled, "skills": skills,
        "component": r.component, "maxBodyBytes": r.limits.max_body_bytes, "limits": r.limits,
        "pushNotifications": r.push_notifications, "compat03": r.compat03, "reuseInstances": r.reuse_instances,
        "served": assembled.is_some_and(|i| i.record.enabled),
        "createdAt": r.created_at, "updatedAt": r.updated_at,
    })
}

/// An instance's named clients (never their keys or hashes).
pub fn keys(r: &InstanceRecord) -> Vec<Value> {
    r.api_keys
        .iter()
        .map(|k| json!({ "name": k.name, "principal": crate::identity::api_keys::principal(&k.name), "skills": k.skills, "ratePerSecond": k.rate_per_second, "createdAt": k.created_at, "revokedAt": k.revoked_at }))
        .collect()
}

/// A push config as the operator sees it (never its token or credentials) and its deliveries.
pub fn push_status(s: &PushStatus) -> Value {
    let mut v =
        serde_json::from_str::<a2a_protocol::push::TaskPushNotificationConfig>(&s.config.body)
            .map(|c| c.redacted())
            .unwrap_or_else(|_| json!({ "id": s.config.id, "taskId": s.config.task_id }));
    v["delivered"] = json!(s.delivered);
    v["failed"] = json!(s.failed);
    v["pending"] = json!(s.pending);
    v["attempts"] = json!(s.attempts);
    v["lastStatus"] = json!(s.last_status);
    v["lastAttemptAt"] = json!(s.last_attempt_at);
    v["nextRetryAt"] = json!(s.next_at.filter(|_| s.attempts > 0));
    v
}

/// A stored task as a TaskRecord: the input parts of its first message, its artifacts, the ids
/// of its user messages, and `error` when it FAILED or was REJECTED.
pub fn task_record(row: &TaskRow) -> Value {
    let task = serde_json::from_str::<Task>(&row.body).ok();
    let users: Vec<_> = task
        .iter()
        .flat_map(|t| t.history.iter().filter(|m| m.role == Role::User))
        .collect();
    let error = task
        .as_ref()
        .filter(|_| matches!(row.state, TaskState::Failed | TaskState::Rejected))
        .map(|t| {
            let message = t
                .status
                .message
                .as_ref()
                .map(|m| a2a_protocol::prompt::render(&m.parts))
                .unwrap_or_default();
            json!({ "code": row.state.as_str(), "message": message })
        });
    json!({
        "taskId": row.id,
        "contextId": row.context_id,
        "serverId": row.instance_id,
        "skill": row.skill,
        "state": row.state.as_str(),
        "createdAt": row.created_at,
        "updatedAt": row.updated_at,
        "parts": users.first().map(|m| json!(m.parts)).unwrap_or_else(|| json!([])),
        "artifacts": task.as_ref().map(|t| json!(t.artifacts)).unwrap_or_else(|| json!([])),
        "messageIds": users.iter().map(|m| m.message_id.clone()).collect::<Vec<_>>(),
        "peerId": row.peer_id,
        "principal": row.principal,
        "traceId": row.trace_id,
        "error": error,
    })
}

/// A TaskRecord with the operator's reason for its failure as `error.detail`.
pub fn with_note(mut record: Value, note: Option<String>) -> Value {
    if let (Some(error), Some(note)) = (record.get_mut("error").filter(|e| e.is_object()), note) {
        error["detail"] = json!(note);
    }
    record
}

/// The spans this process keeps of a task (docs/operating.md "Traces"): the traces that touched it
/// and their spans in start order.
pub fn trace(row: &TaskRow) -> Value {
    let (traces, spans) = crate::telemetry::trace::ring()
        .map(|r| r.task(&row.instance_id, &row.id))
        .unwrap_or_default();
    json!({ "traceIds": traces, "spans": spans })
}

/// One session row: a conversation on an instance (`instances` are the stored records) with its
/// live and streaming flags, and the peer that opened it (`labels`: the remembered peers' labels).
pub fn session(
    app: &App,
    c: &ContextSummary,
    instances: &[InstanceRecord],
    streaming: &HashSet<(String, String)>,
    labels: &HashMap<String, String>,
) -> Value {
    let instance = instances.iter().find(|i| i.id == c.instance_id);
    // A peer this process has not seen since it started is named by its source address.
    let peer = c.peer_id.as_deref().map(|id| {
        labels.get(id).cloned().unwrap_or_else(|| {
            id.rsplit_once('@')
                .map_or(id, |(source, _)| source)
                .to_owned()
        })
    });
    json!({
        "contextId": c.context_id,
        "serverId": c.instance_id,
        "serverName": instance.as_ref().map(|i| i.name.clone()),
        "preset": instance.as_ref().map(|i| i.preset.clone()),
        "status": if c.active_count > 0 { "running" } else { "idle" },
        "taskCount": c.task_count,
        "activeCount": c.active_count,
        "firstSeen": c.first_seen,
        "lastSeen": c.last_seen,
        "peerId": c.peer_id,
        "peer": peer,
        "streaming": streaming.contains(&(c.instance_id.clone(), c.context_id.clone())),
        "live": app.services().sessions.is_live(&c.instance_id, &c.context_id),
    })
}

/// A task-state filter: the protocol name (`TASK_STATE_WORKING`) or its short form
/// (`working`, `input-required`, `input_required`).
pub fn parse_state(s: &str) -> Option<TaskState> {
    TaskState::from_name(s)
        .or_else(|| {
            TaskState::from_name(&format!(
                "TASK_STATE_{}",
                s.to_ascii_uppercase().replace('-', "_")
            ))
        })
        .filter(|s| *s != TaskState::Unspecified)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_parse_in_both_forms() {
        assert_eq!(parse_state("TASK_STATE_WORKING"), Some(TaskState::Working));
        assert_eq!(
            parse_state("input-required"),
            Some(TaskState::InputRequired)
        );
        assert_eq!(parse_state("completed"), Some(TaskState::Completed));
        assert_eq!(parse_state("unspecified"), None);
        assert_eq!(parse_state("nope"), None);
    }
}
