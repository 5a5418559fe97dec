//! A task's frames: logged (with a status change, or alone) and written to the caller's stream
//! with their sequence ids.

use a2a_guest::server::a2a::edge::events;
use a2a_guest::server::a2a::edge::types::{FrameKind, NewFrame};
use a2a_protocol::StreamResponse;
use a2a_protocol::sse::Member;

use crate::sse::Sse;

/// Frames as the log takes them.
pub fn encode(frames: &[StreamResponse]) -> Vec<NewFrame> {
    frames
        .iter()
        .map(|f| {
            let (member, json) = match f {
                StreamResponse::Task(t) => (Member::Task, serde_json::to_string(t)),
                StreamResponse::Message(m) => (Member::Message, serde_json::to_string(m)),
                StreamResponse::StatusUpdate(s) => (Member::StatusUpdate, serde_json::to_string(s)),
                StreamResponse::ArtifactUpdate(a) => {
                    (Member::ArtifactUpdate, serde_json::to_string(a))
                }
            };
            NewFrame {
                kind: FrameKind::from(member),
                json: json.unwrap_or_default(),
            }
        })
        .collect()
}

/// Logs frames that come with no status change, one by one, and writes them to `sink`.
pub fn publish(task_id: &str, frames: &[StreamResponse], mut sink: Option<&mut Sse>) {
    for f in encode(frames) {
        // A frame the log could not take still reaches this caller, without an id to resume by.
        let seq = events::publish(task_id, f.kind, &f.json).ok();
        if let Some(sse) = sink.as_deref_mut() {
            sse.frame(seq, Member::from(f.kind).name(), &f.json);
        }
    }
}

/// Writes frames that have no place in the log (another request logged them) to `sink`,
/// without ids.
pub fn unlogged(frames: &[StreamResponse], sink: Option<&mut Sse>) {
    if let Some(sse) = sink {
        for f in encode(frames) {
            sse.frame(None, Member::from(f.kind).name(), &f.json);
        }
    }
}

/// Writes frames a task write logged, from the first one's sequence id, to `sink`.
pub fn logged(first_seq: u64, frames: &[NewFrame], sink: Option<&mut Sse>) {
    if let Some(sse) = sink {
        for (seq, f) in (first_seq..).zip(frames) {
            sse.frame(Some(seq), Member::from(f.kind).name(), &f.json);
        }
    }
}
