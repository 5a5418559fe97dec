//! The smallest agent: it answers with the message's text.

use a2a_agent::{Agent, Outcome, Turn};

struct Echo;

impl Agent for Echo {
    fn run(turn: Turn) -> Outcome {
        match a2a_agent::say(&format!("echo: {}", turn.text)) {
            Ok(()) => Outcome::Completed,
            Err(e) => Outcome::Failed(e),
        }
    }
}

a2a_agent::export_agent!(Echo);
