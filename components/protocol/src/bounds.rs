//! Size bounds on what callers and operators send: ids, names, descriptions, lists. Every input
//! that is stored, copied or echoed has one, so no single request grows the work it causes
//! without limit.

/// Longest id (messageId, taskId, contextId, skill id, page token), in characters.
pub const MAX_ID_CHARS: usize = 256;
/// Longest agent, connection or skill name.
pub const MAX_NAME_CHARS: usize = 200;
/// Longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 4096;
/// Longest version string.
pub const MAX_VERSION_CHARS: usize = 64;
/// Default most parts in one message (`limits.maxParts`).
pub const DEFAULT_MAX_PARTS: u32 = 1000;
/// Most `referenceTaskIds` or `extensions` of one message.
pub const MAX_LIST_ITEMS: usize = 64;
/// Most skills one preset announces.
pub const MAX_SKILLS: usize = 64;

/// Deepest nesting of a request's params (objects and arrays), on every binding: JSON-RPC,
/// HTTP+JSON and gRPC, whose protobuf decoder stops at 100 nested messages (about 33 levels of
/// `Struct` metadata: a level is a `Struct`, its map entry and a `Value`), so this bound is what
/// every binding answers first.
pub const MAX_DEPTH: usize = 32;

/// Refuses `value` nesting objects and arrays deeper than [`MAX_DEPTH`], naming `field`.
pub fn check_depth(field: &str, value: &serde_json::Value) -> Result<(), String> {
    let mut open = vec![(value, 1usize)];
    while let Some((v, depth)) = open.pop() {
        let inner: Box<dyn Iterator<Item = &serde_json::Value>> = match v {
            serde_json::Value::Object(o) => Box::new(o.values()),
            serde_json::Value::Array(a) => Box::new(a.iter()),
            _ => continue,
        };
        if depth > MAX_DEPTH {
            return Err(format!(
                "{field} nests more than {MAX_DEPTH} levels of objects and arrays; the most is {MAX_DEPTH}"
            ));
        }
        open.extend(inner.map(|i| (i, depth + 1)));
    }
    Ok(())
}

/// Refuses `value` longer than `max` characters, naming `field`.
pub fn check(field: &str, value: &str, max: usize) -> Result<(), String> {
    let n = value.chars().count();
    if n > max {
        Err(format!("{field} is {n} characters long; the most is {max}"))
    } else {
        Ok(())
    }
}

/// [`check`] with [`MAX_ID_CHARS`].
pub fn check_id(field: &str, value: &str) -> Result<(), String> {
    check(field, value, MAX_ID_CHARS)
}

impl crate::Message {
    /// Checks the message's ids, list lengths and part count (at most `max_parts`).
    pub fn check_bounds(&self, max_parts: u32) -> Result<(), String> {
        check_id("message.messageId", &self.message_id)?;
        for (field, v) in [
            ("message.contextId", &self.context_id),
            ("message.taskId", &self.task_id),
        ] {
            if let Some(v) = v {
                check_id(field, v)?;
            }
        }
        if let Some(skill) = self.skill() {
            check_id("message.metadata.skill", skill)?;
        }
        if self.parts.len() > max_parts as usize {
            return Err(format!(
                "message.parts has {} parts; this agent takes at most {max_parts}",
                self.parts.len()
            ));
        }
        for (field, list) in [
            ("message.referenceTaskIds", &self.reference_task_ids),
            ("message.extensions", &self.extensions),
        ] {
            if list.len() > MAX_LIST_ITEMS {
                return Err(format!(
                    "{field} has {} entries; the most is {MAX_LIST_ITEMS}",
                    list.len()
                ));
            }
            for v in list {
                check(field, v, 2048)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, Part};

    /// `depth` levels of objects (and arrays, every other level), a scalar at the bottom.
    fn nested(depth: usize) -> serde_json::Value {
        (1..depth).fold(serde_json::json!({"leaf": 1}), |v, n| {
            if n % 2 == 0 {
                serde_json::json!([v])
            } else {
                serde_json::json!({ "k": v })
            }
        })
    }

    #[test]
    fn nesting_is_bounded_at_max_depth() {
        assert!(check_depth("params", &nested(MAX_DEPTH)).is_ok());
        assert!(check_depth("params", &serde_json::json!("flat")).is_ok());
        assert!(check_depth("params", &serde_json::json!({})).is_ok());
        let e = check_depth("params", &nested(MAX_DEPTH + 1)).unwrap_err();
        assert!(e.contains("params") && e.contains("32"), "{e}");
        // Wide is not deep.
        let wide = serde_json::Value::Array(vec![nested(MAX_DEPTH - 1); 1000]);
        assert!(check_depth("params", &wide).is_ok());
    }

    #[test]
    fn long_ids_and_too_many_parts_are_refused() {
        let m = Message {
            parts: vec![Part::text("x"); 3],
            ..Message::agent_text("m1".into(), "c1", "t1", "x")
        };
        assert!(m.check_bounds(3).is_ok());
        assert!(m.check_bounds(2).unwrap_err().contains("at most 2"));
        let long = Message {
            message_id: "m".repeat(257),
            ..m.clone()
        };
        assert!(
            long.check_bounds(10)
                .unwrap_err()
                .contains("messageId is 257 characters")
        );
        assert!(
            Message {
                context_id: Some("c".repeat(256)),
                ..m.clone()
            }
            .check_bounds(10)
            .is_ok()
        );
        assert!(
            Message {
                reference_task_ids: vec!["t".into(); 65],
                ..m
            }
            .check_bounds(10)
            .is_err()
        );
        assert!(
            check("name", &"é".repeat(200), MAX_NAME_CHARS).is_ok(),
            "characters, not bytes"
        );
    }
}
