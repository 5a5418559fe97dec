//! Applying a session turn's progress to a task: the new task state and the frames to publish
//! (docs/protocol.md "A2A methods"). Text deltas accumulate in one `response` artifact streamed with `append`/`lastChunk`;
//! tool-call deltas go to `tool-call-<id>` data artifacts; reasoning is never projected.

use serde_json::json;

use crate::state::TransitionError;
use crate::time::rfc3339_ms;
use crate::types::*;

/// The artifact id of the assistant's text.
pub const TEXT_ARTIFACT: &str = "response";

/// What a remote caller reads when the agent could not run: the operator's reason (a missing
/// key, a path, a model URL) stays on the operator's side.
pub const UNAVAILABLE: &str = "the agent is not available";

/// One thing a session turn reports.
#[derive(Clone, Debug, PartialEq)]
pub enum Progress {
    /// Assistant text to append.
    TextDelta(String),
    /// Model reasoning (not projected).
    Reasoning(String),
    /// A tool-call delta.
    ToolCall {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments text delta.
        arguments: String,
    },
    /// A whole artifact.
    Artifact(Artifact),
    /// A chunk of an artifact: the first of its id creates it, later ones append; `last` closes it.
    ArtifactChunk {
        /// The chunk (its id names the artifact).
        artifact: Artifact,
        /// Whether it is the artifact's last chunk.
        last: bool,
    },
    /// A WORKING status with what the agent is doing now.
    Working(String),
    /// The turn answers with a message instead of a task.
    Message(Message),
    /// The agent needs input; what it asks.
    InputRequired(String),
    /// The agent needs authentication; what it asks.
    AuthRequired(String),
    /// The turn finished.
    Completed,
    /// The executor rejected the task.
    Rejected(String),
    /// The turn failed; what the agent says.
    Failed(String),
    /// The agent could not run; the operator's reason, which is never projected (the task
    /// FAILS with [`UNAVAILABLE`]).
    Unavailable(String),
}

impl Progress {
    /// Whether this event ends the turn (every event but content and WORKING status).
    pub fn is_final(&self) -> bool {
        !self.is_content() && !matches!(self, Self::Working(_))
    }

    /// Whether this event only adds content (text, reasoning, tool calls, artifacts): it never
    /// changes the task's status.
    pub fn is_content(&self) -> bool {
        matches!(
            self,
            Self::TextDelta(_)
                | Self::Reasoning(_)
                | Self::ToolCall { .. }
                | Self::Artifact(_)
                | Self::ArtifactChunk { .. }
        )
    }
}

/// What a run does with its task when another writer settled it.
#[derive(Debug)]
pub struct SettledElsewhere {
    /// The stored copy lacks content this run streamed: write the task back.
    pub rewrite: bool,
    /// What the run's own stream still needs: the open text artifact's last chunk, then the
    /// settled status (the other writer logged its frame, which this stream never reads).
    pub frames: Vec<StreamResponse>,
}

/// A task being driven.
#[derive(Clone, Debug)]
pub struct Execution {
    task: Task,
    text_open: bool,
    direct_message: Option<Message>,
    /// How many times the task may have changed: [`Execution::changes`].
    changes: u64,
}

impl Execution {
    /// Drives `task` from its current state.
    pub fn new(task: Task) -> Self {
        Execution {
            task,
            text_open: false,
            direct_message: None,
            changes: 0,
        }
    }

    /// A count that moves on with every call that may change the task: a text written of the
    /// task is its text for as long as the count stays where it was then.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The task as it stands.
    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The message the turn answered with, if it answered with one.
    pub fn direct_message(&self) -> Option<&Message> {
        self.direct_message.as_ref()
    }

    /// Takes `stored`, this task as another writer settled it (a cancel, the runtime's
    /// settlement), keeping the artifacts this run streamed: that writer wrote the task as it
    /// last read it, and content is written only with a status change. Its status and history
    /// stand. None while the stored copy still runs.
    pub fn settled_elsewhere(&mut self, stored: Task) -> Option<SettledElsewhere> {
        self.changes += 1;
        if stored.status.state.is_running() {
            return None;
        }
        let streamed = std::mem::replace(&mut self.task, stored).artifacts;
        let mut rewrite = false;
        for a in streamed {
            match self
                .task
                .artifacts
                .iter_mut()
                .find(|s| s.artifact_id == a.artifact_id)
            {
                Some(s) if *s == a => {}
                Some(s) => {
                    *s = a;
                    rewrite = true;
                }
                None => {
                    self.task.artifacts.push(a);
                    rewrite = true;
                }
            }
        }
        let mut frames: Vec<StreamResponse> = self.close_text().into_iter().collect();
        frames.push(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task.id.clone(),
            context_id: self.task.context_id.clone(),
            status: self.task.status.clone(),
            metadata: None,
        }));
        Some(SettledElsewhere { rewrite, frames })
    }

    /// Moves the task to `state` with an optional agent text (its message id is drawn only when
    /// there is one); returns the status frame.
    pub fn set_status(
        &mut self,
        state: TaskState,
        text: Option<String>,
        now_ms: u64,
        message_id: impl FnOnce() -> String,
    ) -> Result<StreamResponse, TransitionError> {
        self.changes += 1;
        let message = text
            .map(|t| Message::agent_text(message_id(), &self.task.context_id, &self.task.id, t));
        self.status_with(state, message, now_ms)
    }

    /// Moves the task to `state` with `message` as its status message (kept in the history too).
    fn status_with(
        &mut self,
        state: TaskState,
        message: Option<Message>,
        now_ms: u64,
    ) -> Result<StreamResponse, TransitionError> {
        self.task.status.state.transition(state)?;
        if let Some(m) = &message {
            self.task.history.push(m.clone());
        }
        self.task.status = TaskStatus {
            state,
            message,
            timestamp: Some(rfc3339_ms(now_ms)),
        };
        Ok(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task.id.clone(),
            context_id: self.task.context_id.clone(),
            status: self.task.status.clone(),
            metadata: None,
        }))
    }

    /// Applies one progress event; returns the frames to publish, in order.
    pub fn apply(
        &mut self,
        progress: Progress,
        now_ms: u64,
        message_id: impl FnOnce() -> String,
    ) -> Result<Vec<StreamResponse>, TransitionError> {
        self.changes += 1;
        let mut frames = Vec::new();
        match progress {
            Progress::Reasoning(_) => {}
            Progress::TextDelta(text) if text.is_empty() => {}
            Progress::TextDelta(text) => {
                let append = self.text_open;
                self.text_open = true;
                frames.push(self.merge(
                    Artifact {
                        name: Some(TEXT_ARTIFACT.into()),
                        ..artifact(TEXT_ARTIFACT, Part::text(text))
                    },
                    append,
                    false,
                ));
            }
            Progress::ToolCall {
                id,
                name,
                arguments,
            } => {
                let artifact_id = format!("tool-call-{id}");
                let append = self
                    .task
                    .artifacts
                    .iter()
                    .any(|a| a.artifact_id == artifact_id);
                let part = Part::data(json!({ "id": id, "name": name, "arguments": arguments }));
                frames.push(self.merge(artifact(&artifact_id, part), append, false));
            }
            Progress::Artifact(a) => frames.push(self.merge(a, false, true)),
            Progress::ArtifactChunk { artifact, last } => {
                let append = self
                    .task
                    .artifacts
                    .iter()
                    .any(|a| a.artifact_id == artifact.artifact_id);
                frames.push(self.merge(artifact, append, last));
            }
            Progress::Working(text) => {
                frames.push(self.set_status(TaskState::Working, Some(text), now_ms, message_id)?)
            }
            // The direct answer is the completed status's message, so a resend finds it again.
            Progress::Message(m) => {
                self.task.status.state.transition(TaskState::Completed)?;
                self.direct_message = Some(m.clone());
                frames.extend(self.close_text());
                frames.push(self.status_with(TaskState::Completed, Some(m), now_ms)?);
            }
            Progress::Completed => {
                frames.extend(self.finish(TaskState::Completed, None, now_ms, message_id)?)
            }
            Progress::InputRequired(t) => {
                frames.extend(self.finish(TaskState::InputRequired, Some(t), now_ms, message_id)?)
            }
            Progress::AuthRequired(t) => {
                frames.extend(self.finish(TaskState::AuthRequired, Some(t), now_ms, message_id)?)
            }
            Progress::Rejected(t) => {
                frames.extend(self.finish(TaskState::Rejected, Some(t), now_ms, message_id)?)
            }
            Progress::Failed(t) => {
                frames.extend(self.finish(TaskState::Failed, Some(t), now_ms, message_id)?)
            }
            Progress::Unavailable(_) => frames.extend(self.finish(
                TaskState::Failed,
                Some(UNAVAILABLE.into()),
                now_ms,
                message_id,
            )?),
        }
        Ok(frames)
    }

    /// Closes the open text artifact (a `lastChunk` frame) and sets the final status of this turn.
    fn finish(
        &mut self,
        state: TaskState,
        text: Option<String>,
        now_ms: u64,
        message_id: impl FnOnce() -> String,
    ) -> Result<Vec<StreamResponse>, TransitionError> {
        self.task.status.state.transition(state)?;
        let mut frames: Vec<StreamResponse> = self.close_text().into_iter().collect();
        frames.push(self.set_status(state, text, now_ms, message_id)?);
        Ok(frames)
    }

    /// The last chunk of the streamed text artifact, if one is open.
    fn close_text(&mut self) -> Option<StreamResponse> {
        std::mem::take(&mut self.text_open).then(|| {
            StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: self.task.id.clone(),
                context_id: self.task.context_id.clone(),
                artifact: artifact(TEXT_ARTIFACT, Part::text("")),
                append: true,
                last_chunk: true,
                metadata: None,
            })
        })
    }

    /// Adds an artifact (or appends its parts to the one of the same id, merging adjacent text)
    /// and returns its update frame.
    fn merge(&mut self, chunk: Artifact, append: bool, last_chunk: bool) -> StreamResponse {
        match self
            .task
            .artifacts
            .iter_mut()
            .find(|a| a.artifact_id == chunk.artifact_id)
        {
            Some(existing) if append => {
                for part in chunk.parts.iter().cloned() {
                    match (existing.parts.last_mut(), &part.text) {
                        (
                            Some(Part {
                                text: Some(prev),
                                data: None,
                                raw: None,
                                url: None,
                                ..
                            }),
                            Some(t),
                        ) => prev.push_str(t),
                        _ => existing.parts.push(part),
                    }
                }
            }
            Some(existing) => *existing = chunk.clone(),
            None => self.task.artifacts.push(chunk.clone()),
        }
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task.id.clone(),
            context_id: self.task.context_id.clone(),
            artifact: chunk,
            append,
            last_chunk,
            metadata: None,
        })
    }
}

/// A stored task (JSON) settled FAILED with `text` as the agent's status message, for the
/// runtime's settlement of tasks left running: the new body and the status-update frame (JSON)
/// telling subscribers; none when the body does not parse or the task may not become FAILED
/// (it settled meanwhile).
pub fn fail_stored(
    body: &str,
    now_ms: u64,
    text: &str,
    message_id: impl FnOnce() -> String,
) -> Option<(String, String)> {
    let mut ex = Execution::new(serde_json::from_str::<Task>(body).ok()?);
    let frame = ex
        .set_status(TaskState::Failed, Some(text.to_owned()), now_ms, message_id)
        .ok()?;
    let StreamResponse::StatusUpdate(update) = frame else {
        return None;
    };
    Some((
        serde_json::to_string(ex.task()).ok()?,
        serde_json::to_string(&update).ok()?,
    ))
}

fn artifact(id: &str, part: Part) -> Artifact {
    Artifact {
        artifact_id: id.into(),
        name: None,
        description: None,
        parts: vec![part],
        metadata: None,
        extensions: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_task_fails_through_the_state_machine() {
        let id = || "m".to_owned();
        let working = r#"{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}"#;
        let (body, frame) = fail_stored(working, 5, "the agent component failed", id).unwrap();
        let task: Task = serde_json::from_str(&body).unwrap();
        assert_eq!(task.status.state, TaskState::Failed);
        assert_eq!(
            task.history.len(),
            1,
            "the status message is in the history"
        );
        assert!(
            frame.contains("TASK_STATE_FAILED") && frame.contains("the agent component failed")
        );
        let completed = r#"{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}"#;
        assert_eq!(
            fail_stored(completed, 5, "late", id),
            None,
            "a settled task never becomes FAILED"
        );
        assert_eq!(
            fail_stored("{", 5, "x", id),
            None,
            "a body that does not parse"
        );
    }

    fn task(state: TaskState) -> Task {
        Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state,
                message: None,
                timestamp: None,
            },
            artifacts: vec![],
            history: vec![],
            metadata: None,
        }
    }

    fn kinds(frames: &[StreamResponse]) -> Vec<String> {
        frames
            .iter()
            .map(|f| match f {
                StreamResponse::Task(_) => "task".to_owned(),
                StreamResponse::Message(_) => "message".to_owned(),
                StreamResponse::StatusUpdate(s) => s.status.state.as_str().to_owned(),
                StreamResponse::ArtifactUpdate(a) => {
                    format!("artifact(append={},last={})", a.append, a.last_chunk)
                }
            })
            .collect()
    }

    fn drive(ex: &mut Execution, events: Vec<Progress>) -> Vec<String> {
        let mut all = Vec::new();
        for e in events {
            all.extend(kinds(&ex.apply(e, 1000, || "m".into()).unwrap()));
        }
        all
    }

    #[test]
    fn a_task_settled_elsewhere_keeps_its_status_and_what_the_run_streamed() {
        let mut ex = Execution::new(task(TaskState::Working));
        ex.apply(Progress::TextDelta("step 1 ".into()), 1, || "m".into())
            .unwrap();
        let stored = task(TaskState::Canceled);
        let settled = ex.settled_elsewhere(stored.clone()).unwrap();
        assert!(settled.rewrite);
        assert_eq!(
            kinds(&settled.frames),
            ["artifact(append=true,last=true)", "TASK_STATE_CANCELED"]
        );
        assert_eq!(ex.task().status, stored.status);
        assert_eq!(ex.task().artifacts[0].parts, vec![Part::text("step 1 ")]);
        let again = ex.task().clone();
        let settled = Execution::new(again.clone())
            .settled_elsewhere(again)
            .unwrap();
        assert!(!settled.rewrite, "nothing new: no write");
        assert_eq!(kinds(&settled.frames), ["TASK_STATE_CANCELED"]);
        assert!(
            Execution::new(task(TaskState::Working))
                .settled_elsewhere(task(TaskState::Working))
                .is_none()
        );
    }

    #[test]
    fn an_unavailable_agent_fails_the_task_without_its_reason() {
        let mut ex = Execution::new(task(TaskState::Working));
        let why = "the model API key is not set: store it as SECRET_KEY at /etc/a2a";
        let frames = ex
            .apply(Progress::Unavailable(why.into()), 1000, || "m".into())
            .unwrap();
        let json =
            serde_json::to_string(&frames).unwrap() + &serde_json::to_string(ex.task()).unwrap();
        assert_eq!(ex.task().status.state, TaskState::Failed);
        assert!(json.contains(UNAVAILABLE), "{json}");
        assert!(
            !json.contains("SECRET_KEY") && !json.contains("/etc"),
            "{json}"
        );
        assert!(Progress::Unavailable(why.into()).is_final());
    }

    #[test]
    fn text_deltas_stream_as_one_appended_artifact_then_close() {
        let mut ex = Execution::new(task(TaskState::Working));
        let frames = drive(
            &mut ex,
            vec![
                Progress::TextDelta("Hello ".into()),
                Progress::Reasoning("hmm".into()),
                Progress::TextDelta("world".into()),
                Progress::Completed,
            ],
        );
        assert_eq!(
            frames,
            [
                "artifact(append=false,last=false)",
                "artifact(append=true,last=false)",
                "artifact(append=true,last=true)",
                "TASK_STATE_COMPLETED"
            ]
        );
        assert_eq!(ex.task().artifacts.len(), 1);
        assert_eq!(
            ex.task().artifacts[0].parts,
            vec![Part::text("Hello world")]
        );
        assert_eq!(
            ex.task().status.timestamp.as_deref(),
            Some("1970-01-01T00:00:01.000Z")
        );
    }

    #[test]
    fn tool_calls_go_to_their_own_data_artifacts() {
        let mut ex = Execution::new(task(TaskState::Working));
        let call = |a: &str| Progress::ToolCall {
            id: "c9".into(),
            name: "search".into(),
            arguments: a.into(),
        };
        let frames = drive(&mut ex, vec![call("{\"q\":"), call("\"x\"}")]);
        assert_eq!(
            frames,
            [
                "artifact(append=false,last=false)",
                "artifact(append=true,last=false)"
            ]
        );
        let a = &ex.task().artifacts[0];
        assert_eq!(a.artifact_id, "tool-call-c9");
        assert_eq!(a.parts.len(), 2);
        assert!(a.parts.iter().all(|p| p.data.is_some()));
    }

    #[test]
    fn failure_and_interruptions_carry_a_status_message() {
        for (p, state) in [
            (Progress::Failed("boom".into()), TaskState::Failed),
            (
                Progress::InputRequired("more?".into()),
                TaskState::InputRequired,
            ),
            (
                Progress::AuthRequired("login".into()),
                TaskState::AuthRequired,
            ),
            (Progress::Rejected("no".into()), TaskState::Rejected),
        ] {
            let mut ex = Execution::new(task(TaskState::Working));
            ex.apply(p, 5, || "m9".into()).unwrap();
            assert_eq!(ex.task().status.state, state);
            let m = ex.task().status.message.as_ref().unwrap();
            assert_eq!((m.role, m.message_id.as_str()), (Role::Agent, "m9"));
            assert_eq!(ex.task().history.len(), 1);
        }
    }

    #[test]
    fn a_canceled_task_refuses_late_progress() {
        let mut ex = Execution::new(task(TaskState::Canceled));
        let err = ex.apply(Progress::Completed, 1, || "m".into()).unwrap_err();
        assert_eq!(
            (err.from, err.to),
            (TaskState::Canceled, TaskState::Completed)
        );
        assert_eq!(ex.task().status.state, TaskState::Canceled);
    }

    #[test]
    fn a_direct_message_completes_the_task() {
        let mut ex = Execution::new(task(TaskState::Working));
        let m = Message::agent_text("a".into(), "c1", "t1", "hi");
        ex.apply(Progress::Message(m.clone()), 1, || "m".into())
            .unwrap();
        assert_eq!(ex.direct_message(), Some(&m));
        assert_eq!(ex.task().status.state, TaskState::Completed);
        assert_eq!(
            ex.task().status.message.as_ref(),
            Some(&m),
            "kept for a resend"
        );
        assert_eq!(ex.task().history.last(), Some(&m));
    }

    #[test]
    fn artifact_chunks_create_then_append_and_the_last_closes() {
        let mut ex = Execution::new(task(TaskState::Working));
        let mut chunk = |text: &str, last: bool| {
            let p = Progress::ArtifactChunk {
                artifact: artifact("r", Part::text(text)),
                last,
            };
            assert!(!p.is_final() && p.is_content());
            match ex.apply(p, 1, || "m".into()).unwrap().pop() {
                Some(StreamResponse::ArtifactUpdate(u)) => (u.append, u.last_chunk),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(chunk("a", false), (false, false), "the first creates it");
        assert_eq!(chunk("b", false), (true, false));
        assert_eq!(chunk("c", true), (true, true));
        assert_eq!(ex.task().artifacts.len(), 1);
        assert_eq!(ex.task().artifacts[0].parts, vec![Part::text("abc")]);
        assert_eq!(ex.task().status.state, TaskState::Working);
    }

    #[test]
    fn a_working_status_says_what_the_agent_does_and_the_turn_goes_on() {
        let mut ex = Execution::new(task(TaskState::Submitted));
        let p = Progress::Working("reading".into());
        assert!(!p.is_final() && !p.is_content());
        let frames = ex.apply(p, 7, || "w1".into()).unwrap();
        let [StreamResponse::StatusUpdate(u)] = frames.as_slice() else {
            panic!("{frames:?}")
        };
        assert_eq!(u.status.state, TaskState::Working);
        let m = u.status.message.as_ref().unwrap();
        assert_eq!(
            (m.message_id.as_str(), m.parts[0].text.as_deref()),
            ("w1", Some("reading"))
        );
        ex.apply(Progress::Completed, 8, || "m".into()).unwrap();
        assert_eq!(ex.task().status.state, TaskState::Completed);
    }

    #[test]
    fn whole_artifacts_replace_by_id() {
        let mut ex = Execution::new(task(TaskState::Working));
        ex.apply(
            Progress::Artifact(artifact("f", Part::text("1"))),
            1,
            || "m".into(),
        )
        .unwrap();
        ex.apply(
            Progress::Artifact(artifact("f", Part::text("2"))),
            1,
            || "m".into(),
        )
        .unwrap();
        assert_eq!(ex.task().artifacts.len(), 1);
        assert_eq!(ex.task().artifacts[0].parts, vec![Part::text("2")]);
    }

    #[test]
    fn a_status_without_a_message_draws_no_message_id() {
        let mut ex = Execution::new(task(TaskState::Submitted));
        ex.set_status(TaskState::Working, None, 1, || {
            panic!("no status message, so no id")
        })
        .unwrap();
        ex.apply(Progress::Completed, 2, || {
            panic!("no status message, so no id")
        })
        .unwrap();
        assert!(ex.task().status.message.is_none() && ex.task().history.is_empty());
        assert!(Progress::Completed.is_final() && !Progress::TextDelta("x".into()).is_final());
    }
}
