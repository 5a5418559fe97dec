//! `wasi:logging/logging`: an agent's lines in the runtime's log, with its instance and task,
//! at most [`MAX_LINES`] a turn, each cut to [`MAX_LINE_BYTES`] and its control characters
//! escaped ([`printable`]): an agent cannot write a line that reads like the runtime's own.

use super::bindings::wasi::logging::logging::{Host, Level};
use crate::telemetry::logging::printable;

/// Most lines one turn logs; past it one line says how many more were dropped.
pub const MAX_LINES: u32 = 200;
/// Longest line kept, bytes.
pub const MAX_LINE_BYTES: usize = 4 << 10;

/// The logging capability of one turn.
pub struct LoggingCtx {
    instance_id: String,
    task_id: String,
    agent: String,
    lines: u32,
}

impl LoggingCtx {
    /// Lines of `agent`'s turn on `task_id` of `instance_id`.
    pub fn prepare(agent: &str, instance_id: &str, task_id: &str) -> Self {
        LoggingCtx {
            instance_id: instance_id.to_owned(),
            task_id: task_id.to_owned(),
            agent: agent.to_owned(),
            lines: 0,
        }
    }

    /// Lines this turn wanted to log past [`MAX_LINES`].
    pub fn dropped(&self) -> u32 {
        self.lines.saturating_sub(MAX_LINES)
    }
}

/// `text` cut to [`MAX_LINE_BYTES`] on a character boundary.
fn cut(text: &str) -> &str {
    &text[..text.floor_char_boundary(MAX_LINE_BYTES)]
}

impl Host for LoggingCtx {
    async fn log(
        &mut self,
        level: Level,
        context: String,
        message: String,
    ) -> wasmtime::Result<()> {
        self.lines = self.lines.saturating_add(1);
        if self.lines > MAX_LINES {
            return Ok(());
        }
        let (agent, instance, task) = (&self.agent, &self.instance_id, &self.task_id);
        let (context, message) = (printable(cut(&context)), printable(cut(&message)));
        match level {
            Level::Trace => {
                tracing::trace!(agent, instance, task, context = &*context, "{message}")
            }
            Level::Debug => {
                tracing::debug!(agent, instance, task, context = &*context, "{message}")
            }
            Level::Info => tracing::info!(agent, instance, task, context = &*context, "{message}"),
            Level::Warn => tracing::warn!(agent, instance, task, context = &*context, "{message}"),
            Level::Error | Level::Critical => {
                tracing::error!(agent, instance, task, context = &*context, "{message}")
            }
        }
        Ok(())
    }
}
