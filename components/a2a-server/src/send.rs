//! `SendMessage`: the gate, idempotency, task creation or continuation, and driving a session
//! turn to a settled state through the host.

use a2a_protocol::execution::{Execution, Progress};
use a2a_protocol::idempotency;
use a2a_protocol::{
    ErrorKind, Message, RpcError, SendMessageConfiguration, SendMessageRequest, StreamResponse,
    Task, TaskState, TaskStatus, jsonrpc,
};
use serde_json::{Value, json};
use wasip2::clocks::monotonic_clock;
use wasip2::io::poll::{self, Pollable};

use a2a_guest::server::a2a::edge::events;
use a2a_guest::server::a2a::edge::request_context::{self, Limits};
use a2a_guest::server::a2a::edge::sessions::{self, TurnRequest};
use a2a_guest::server::a2a::edge::storage;
use a2a_guest::server::a2a::edge::types::{MessageClaim, StoreError};
use a2a_guest::server::a2a::edge::{admission, attachments};
use a2a_guest::server::{row, task as stored_task};
use a2a_guest::{Arrival, now_ms};

use crate::frames;
use crate::sse::{FIRST_FRAME_GRACE_NS, Sse};
use crate::stored::load as load_task;

/// What a send turns into before any turn runs.
pub enum Begin {
    /// Answer at once (an idempotent resend).
    Answer(Box<idempotency::SendAnswer>),
    /// A task to drive (boxed: it is most of what a send carries).
    Run(Box<Run>),
}

/// A task being driven by this request.
pub struct Run {
    ex: Execution,
    /// The concurrency slot the task holds while it runs (its turn holds it once started).
    slot: Option<admission::Slot>,
    /// The instance's limits (execution timeout, keep-alive interval).
    limits: Limits,
    /// The stream the caller listens on, if it asked for one.
    sink: Option<Sse>,
    skill: String,
    created_at: u64,
    version: u64,
    message: Message,
    config: SendMessageConfiguration,
    /// The task is held by the host, not written yet (see `storage.hold-task`).
    unwritten: bool,
    /// Why a held task could not be written: the answer is this error, never the task.
    lost: Option<RpcError>,
    /// The task was held: nobody heard of it before it settled, so nobody listens to its log
    /// and its frames are not published.
    quiet: bool,
    /// The stored copy a compare-and-swap lost to (its `updated-at`, the task).
    elsewhere: Option<(u64, Task)>,
    /// When the request came (the run's clock starts there), and random bytes for its ids.
    arrival: Arrival,
    /// When the events being applied were taken: the time of their status changes.
    taken_at: Option<u64>,
    /// The body of the task's last write and the task's `changes` then: its text while the
    /// count stays there.
    written: Option<(u64, String)>,
}

/// What a run waits on, once it first has to: the turn, the deadline, the keep-alive interval
/// and the first frame's grace.
struct Waits {
    ready: Pollable,
    deadline: Pollable,
    keep_alive: Pollable,
    grace: Pollable,
}

/// Where applying a turn's ready events left the run.
enum Ready {
    /// The task settled (or was settled elsewhere): the turn is done.
    Settled,
    /// The execution timeout passed.
    Late,
    /// The turn has no event ready: wait for it.
    Waiting,
}

/// How the caller of a send hears of its task.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// It waits for the answer (`SendMessage`).
    Waits,
    /// It listens to a stream (`SendStreamingMessage`).
    Streams,
}

/// Checks the request, passes the gate, and creates (or continues) the task, unless the message
/// is a retry of an earlier one (docs/protocol.md "A2A methods"), which is answered with that task as it stands.
pub fn begin(
    params: &Value,
    instance: &request_context::InstanceInfo,
    caller: Caller,
    arrival: Arrival,
) -> Result<Begin, RpcError> {
    let req: SendMessageRequest = jsonrpc::params(params)?;
    let message = req.message;
    let config = req.configuration.unwrap_or_default();
    let takes = a2a_protocol::send::Takes {
        max_parts: instance.limits.max_parts,
        push_notifications: instance.push_notifications,
    };
    a2a_protocol::send::check(&message, &config, takes)?;
    let announced: Vec<String> = instance.skills.iter().map(|s| s.id.clone()).collect();
    let skill = match a2a_protocol::card::select_skill(message.skill(), &announced) {
        Ok(s) => s.to_owned(),
        Err(why) => {
            request_context::record_rejection("skill");
            return Err(RpcError::new(ErrorKind::InvalidParams, why));
        }
    };
    if let Err(ms) = admission::check_rate() {
        return Err(RpcError::rate_limited(ms));
    }
    // Nobody hears of a new task of a caller who waits for it until it settles: the host may
    // write it once, then. A webhook hears of it at once.
    let hold = caller == Caller::Waits
        && !config.return_immediately
        && config.task_push_notification_config.is_none();
    claim(message, skill, config, instance, hold, arrival)
}

/// Claims the message id and starts the task, unless the message is a retry of the one that
/// holds the id (answered with its task as it stands). A claim fails only when another request
/// recorded the same id in the meantime: it is decided again on what that one recorded.
fn claim(
    mut message: Message,
    skill: String,
    config: SendMessageConfiguration,
    instance: &request_context::InstanceInfo,
    hold: bool,
    mut arrival: Arrival,
) -> Result<Begin, RpcError> {
    let fingerprint = idempotency::fingerprint(&message);
    let mut seen = storage::find_message(&message.message_id)?;
    let mut admitted = false;
    for _ in 0..4 {
        if let Some(record) = &seen
            && let Ok((_, task)) = load_task(&record.task_id)
            && idempotency::is_retry(&message, &fingerprint, &record.fingerprint, &task)
        {
            // A resend that carries a webhook registers it for the task it is answered with,
            // as the first send would have.
            if let Some(c) = config.task_push_notification_config.clone() {
                crate::push::register(c, &task.id)?;
            }
            return Ok(Begin::Answer(Box::new(answer(task, &config))));
        }
        if instance.attachments && !admitted {
            admit_attachments(&mut message)?;
            admitted = true;
        }
        let claim = MessageClaim {
            message_id: message.message_id.clone(),
            fingerprint: fingerprint.clone(),
            replaces: seen.take(),
        };
        let start = Start {
            message: message.clone(),
            skill: skill.clone(),
            config: config.clone(),
            limits: instance.limits,
            claim,
            hold,
            // A second try makes ids of its own.
            arrival: std::mem::take(&mut arrival),
        };
        match start.run() {
            Err(StoreError::DuplicateMessage(current)) => seen = Some(current),
            Err(e) => return Err(e.into()),
            Ok(begun) => return begun,
        }
    }
    Err(RpcError::new(
        ErrorKind::Internal,
        format!(
            "message {} is being sent by several requests at once; retry it",
            message.message_id
        ),
    ))
}

/// A message that creates or continues a task, with its claim on the message id.
struct Start {
    message: Message,
    skill: String,
    config: SendMessageConfiguration,
    limits: Limits,
    claim: MessageClaim,
    /// Create the task with `storage.hold-task`.
    hold: bool,
    arrival: Arrival,
}

impl Start {
    /// Creates the task, or continues the one the message names; a store error when the claim
    /// lost (or the store failed).
    fn run(self) -> Result<Result<Begin, RpcError>, StoreError> {
        match self.message.task_id.clone() {
            Some(task_id) => self.continue_task(&task_id),
            None => self.create(),
        }
    }

    fn create(self) -> Result<Result<Begin, RpcError>, StoreError> {
        let Start {
            message,
            skill,
            config,
            limits,
            claim,
            hold,
            mut arrival,
        } = self;
        let now = arrival.ms;
        let [task_id, fresh_context] = arrival.uuids_at(now);
        let context_id = message.context_id.clone().unwrap_or(fresh_context);
        let mut first = message.clone();
        first.context_id = Some(context_id.clone());
        first.task_id = Some(task_id.clone());
        let task = Task {
            id: task_id,
            context_id,
            status: TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: Some(a2a_protocol::time::rfc3339_ms(now)),
            },
            artifacts: Vec::new(),
            history: vec![first],
            metadata: Some(
                json!({ "skill": skill })
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        };
        // The task is stored already WORKING (or FAILED over quota): nobody can have heard of it
        // while it was SUBMITTED, so that state costs no write.
        let mut ex = Execution::new(task);
        let (slot, _) = admit(&mut ex, now, &mut arrival);
        let first_row = match row(ex.task(), &skill, now, now, 1) {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let unwritten = hold && ex.task().status.state.is_running();
        let push = match config.task_push_notification_config.clone() {
            Some(c) => match crate::push::stored(c, &ex.task().id) {
                Ok(json) => Some(json),
                Err(e) => return Ok(Err(e)),
            },
            None => None,
        };
        if hold {
            storage::hold_task(&first_row, &claim)?;
        } else {
            storage::create_task(&first_row, Some(&claim), push.as_deref())?;
        }
        let mut run = Run {
            ex,
            slot,
            limits,
            sink: None,
            skill,
            created_at: now,
            version: 1,
            message,
            config,
            unwritten,
            lost: None,
            quiet: hold,
            elsewhere: None,
            arrival,
            taken_at: None,
            written: None,
        };
        run.wrote(first_row.body);
        Ok(Ok(run.begin()))
    }

    fn continue_task(self, task_id: &str) -> Result<Result<Begin, RpcError>, StoreError> {
        let Start {
            mut message,
            skill,
            config,
            limits,
            claim,
            mut arrival,
            ..
        } = self;
        let (row, mut task) = match load_task(task_id) {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        if message
            .context_id
            .as_deref()
            .is_some_and(|c| c != task.context_id)
        {
            return Ok(Err(RpcError::new(
                ErrorKind::InvalidParams,
                format!(
                    "contextId contradicts task {task_id}, whose context is {}",
                    task.context_id
                ),
            )));
        }
        let state = task.status.state;
        if state.is_terminal() {
            return Ok(Err(RpcError::new(
                ErrorKind::UnsupportedOperation,
                format!(
                    "task {task_id} is {} and takes no more messages",
                    state.as_str()
                ),
            )));
        }
        if !state.is_interrupted() {
            return Ok(Err(RpcError::new(
                ErrorKind::UnsupportedOperation,
                format!("task {task_id} is still running; wait for it or cancel it"),
            )));
        }
        if let Some(c) = config.task_push_notification_config.clone()
            && let Err(e) = crate::push::register(c, task_id)
        {
            return Ok(Err(e));
        }
        message.context_id = Some(task.context_id.clone());
        task.history.push(message.clone());
        let mut ex = Execution::new(task);
        let now = arrival.ms;
        let (slot, frame) = admit(&mut ex, now, &mut arrival);
        let mut run = Run {
            ex,
            slot,
            limits,
            sink: None,
            skill,
            created_at: row.created_at,
            version: row.version,
            message,
            config,
            unwritten: false,
            lost: None,
            quiet: false,
            elsewhere: None,
            arrival,
            taken_at: None,
            written: None,
        };
        match run.persist(Some(&claim), frame.as_slice(), now) {
            Ok(true) => {}
            Ok(false) => {
                return Ok(Err(RpcError::new(
                    ErrorKind::UnsupportedOperation,
                    format!("task {task_id} was continued or changed by another request"),
                )));
            }
            Err(e) => return Err(e),
        }
        Ok(Ok(run.begin()))
    }
}

/// Takes a concurrency slot and moves the task to WORKING, or to FAILED naming the quota when
/// none is free; returns the slot and the status frame.
fn admit(
    ex: &mut Execution,
    now: u64,
    arrival: &mut Arrival,
) -> (Option<admission::Slot>, Option<StreamResponse>) {
    let (slot, state, text) = match admission::acquire_slot() {
        Ok(slot) => (Some(slot), TaskState::Working, None),
        Err(n) => (
            None,
            TaskState::Failed,
            Some(format!(
                "concurrency quota reached: at most {n} tasks at once (this agent's cap, or each caller's); retry when one ends"
            )),
        ),
    };
    (
        slot,
        ex.set_status(state, text, now, || arrival.uuid_at(now))
            .ok(),
    )
}

impl Run {
    /// A run to drive, or the answer when the task settled already (over quota).
    fn begin(self) -> Begin {
        if self.settled() {
            Begin::Answer(Box::new(self.answer()))
        } else {
            Begin::Run(Box::new(self))
        }
    }

    /// The task as it stands.
    pub fn task(&self) -> &Task {
        self.ex.task()
    }

    /// Streams every frame of the run to `sse` from now on.
    pub fn attach(&mut self, sse: Sse) {
        self.sink = Some(sse);
    }

    /// Takes the stream back.
    pub fn detach(&mut self) -> Option<Sse> {
        self.sink.take()
    }

    /// The message the turn answered with, if any.
    pub fn direct_message(&self) -> Option<&Message> {
        self.ex.direct_message()
    }

    /// Whether the caller wants the answer before the task settles.
    pub fn return_immediately(&self) -> bool {
        self.config.return_immediately
    }

    /// The answer for the task as it stands.
    pub fn answer(&self) -> idempotency::SendAnswer {
        answer(self.ex.task().clone(), &self.config)
    }

    /// The answer's JSON text, the task's last write spliced in while the task is as written.
    pub fn answer_text(&self) -> String {
        let written = self.written.as_ref();
        let written = written.filter(|(n, _)| *n == self.ex.changes());
        idempotency::answer_text(
            self.ex.task(),
            self.config.history_length,
            written.map(|(_, body)| body.as_str()),
        )
    }

    /// The answer's text once the run is over: the task (or message), or why its task could
    /// not be stored.
    pub fn outcome(self) -> Result<String, RpcError> {
        match self.lost {
            Some(e) => Err(e),
            None => Ok(self.answer_text()),
        }
    }

    /// Keeps `body` as the text of the task as it stands.
    fn wrote(&mut self, body: String) {
        self.written = Some((self.ex.changes(), body));
    }

    /// Runs the session turn until the task settles (terminal or interrupted), persisting every
    /// status change with compare-and-swap and publishing every frame.
    pub fn drive(&mut self) {
        let started = match self.slot.take() {
            Some(slot) => sessions::start_turn_holding(&self.turn_request(), slot),
            None => sessions::start_turn(&self.turn_request()),
        };
        match started {
            Ok(turn) => self.follow(&turn),
            // The host's text for the caller (the reason is in its log and the task's note).
            Err(e) => {
                self.progress(Progress::Failed(e));
                return;
            }
        }
        if self.unwritten && self.lost.is_none() {
            // The turn stopped short of a settled state: a held task must settle to be written.
            self.progress(Progress::Failed(
                "the session stopped before the task settled".into(),
            ));
        }
        if self.unwritten && self.lost.is_none() {
            self.lost = Some(RpcError::new(
                ErrorKind::Internal,
                "the task could not be stored; send the message again",
            ));
        }
        if !self.quiet {
            events::close(&self.ex.task().id);
        }
    }

    /// What the session's turn is asked: the task, the message, its skill and its prompt.
    fn turn_request(&self) -> TurnRequest {
        let task = self.ex.task();
        TurnRequest {
            context_id: task.context_id.clone(),
            task_id: task.id.clone(),
            message_id: self.message.message_id.clone(),
            skill: self.skill.clone(),
            prompt: a2a_protocol::prompt::render(&self.message.parts),
            message: serde_json::to_string(&self.message).unwrap_or_default(),
        }
    }

    /// Applies the turn's events until the task settles or the execution timeout passes;
    /// while it waits, keeps the caller's stream alive and lets a held first frame go after
    /// its grace. The clocks are set the first time the turn makes the run wait: a turn whose
    /// events are all there at once (echo) needs none.
    fn follow(&mut self, turn: &sessions::Turn) {
        let keep_alive_ns = self.limits.keep_alive_ms.saturating_mul(1_000_000);
        let started = self.arrival.ns;
        let deadline_at =
            started.saturating_add(self.limits.execution_timeout_ms.saturating_mul(1_000_000));
        let mut waits: Option<Waits> = None;
        loop {
            match self.apply_ready(turn, deadline_at) {
                Ready::Settled => return,
                Ready::Late => return self.time_out(turn),
                Ready::Waiting => {}
            }
            let w = waits.get_or_insert_with(|| Waits {
                ready: turn.subscribe(),
                deadline: monotonic_clock::subscribe_instant(deadline_at),
                keep_alive: monotonic_clock::subscribe_duration(keep_alive_ns),
                grace: monotonic_clock::subscribe_instant(
                    started.saturating_add(FIRST_FRAME_GRACE_NS),
                ),
            });
            let holding = self.sink.as_ref().is_some_and(Sse::holds);
            let fired = if holding {
                poll::poll(&[&w.ready, &w.deadline, &w.keep_alive, &w.grace])
            } else {
                poll::poll(&[&w.ready, &w.deadline, &w.keep_alive])
            };
            if fired.contains(&1) {
                return self.time_out(turn);
            }
            if fired.contains(&3) {
                self.sink.as_mut().map(Sse::flush_held);
            }
            if fired.contains(&2) {
                if let Some(sse) = &mut self.sink {
                    sse.keep_alive();
                }
                w.keep_alive = monotonic_clock::subscribe_duration(keep_alive_ns);
            }
        }
    }

    /// Applies the events the turn has ready. A backend that always has the next event ready
    /// never lets the run wait: the deadline is checked between events too.
    fn apply_ready(&mut self, turn: &sessions::Turn, deadline_at: u64) -> Ready {
        const BATCH: u32 = 16;
        loop {
            let taken = turn.take_timed(BATCH);
            let full = taken.events.len() == BATCH as usize;
            self.taken_at = Some(taken.now_ms);
            for event in taken.events {
                if !self.progress(event.into()) || self.settled() {
                    self.taken_at = None;
                    return Ready::Settled;
                }
            }
            self.taken_at = None;
            if !full {
                return Ready::Waiting;
            }
            if monotonic_clock::now() >= deadline_at {
                return Ready::Late;
            }
        }
    }

    /// Stops a turn that ran past the execution timeout and fails its task.
    fn time_out(&mut self, turn: &sessions::Turn) {
        request_context::record_rejection("timeout");
        turn.cancel();
        let timeout_ms = self.limits.execution_timeout_ms;
        self.progress(Progress::Failed(format!(
            "execution timeout: the task ran longer than {timeout_ms} ms"
        )));
    }

    fn settled(&self) -> bool {
        let s = self.ex.task().status.state;
        s.is_terminal() || s.is_interrupted()
    }

    /// Applies progress; false when the task was settled elsewhere (e.g. canceled).
    fn progress(&mut self, p: Progress) -> bool {
        let changes_status = !p.is_content();
        // Only a status change can be refused by the store and need undoing: copying the task
        // for every delta would make a long answer quadratic.
        let before = changes_status.then(|| self.ex.clone());
        // A content event carries no time (`Execution::apply` reads it for status changes
        // only), so it costs no clock read.
        let now = if changes_status {
            self.taken_at.unwrap_or_else(now_ms)
        } else {
            0
        };
        match self.ex.apply(p, now, || self.arrival.uuid_at(now)) {
            Ok(frames) => {
                match before {
                    Some(before) if !matches!(self.persist(None, &frames, now), Ok(true)) => {
                        self.ex = before;
                        if let Some((updated_at, stored)) = self.elsewhere.take()
                            && !self.adopt(stored, updated_at)
                            && self.unwritten
                        {
                            // A held task another writer changed but did not settle.
                            self.lost = Some(RpcError::new(
                                ErrorKind::Internal,
                                "the task changed concurrently; send the message again",
                            ));
                        }
                        return false;
                    }
                    Some(_) => {}
                    None => self.publish(&frames),
                }
                true
            }
            Err(_) => false,
        }
    }

    /// Compare-and-swap of the task (with the message's claim when given), its status `frames`
    /// logged with it and then streamed; on a version conflict, takes the stored copy and
    /// answers false. A lost claim is the store error. `now` is the moment of the change.
    fn persist(
        &mut self,
        claim: Option<&MessageClaim>,
        frames: &[StreamResponse],
        now: u64,
    ) -> Result<bool, StoreError> {
        let Ok(next) = row(
            self.ex.task(),
            &self.skill,
            self.created_at,
            now,
            self.version + 1,
        ) else {
            return Ok(false);
        };
        let settles = !self.ex.task().status.state.is_running();
        let frames = if self.quiet {
            Vec::new()
        } else {
            frames::encode(frames)
        };
        match storage::update_task(&next, self.version, claim, &frames) {
            Ok(w) => {
                self.version = w.version;
                self.wrote(next.body);
                self.unwritten &= !settles;
                frames::logged(w.first_seq, &frames, self.sink());
                Ok(true)
            }
            // Another writer changed the stored row: a held task too, which a shared store
            // writes at once (another node settled it when this one stopped renewing its lease).
            Err(StoreError::Conflict(current)) => {
                self.version = current.version;
                self.elsewhere = stored_task(&current).ok().map(|t| (current.updated_at, t));
                Ok(false)
            }
            Err(e) if self.unwritten => {
                self.lost = Some(e.into());
                Ok(false)
            }
            Err(e @ StoreError::DuplicateMessage(_)) => Err(e),
            Err(_) => Ok(false),
        }
    }

    /// The task was settled by another writer while this run drove it (CancelTask, the runtime's
    /// settlement): its status stands, what this run streamed stays in it (written back once,
    /// compare-and-swap on the version just read, the state unchanged, so a cancel is never
    /// overwritten), and this run's stream hears the settled status before the settled task.
    /// False when the stored copy is not settled.
    fn adopt(&mut self, stored: Task, updated_at: u64) -> bool {
        let Some(settled) = self.ex.settled_elsewhere(stored) else {
            return false;
        };
        // Settled and stored: a held task too, which a shared store wrote at once.
        self.unwritten = false;
        if settled.rewrite
            && let Ok(next) = row(
                self.ex.task(),
                &self.skill,
                self.created_at,
                updated_at,
                self.version + 1,
            )
            && let Ok(w) = storage::update_task(&next, self.version, None, &[])
        {
            self.version = w.version;
            self.wrote(next.body);
        }
        frames::unlogged(&settled.frames, self.sink());
        true
    }

    /// Logs and streams frames that come with no status change.
    fn publish(&mut self, frames: &[StreamResponse]) {
        if self.quiet {
            return;
        }
        let id = self.ex.task().id.clone();
        frames::publish(&id, frames, self.sink());
    }

    /// Where frames are streamed: a turn that answers with a message alone streams just that
    /// message (written at the end).
    fn sink(&mut self) -> Option<&mut Sse> {
        match self.sink.as_mut() {
            Some(sse) if sse.holds() && self.ex.direct_message().is_some() => None,
            sink => sink,
        }
    }
}

/// Replaces each `raw` part by a durable reference from the attachments service (the bytes leave
/// the message before it is stored); a refused attachment refuses the message.
fn admit_attachments(message: &mut Message) -> Result<(), RpcError> {
    for part in message.parts.iter_mut() {
        let Some(raw) = part.raw.take() else { continue };
        let reference =
            attachments::admit(part.media_type.as_deref(), part.filename.as_deref(), &raw)
                .map_err(|e| RpcError::new(ErrorKind::InvalidParams, e))?;
        part.url = Some(reference);
    }
    Ok(())
}

fn answer(task: Task, config: &SendMessageConfiguration) -> idempotency::SendAnswer {
    idempotency::answer(task, config.history_length)
}
