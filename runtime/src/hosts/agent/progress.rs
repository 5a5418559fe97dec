//! `a2a:agent/progress`: what the caller hears while a turn runs, as the same [`Progress`]
//! events every backend sends, bounded per turn.

use a2a_protocol::execution::Progress;
use a2a_protocol::{Artifact, Part};

use super::bindings::a2a::agent::progress::Host;
use crate::sessions::EventSink;

/// Most bytes a turn sends through `progress` (text, status messages and artifact parts).
pub const MAX_TURN_BYTES: usize = 8 << 20;
/// Most parts of one artifact chunk.
pub const MAX_CHUNK_PARTS: usize = 64;
/// Most artifacts of one turn.
pub const MAX_ARTIFACTS: usize = 64;
/// Longest status message, bytes.
pub const MAX_STATUS_BYTES: usize = 16 << 10;

/// The progress capability of one turn.
pub struct ProgressCtx {
    events: EventSink,
    sent: usize,
    artifacts: Vec<String>,
}

impl ProgressCtx {
    /// Progress sent to `events`.
    pub fn prepare(events: EventSink) -> Self {
        ProgressCtx {
            events,
            sent: 0,
            artifacts: Vec::new(),
        }
    }

    /// Counts `bytes` against the turn's bound, then sends `event`.
    fn send(&mut self, bytes: usize, event: Progress) -> Result<(), String> {
        if self.sent + bytes > MAX_TURN_BYTES {
            return Err(format!(
                "the turn sent more than {MAX_TURN_BYTES} bytes of progress"
            ));
        }
        self.sent += bytes;
        self.events
            .send(event)
            .map_err(|_| "the turn is over: nobody reads its progress".into())
    }

    fn chunk(
        &mut self,
        id: String,
        name: Option<String>,
        parts: &str,
        last: bool,
    ) -> Result<(), String> {
        let parts: Vec<Part> = serde_json::from_str(parts).map_err(|e| {
            format!("artifact {id:?}: `parts` is not a JSON array of A2A parts: {e}")
        })?;
        if parts.len() > MAX_CHUNK_PARTS {
            return Err(format!(
                "artifact {id:?}: a chunk has at most {MAX_CHUNK_PARTS} parts"
            ));
        }
        if !self.artifacts.contains(&id) {
            if self.artifacts.len() >= MAX_ARTIFACTS {
                return Err(format!("a turn makes at most {MAX_ARTIFACTS} artifacts"));
            }
            self.artifacts.push(id.clone());
        }
        let bytes = id.len() + serde_json::to_string(&parts).map_or(0, |s| s.len());
        let artifact = Artifact {
            artifact_id: id,
            name,
            description: None,
            parts,
            metadata: None,
            extensions: Vec::new(),
        };
        self.send(bytes, Progress::ArtifactChunk { artifact, last })
    }
}

impl Host for ProgressCtx {
    async fn text(&mut self, delta: String) -> wasmtime::Result<Result<(), String>> {
        Ok(self.send(delta.len(), Progress::TextDelta(delta)))
    }

    async fn status(&mut self, message: String) -> wasmtime::Result<Result<(), String>> {
        if message.len() > MAX_STATUS_BYTES {
            return Ok(Err(format!(
                "a status message has at most {MAX_STATUS_BYTES} bytes"
            )));
        }
        Ok(self.send(message.len(), Progress::Working(message)))
    }

    async fn artifact(
        &mut self,
        id: String,
        name: Option<String>,
        parts: String,
        last: bool,
    ) -> wasmtime::Result<Result<(), String>> {
        Ok(self.chunk(id, name, &parts, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn progress_becomes_events_within_the_turns_bounds() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut p = ProgressCtx::prepare(tx);
        p.text("hi".into()).await.unwrap().unwrap();
        p.status("reading".into()).await.unwrap().unwrap();
        p.artifact(
            "r".into(),
            Some("report".into()),
            r#"[{"text":"a"}]"#.into(),
            true,
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(rx.try_recv().unwrap(), Progress::TextDelta("hi".into()));
        assert_eq!(rx.try_recv().unwrap(), Progress::Working("reading".into()));
        let Progress::ArtifactChunk { artifact, last } = rx.try_recv().unwrap() else {
            panic!()
        };
        assert!(last && artifact.name.as_deref() == Some("report"));
        let bad = p
            .artifact("r".into(), None, "{}".into(), false)
            .await
            .unwrap();
        assert!(bad.unwrap_err().contains("not a JSON array"));
        let many = format!("[{}]", vec![r#"{"text":"x"}"#; 65].join(","));
        let bad = p.artifact("r".into(), None, many, false).await.unwrap();
        assert!(bad.unwrap_err().contains("at most 64 parts"));
        let long = "x".repeat(MAX_STATUS_BYTES + 1);
        assert!(p.status(long).await.unwrap().is_err());
        let big = "x".repeat(MAX_TURN_BYTES);
        let over = p.text(big).await.unwrap().unwrap_err();
        assert!(over.contains("more than"), "{over}");
    }
}
