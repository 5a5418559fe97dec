//! Publishing a task's frames to its log (and to the caller's stream).

use a2a_guest::server::a2a::edge::events::{self, FrameKind};
use a2a_protocol::StreamResponse;
use a2a_protocol::sse::Member;

use crate::sse::Sse;

/// Publishes frames to the task's log, and writes them (with their sequence ids) to `sink`.
pub fn publish(task_id: &str, frames: &[StreamResponse], mut sink: Option<&mut Sse>) {
    for f in frames {
        let (member, json) = match f {
            StreamResponse::Task(t) => (Member::Task, serde_json::to_string(t)),
            StreamResponse::Message(m) => (Member::Message, serde_json::to_string(m)),
            StreamResponse::StatusUpdate(s) => (Member::StatusUpdate, serde_json::to_string(s)),
            StreamResponse::ArtifactUpdate(a) => (Member::ArtifactUpdate, serde_json::to_string(a)),
        };
        let json = json.unwrap_or_default();
        let seq = events::publish(task_id, FrameKind::from(member), &json);
        if let Some(sse) = sink.as_deref_mut() {
            sse.frame(Some(seq), member.name(), &json);
        }
    }
}
