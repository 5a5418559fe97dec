//! An agent's standard error: the last [`TAIL_BYTES`] it wrote are kept (a Rust panic's message
//! lands there), for the log line of a turn that did not complete. Writes never fail, so an
//! agent that writes much is never stopped for it.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

/// Bytes of standard error kept, the last ones.
pub const TAIL_BYTES: usize = 4 << 10;

/// The tail of one turn's standard error.
#[derive(Clone, Default)]
pub struct Tail(Arc<Mutex<VecDeque<u8>>>);

impl Tail {
    /// What was kept, as text (invalid UTF-8 replaced), control characters escaped for the log.
    pub fn text(&self) -> String {
        let kept = self.0.lock().unwrap();
        let (a, b) = kept.as_slices();
        let text = String::from_utf8_lossy(&[a, b].concat()).into_owned();
        crate::telemetry::logging::printable(text.trim_end()).into_owned()
    }

    fn keep(&self, bytes: &[u8]) {
        let mut kept = self.0.lock().unwrap();
        let bytes = &bytes[bytes.len().saturating_sub(TAIL_BYTES)..];
        let over = (kept.len() + bytes.len()).saturating_sub(TAIL_BYTES);
        kept.drain(..over);
        kept.extend(bytes);
    }
}

impl IsTerminal for Tail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Tail {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for Tail {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.keep(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_escaped() {
        let t = Tail::default();
        t.keep(&vec![b'a'; TAIL_BYTES]);
        t.keep(b"thread 'main' panicked at src/lib.rs:1:1:\nboom\n");
        let text = t.text();
        assert!(
            text.ends_with("panicked at src/lib.rs:1:1:\\nboom"),
            "{text}"
        );
        assert!(text.len() < TAIL_BYTES + 8, "{}", text.len());
        t.keep(&vec![b'b'; 3 * TAIL_BYTES]);
        assert_eq!(t.text(), "b".repeat(TAIL_BYTES));
    }
}
