//! The streaming methods: SendStreamingMessage and SubscribeToTask
//! (docs/protocol.md "A2A methods").

use a2a_protocol::sse::Envelope;
use a2a_protocol::{ErrorKind, RpcError, TaskIdRequest, jsonrpc, sse};
use serde_json::Value;
use wasip2::http::types::ResponseOutparam;

use a2a_guest::server::a2a::edge::events::{self, FrameKind, Subscription};

use crate::send::Begin;
use crate::sse::Sse;
use crate::stored;

/// Streams a send: the task, its status and artifact updates, the settled task.
pub fn send(begun: Begin, out: ResponseOutparam, envelope: Envelope) {
    let mut sse = Sse::start(out, envelope);
    match begun {
        // An idempotent resend: the original task (or message) as it stands.
        Begin::Answer(answer) => sse.frame(None, answer.kind(), &answer.inner_text()),
        Begin::Run(mut run) => {
            sse.hold_task(run.task());
            run.attach(sse);
            run.drive();
            sse = run.detach().expect("attached above");
            match run.direct_message() {
                Some(m) if sse.holds() => {
                    sse.drop_held();
                    sse.frame(
                        None,
                        "message",
                        &serde_json::to_string(m).unwrap_or_default(),
                    );
                }
                _ => sse.settled(run.task()),
            }
        }
    }
    sse.end();
}

/// A subscription ready to stream.
pub struct Opened {
    task_id: String,
    sub: Subscription,
    replaying: bool,
}

/// Checks a SubscribeToTask request and opens the task's log (after `Last-Event-ID`, if sent).
/// Errors come before any stream: unknown task, terminal task.
pub fn open(params: &Value, last_event_id: Option<&str>) -> Result<Opened, RpcError> {
    let p: TaskIdRequest = jsonrpc::params(params)?;
    let (_, task) = stored::load(&p.id)?;
    if task.status.state.is_terminal() {
        return Err(RpcError::new(
            ErrorKind::UnsupportedOperation,
            format!(
                "task {} is {}: there is nothing to subscribe to",
                p.id,
                task.status.state.as_str()
            ),
        ));
    }
    let after = sse::last_event_id(last_event_id);
    let sub = events::open(&p.id, after).map_err(|e| RpcError::new(ErrorKind::TaskNotFound, e))?;
    Ok(Opened {
        task_id: p.id,
        sub,
        replaying: after.is_some(),
    })
}

/// Streams the current snapshot, then (on reconnect) the status frames after `Last-Event-ID`,
/// then every frame live until the task's log closes, then the settled snapshot; the live part
/// is handed to the host.
pub fn subscribe(opened: Opened, out: ResponseOutparam, envelope: Envelope) {
    let Opened {
        task_id,
        sub,
        replaying,
    } = opened;
    let mut sse = Sse::start(out, envelope);
    // Read the task after opening the log: a task that settled in between shows settled here.
    match stored::load(&task_id) {
        Ok((_, task)) => {
            sse.task(&task);
            if task.status.state.is_terminal() {
                return sse.end();
            }
        }
        Err(_) => return sse.end(),
    }
    let head = if replaying { sub.head() } else { 0 };
    // What is in the log now (the replay after a reconnect, and any live frames) goes out from
    // here; the rest is the host's, so this instance is free as soon as it returns.
    while let Some(f) = sub.try_next() {
        // Replay after a reconnect carries status frames only: artifact chunks were applied already.
        if f.seq <= head && f.kind != FrameKind::StatusUpdate {
            continue;
        }
        sse.frame(Some(f.seq), sse::Member::from(f.kind).name(), &f.json);
    }
    if !sub.is_closed() {
        let (request_id, v03) = sse.hand_off_envelope();
        events::hand_off(sub, request_id.as_deref(), v03);
        return sse.end();
    }
    if let Ok((_, task)) = stored::load(&task_id) {
        sse.settled(&task);
    }
    sse.end();
}
