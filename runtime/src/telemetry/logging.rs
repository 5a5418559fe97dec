//! The server's log: lines go through a bounded queue to a writer thread, so a request never
//! waits on a slow log reader and a closed one (`serve 2>&1 | head`, a log shipper that died)
//! costs lines, never the server. A line the queue has no room for, or that the output refuses,
//! is dropped and counted ([`dropped_lines`]).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing_appender::non_blocking::{ErrorCounter, NonBlockingBuilder, WorkerGuard};

/// Lines the output refused (a closed pipe, a full disk).
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// Lines the queue had no room for, once the log is set up.
static QUEUE_DROPS: std::sync::OnceLock<ErrorCounter> = std::sync::OnceLock::new();

/// Lines queued at most before new ones are dropped.
const QUEUED_LINES: usize = 16_384;

/// Drivers whose debug output carries statement parameters (webhook tokens, sealed values): kept
/// at info unless the filter names them itself.
const QUIET_DRIVERS: &[&str] = &["tokio_postgres"];

/// Log lines dropped since start: refused by the output or over the queue's bound.
pub fn dropped_lines() -> u64 {
    REFUSED.load(Ordering::Relaxed) + QUEUE_DROPS.get().map_or(0, |c| c.dropped_lines() as u64)
}

/// The filter `directives` (`RUST_LOG`, or the default) make, with the drivers of
/// `QUIET_DRIVERS` (the database drivers) kept at info unless a directive names them.
pub fn filter(directives: &str) -> tracing_subscriber::EnvFilter {
    let mut all = directives.to_owned();
    for driver in QUIET_DRIVERS.iter().filter(|d| !directives.contains(**d)) {
        all.push_str(&format!(",{driver}=info"));
    }
    tracing_subscriber::EnvFilter::builder().parse_lossy(all.trim_start_matches(','))
}

/// `text` as one log line, whatever a component put in it: every control character (a newline
/// that would start a line reading like the runtime's own, ESC, CR) written as its escape
/// (`\n`, `\u{1b}`), in the text and the JSON format alike.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    let mut line = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c.is_control() {
            true => line.extend(c.escape_default()),
            false => line.push(c),
        }
    }
    line.into()
}

/// Bytes of lines gathered before they are written.
const BATCH_BYTES: usize = 64 << 10;

/// Standard error that never fails, written a batch at a time: the writer thread gathers the
/// lines queued since its last write (up to [`BATCH_BYTES`]) and writes them at once, so a busy
/// server makes a write per batch, not per line. A batch it cannot write is counted (its lines)
/// and dropped.
#[derive(Default)]
struct Stderr(Vec<u8>);

impl Stderr {
    fn write_out(&mut self) {
        if self.0.is_empty() {
            return;
        }
        if std::io::stderr().write_all(&self.0).is_err() {
            let lines = self.0.iter().filter(|b| **b == b'\n').count().max(1);
            REFUSED.fetch_add(lines as u64, Ordering::Relaxed);
        }
        self.0.clear();
    }
}

impl Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.len() + buf.len() > BATCH_BYTES {
            self.write_out();
        }
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    /// The writer thread flushes when its queue is empty.
    fn flush(&mut self) -> std::io::Result<()> {
        self.write_out();
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

impl Drop for Stderr {
    fn drop(&mut self) {
        self.write_out();
    }
}

/// The span the log's lines carry (with its `trace_id` and `span_id`): a request's; the finer
/// spans are the traces' alone.
pub const REQUEST_SPAN: &str = "a2a";

/// Sets up the process's log on standard error with `directives`, as JSON lines or text, and
/// the spans of `tracing` (when given) beside it; keep the guard for the life of the process
/// (dropping it flushes what is queued, waiting a bounded time).
pub fn init(directives: &str, json: bool, tracing: Option<&super::trace::Tracing>) -> WorkerGuard {
    use std::io::IsTerminal;
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(QUEUED_LINES)
        .thread_name("a2a-edge-log")
        .finish(Stderr::default());
    let _ = QUEUE_DROPS.set(writer.error_counter());
    let ansi = !json && std::io::stderr().is_terminal();
    super::access::install::<tracing_subscriber::Registry>(
        writer.clone(),
        json,
        ansi,
        &filter(directives),
    );
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .log_internal_errors(false);
    let lines = if json {
        lines.json().boxed()
    } else {
        lines.with_ansi(ansi).boxed()
    };
    let only_requests =
        tracing_subscriber::filter::filter_fn(|m| !m.is_span() || m.name() == REQUEST_SPAN);
    let lines = lines.with_filter(filter(directives).and(only_requests));
    tracing_subscriber::registry()
        .with(tracing.map(|t| t.layer()))
        // Only where the log writes a line: a layer without a filter enables every event.
        .with(super::trace::LineIds::default().with_filter(filter(directives)))
        .with(lines)
        .init();
    guard
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(printable("plain, 你好 ✓"), "plain, 你好 ✓");
        assert_eq!(
            printable("a\n2026-12-06T00:00:00Z  INFO a2a_edge: forged\r\u{1b}[31m\u{7f}\t"),
            "a\\n2026-12-06T00:00:00Z  INFO a2a_edge: forged\\r\\u{1b}[31m\\u{7f}\\t"
        );
    }

    #[test]
    fn drivers_that_log_parameters_stay_at_info_unless_named() {
        let f = filter("debug").to_string();
        assert!(f.contains("tokio_postgres=info"), "{f}");
        let named = filter("debug,tokio_postgres=trace").to_string();
        assert!(!named.contains("tokio_postgres=info"), "{named}");
    }
}
