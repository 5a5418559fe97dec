//! The `command` backend: one run of a configured program per turn. The prompt goes to stdin,
//! the ids to the environment; stdout streams back as text; exit 0 completes the task, anything
//! else fails it with the tail of stderr. Timeout and cancel kill the whole process group.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::groups::{Groups, TURN_MARKER};
use a2a_protocol::execution::Progress;

use super::{Backend, BoxFuture, EventSink, TurnInput};

/// How much of stderr a failure reports.
const STDERR_TAIL: usize = 2048;

/// Runs a program per turn.
pub struct Command {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Working directory.
    pub working_dir: Option<PathBuf>,
    /// Longest a turn may run.
    pub timeout: Duration,
    /// Where running process groups are recorded.
    pub groups: Arc<Groups>,
}

impl Backend for Command {
    fn uses_history(&self) -> bool {
        true
    }

    fn run(&self, input: TurnInput, events: EventSink, cancel: CancellationToken) -> BoxFuture {
        let (argv, dir, timeout, groups) = (
            self.argv.clone(),
            self.working_dir.clone(),
            self.timeout,
            self.groups.clone(),
        );
        Box::pin(async move {
            let outcome = match run(&argv, dir, timeout, &input, &events, &cancel, &groups).await {
                Ok(o) => o,
                Err(e) => Progress::Unavailable(format!("could not run {:?}: {e}", argv[0])),
            };
            let _ = events.send(outcome);
        })
    }
}

/// The conversation so far as JSON (`[{"role":"user","text":…},…]`), the newest entries that fit
/// in [`HISTORY_BYTES`].
fn history_json(history: &[super::history::Entry]) -> String {
    let mut keep = history.len();
    while keep > 0 {
        let json = serde_json::to_string(&history[history.len() - keep..]).unwrap_or_default();
        if json.len() <= HISTORY_BYTES {
            return json;
        }
        keep -= 1;
    }
    "[]".into()
}

/// Largest `A2A_HISTORY` value.
const HISTORY_BYTES: usize = 64 * 1024;

/// The process of one turn: the program in a process group of its own that dies with the
/// runtime, the turn's ids and history in its environment.
fn command(argv: &[String], dir: Option<PathBuf>, input: &TurnInput) -> tokio::process::Command {
    let key = crate::records::task_key(&input.instance_id, &input.task_id);
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("A2A_CONTEXT_ID", &input.context_id)
        .env("A2A_TASK_ID", &input.task_id)
        .env("A2A_MESSAGE_ID", &input.message_id)
        .env("A2A_SKILL", &input.skill)
        .env("A2A_INSTANCE_ID", &input.instance_id)
        .env("A2A_HISTORY", history_json(&input.history))
        .env(TURN_MARKER, &key)
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: the closure only calls prctl, which is async-signal-safe.
    unsafe { cmd.pre_exec(super::groups::die_with_parent) };
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd
}

/// Sends stdout as text deltas until it closes, whole UTF-8 characters only (a split one waits
/// for the next read).
async fn stream(
    mut stdout: tokio::process::ChildStdout,
    events: &EventSink,
) -> std::io::Result<()> {
    let mut buf = [0u8; 4096];
    let mut pending = Vec::new();
    loop {
        let n = stdout.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        pending.extend_from_slice(&buf[..n]);
        let valid = match std::str::from_utf8(&pending) {
            Ok(_) => pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => pending.len(),
        };
        let text: Vec<u8> = pending.drain(..valid).collect();
        let _ = events.send(Progress::TextDelta(
            String::from_utf8_lossy(&text).into_owned(),
        ));
    }
    if !pending.is_empty() {
        let _ = events.send(Progress::TextDelta(
            String::from_utf8_lossy(&pending).into_owned(),
        ));
    }
    Ok(())
}

async fn run(
    argv: &[String],
    dir: Option<PathBuf>,
    timeout: Duration,
    input: &TurnInput,
    events: &EventSink,
    cancel: &CancellationToken,
    groups: &Groups,
) -> std::io::Result<Progress> {
    let mut child = command(argv, dir, input).spawn()?;
    let group = child.id().map(|id| id as i32);
    if let Some(pgid) = group {
        groups.started(
            pgid,
            &crate::records::task_key(&input.instance_id, &input.task_id),
        );
    }
    let mut stdin = child.stdin.take().expect("piped");
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let prompt = input.prompt.clone();
    // A program that does not read its stdin must not block the turn.
    tokio::spawn(async move {
        let _ = stdin.write_all(prompt.as_bytes()).await;
    });
    let err_tail = tokio::spawn(async move {
        let mut all = Vec::new();
        let _ = stderr.read_to_end(&mut all).await;
        String::from_utf8_lossy(&all[all.len().saturating_sub(STDERR_TAIL)..])
            .trim()
            .to_owned()
    });
    let streaming = async {
        stream(stdout, events).await?;
        child.wait().await
    };
    let kill = || {
        if let Some(pgid) = group {
            groups.kill(pgid);
        }
    };
    tokio::select! {
        status = streaming => {
            let status = status?;
            kill(); // children left behind in the group end with the turn
            if status.success() {
                Ok(Progress::Completed)
            } else {
                let tail = err_tail.await.unwrap_or_default();
                Ok(Progress::Unavailable(format!("the command {status}{}{tail}", if tail.is_empty() { "" } else { ": " })))
            }
        }
        _ = cancel.cancelled() => {
            kill();
            Ok(Progress::Failed("canceled".into()))
        }
        _ = tokio::time::sleep(timeout) => {
            kill();
            Ok(Progress::Unavailable(format!("the command ran longer than its {} ms timeout and was killed", timeout.as_millis())))
        }
    }
}
