//! The `server` world: the A2A server component's bindings, and its records as protocol types.

use a2a_protocol::execution::Progress;
use a2a_protocol::{ErrorKind, RpcError, Task, card};

wit_bindgen::generate!({
    world: "server",
    path: "../../wit",
    with: {
        "wasi:io/poll@0.2.12": wasip2::io::poll,
        "wasi:io/error@0.2.12": wasip2::io::error,
        "wasi:io/streams@0.2.12": wasip2::io::streams,
        "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
        "wasi:http/types@0.2.12": wasip2::http::types,
    },
    generate_all,
    pub_export_macro: true,
    export_macro_name: "export_server",
    default_bindings_module: "a2a_guest::server",
});

use a2a::edge::request_context::{InstanceInfo, SecurityScheme};
use a2a::edge::sessions::TurnEvent;
use a2a::edge::types::{FrameKind, StoreError, TaskRow, TaskState as WitTaskState};

a2a_protocol::wit_task_state!(
    WitTaskState,
    RpcError,
    RpcError::new(
        ErrorKind::Internal,
        "a task cannot be stored in TASK_STATE_UNSPECIFIED"
    )
);
a2a_protocol::wit_frame_kind!(FrameKind);

/// A turn event as the state machine takes it; an artifact or message that does not parse fails
/// the turn, saying what was wrong.
impl From<TurnEvent> for Progress {
    fn from(e: TurnEvent) -> Progress {
        let invalid = |what: &str, err: serde_json::Error| {
            Progress::Failed(format!("the session sent an invalid {what}: {err}"))
        };
        match e {
            TurnEvent::TextDelta(t) => Progress::TextDelta(t),
            TurnEvent::Reasoning(t) => Progress::Reasoning(t),
            TurnEvent::ToolCall(c) => Progress::ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            },
            TurnEvent::Artifact(j) => {
                serde_json::from_str(&j).map_or_else(|e| invalid("artifact", e), Progress::Artifact)
            }
            TurnEvent::ArtifactChunk(c) => serde_json::from_str(&c.artifact).map_or_else(
                |e| invalid("artifact chunk", e),
                |artifact| Progress::ArtifactChunk {
                    artifact,
                    last: c.last,
                },
            ),
            TurnEvent::Working(t) => Progress::Working(t),
            TurnEvent::Message(j) => {
                serde_json::from_str(&j).map_or_else(|e| invalid("message", e), Progress::Message)
            }
            TurnEvent::InputRequired(t) => Progress::InputRequired(t),
            TurnEvent::AuthRequired(t) => Progress::AuthRequired(t),
            TurnEvent::Completed => Progress::Completed,
            TurnEvent::Rejected(t) => Progress::Rejected(t),
            TurnEvent::Failed(t) => Progress::Failed(t),
        }
    }
}

/// A store failure as the JSON-RPC error a client reads (INTERNAL, or INVALID_PARAMS for a bad
/// argument such as a page token). The text never names the store: it is the caller's to read.
impl From<StoreError> for RpcError {
    fn from(e: StoreError) -> RpcError {
        match e {
            StoreError::Invalid(m) => RpcError::new(ErrorKind::InvalidParams, m),
            // The cause (a database error) is the operator's: the host logged it.
            StoreError::Unavailable(_) => RpcError::unavailable(),
            StoreError::NotFound => RpcError::new(ErrorKind::Internal, "the task is not stored"),
            StoreError::DuplicateMessage(r) => RpcError::new(
                ErrorKind::Internal,
                format!("message already recorded for task {}", r.task_id),
            ),
            StoreError::Conflict(row) => RpcError::new(
                ErrorKind::Internal,
                format!("task {} changed concurrently: retry", row.id),
            ),
        }
    }
}

/// The row of a task at `version`.
pub fn row(
    task: &Task,
    skill: &str,
    created_at: u64,
    updated_at: u64,
    version: u64,
) -> Result<TaskRow, RpcError> {
    let body = serde_json::to_string(task).map_err(|e| {
        RpcError::new(
            ErrorKind::Internal,
            format!("task {} does not serialise: {e}", task.id),
        )
    })?;
    Ok(TaskRow {
        id: task.id.clone(),
        context_id: task.context_id.clone(),
        state: task.status.state.try_into()?,
        skill: skill.to_owned(),
        created_at,
        updated_at,
        version,
        body,
    })
}

/// The task a row stores.
pub fn task(row: &TaskRow) -> Result<Task, RpcError> {
    serde_json::from_str(&row.body).map_err(|e| {
        RpcError::new(
            ErrorKind::Internal,
            format!("stored task {} is unreadable: {e}", row.id),
        )
    })
}

/// The card input of an instance record.
impl From<&InstanceInfo> for card::CardInput {
    fn from(i: &InstanceInfo) -> card::CardInput {
        card::CardInput {
            name: i.name.clone(),
            description: i.description.clone(),
            version: i.version.clone(),
            endpoint_url: i.endpoint_url.clone(),
            tenant: i.id.clone(),
            grpc_url: i.grpc_url.clone(),
            skills: i
                .skills
                .iter()
                .map(|s| card::Skill {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    description: s.description.clone(),
                    tags: s.tags.clone(),
                })
                .collect(),
            security: i
                .security
                .iter()
                .map(|s| match s {
                    SecurityScheme::Bearer => card::SecurityScheme::Bearer,
                    SecurityScheme::ApiKey(header) => card::SecurityScheme::ApiKey {
                        header: header.clone(),
                    },
                    SecurityScheme::OpenidConnect(o) => card::SecurityScheme::OpenIdConnect {
                        discovery_url: o.discovery_url.clone(),
                        scopes: o.scopes.clone(),
                    },
                    SecurityScheme::MutualTls => card::SecurityScheme::MutualTls,
                })
                .collect(),
            attachments: i.attachments,
            push_notifications: i.push_notifications,
            provider_organization: i.provider_organization.clone(),
            provider_url: i.provider_url.clone(),
            compat03: i.compat03,
        }
    }
}
