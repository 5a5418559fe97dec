//! An agent with memory: it counts the messages of each context in the instance's key-value
//! bucket (grant `keyValue = true`), so the count carries across turns, restarts and, on
//! PostgreSQL, nodes.

use a2a_agent::{Agent, Outcome, Turn, keyvalue};

struct Counter;

/// The context's count after this message.
fn count(context: &str) -> Result<u64, String> {
    let bucket = keyvalue::open("counts").map_err(|e| format!("no bucket: {e:?}"))?;
    let seen = bucket
        .get(context)
        .map_err(|e| format!("cannot read the count: {e:?}"))?
        .and_then(|v| <[u8; 8]>::try_from(v).ok())
        .map_or(0, u64::from_le_bytes);
    let now = seen + 1;
    bucket
        .set(context, &now.to_le_bytes())
        .map_err(|e| format!("cannot keep the count: {e:?}"))?;
    Ok(now)
}

impl Agent for Counter {
    fn run(turn: Turn) -> Outcome {
        match count(&turn.context_id)
            .and_then(|n| a2a_agent::say(&format!("message {n}: {}", turn.text)))
        {
            Ok(()) => Outcome::Completed,
            Err(e) => Outcome::Failed(e),
        }
    }
}

a2a_agent::export_agent!(Counter);
