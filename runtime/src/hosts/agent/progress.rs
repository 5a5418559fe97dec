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
/// Most progress events of one turn (each WORKING status is a store write).
pub const MAX_EVENTS: u32 = 4096;
/// Most WORKING statuses of one turn.
pub const MAX_STATUSES: u32 = 256;
/// What every event counts against [`MAX_TURN_BYTES`] at the least, so empty ones are not free.
const EVENT_FLOOR: usize = 64;

/// What a turn may still send: bytes of progress, the model's streamed answers included.
#[derive(Clone, Default)]
pub struct Budget(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Budget {
    /// Takes `bytes` from the turn's [`MAX_TURN_BYTES`]; refused past it.
    pub fn take(&self, bytes: usize) -> Result<(), String> {
        use std::sync::atomic::Ordering::Relaxed;
        let spent = self.0.fetch_add(bytes, Relaxed) + bytes;
        if spent > MAX_TURN_BYTES {
            self.0.fetch_sub(bytes, Relaxed);
            return Err(format!(
                "the turn sent more than {MAX_TURN_BYTES} bytes of progress"
            ));
        }
        Ok(())
    }

    /// Whether anything is left.
    pub fn left(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::Relaxed) < MAX_TURN_BYTES
    }
}

/// The progress capability of one turn.
pub struct ProgressCtx {
    events: EventSink,
    budget: Budget,
    sent: u32,
    statuses: u32,
    artifacts: Vec<String>,
}

impl ProgressCtx {
    /// Progress sent to `events`, within `budget`.
    pub fn prepare(events: EventSink, budget: Budget) -> Self {
        ProgressCtx {
            events,
            budget,
            sent: 0,
            statuses: 0,
            artifacts: Vec::new(),
        }
    }

    /// Counts `bytes` (at least [`EVENT_FLOOR`]) and the event against the turn's bounds,
    /// then sends `event`.
    fn send(&mut self, bytes: usize, event: Progress) -> Result<(), String> {
        if self.sent >= MAX_EVENTS {
            return Err(format!("a turn sends at most {MAX_EVENTS} progress events"));
        }
        self.budget.take(bytes.max(EVENT_FLOOR))?;
        self.sent += 1;
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
        if let Some((i, why)) = parts
            .iter()
            .enumerate()
            .find_map(|(i, p)| Some((i, p.check().err()?)))
        {
            return Err(format!("artifact {id:?}: parts[{i}] {why}"));
        }
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
        if self.statuses >= MAX_STATUSES {
            return Ok(Err(format!(
                "a turn sets at most {MAX_STATUSES} WORKING statuses"
            )));
        }
        self.statuses += 1;
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
        let mut p = ProgressCtx::prepare(tx, Budget::default());
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
        // One status so far; three events (the refusals count nothing).
        for _ in 1..MAX_STATUSES {
            p.status(String::new()).await.unwrap().unwrap();
        }
        let many = p.status(String::new()).await.unwrap().unwrap_err();
        assert!(many.contains("at most 256 WORKING"), "{many}");
        for _ in 2 + MAX_STATUSES..MAX_EVENTS {
            p.text(String::new()).await.unwrap().unwrap();
        }
        let many = p.text(String::new()).await.unwrap().unwrap_err();
        assert!(many.contains("at most 4096 progress events"), "{many}");
    }

    #[test]
    fn empty_events_are_not_free() {
        let b = Budget::default();
        for _ in 0..MAX_TURN_BYTES / EVENT_FLOOR {
            b.take(EVENT_FLOOR).unwrap();
        }
        assert!(!b.left() && b.take(1).is_err());
    }
}
