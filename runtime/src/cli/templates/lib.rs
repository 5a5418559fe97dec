//! {{name}}: an a2a-edge agent (a2a-edge's docs/agents.md).

wit_bindgen::generate!({ world: "agent", path: "wit", generate_all });

use a2a::agent::progress;

struct Agent;

impl Guest for Agent {
    fn run(turn: Turn) -> Outcome {
        let answer = progress::status("thinking")
            .and_then(|()| progress::text(&format!("{{name}} heard: {}", turn.text)));
        match answer {
            Ok(()) => Outcome::Completed,
            Err(e) => Outcome::Failed(e),
        }
    }
}

export!(Agent);
