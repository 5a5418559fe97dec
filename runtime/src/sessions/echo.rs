//! The `echo` backend: streams the prompt back word by word, then completes.

use tokio_util::sync::CancellationToken;

use a2a_protocol::execution::Progress;

use super::{Backend, BoxFuture, EventSink, TurnInput};

/// Replies with the prompt.
pub struct Echo;

impl Backend for Echo {
    fn run(&self, input: TurnInput, events: EventSink, cancel: CancellationToken) -> BoxFuture {
        Box::pin(async move {
            for word in input.prompt.split_inclusive(char::is_whitespace) {
                if cancel.is_cancelled() {
                    let _ = events.send(Progress::Failed("canceled".into()));
                    return;
                }
                let _ = events.send(Progress::TextDelta(word.to_owned()));
            }
            let _ = events.send(Progress::Completed);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn echoes_word_by_word_then_completes() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let input = TurnInput::sample("hello big world", Vec::new());
        Echo.run(input, tx, CancellationToken::new()).await;
        let mut got = Vec::new();
        while let Ok(e) = rx.try_recv() {
            got.push(e);
        }
        assert_eq!(
            got,
            [
                Progress::TextDelta("hello ".into()),
                Progress::TextDelta("big ".into()),
                Progress::TextDelta("world".into()),
                Progress::Completed
            ]
        );
    }
}
