//! The outbound tool contract (docs/outbound.md "Outbound connections"): how a remote skill is named and described as a tool.

use serde_json::{Value, json};

/// Longest tool name.
pub const MAX_NAME: usize = 64;

/// `a2a__<connection>__<skill>`, every character outside `[A-Za-z0-9_-]` as `_`, cut to 64.
pub fn base_name(connection: &str, skill: &str) -> String {
    let raw = format!("a2a__{connection}__{skill}");
    raw.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(MAX_NAME)
        .collect()
}

/// Tool names for a connection's skills, in order: each its [`base_name`]; a name already taken
/// (by an earlier skill) becomes its first 55 characters + `_` + 8 hex of the skill id's hash.
/// (the seed says 56, which makes 65 characters: over the 64 that function-calling APIs accept.)
pub fn names(connection: &str, skills: &[&str]) -> Vec<String> {
    let mut taken: Vec<String> = Vec::with_capacity(skills.len());
    for skill in skills {
        let base = base_name(connection, skill);
        let mut name = base.clone();
        let mut salt = 0u32;
        while taken.contains(&name) {
            let prefix: String = base.chars().take(MAX_NAME - 9).collect();
            name = format!("{prefix}_{:08x}", fnv1a(&format!("{skill}\u{0}{salt}")));
            salt += 1;
        }
        taken.push(name);
    }
    taken
}

/// 32-bit FNV-1a: a short, stable, dependency-free hash for name suffixes.
fn fnv1a(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The JSON Schema of every outbound tool's parameters.
pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "prompt": { "type": "string", "description": "The task or instruction to send to the remote agent." },
            "taskId": { "type": "string", "description": "Optional. Continue an interrupted remote task." },
        },
        "required": ["prompt"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names() {
        assert_eq!(names("remote-1", &["chat"]), ["a2a__remote-1__chat"]);
        assert_eq!(names("远程", &["chat"]), ["a2a______chat"]);
    }

    #[test]
    fn clashes_within_a_connection_get_distinct_names() {
        let n = names("my agent", &["web.search", "web search", "web_search"]);
        assert_eq!(n[0], "a2a__my_agent__web_search");
        assert_ne!(n[1], n[0]);
        assert_ne!(n[2], n[0]);
        assert_ne!(n[1], n[2]);
        for name in &n[1..] {
            assert!(
                name.starts_with("a2a__my_agent__web_search_")
                    && name.len() == "a2a__my_agent__web_search".len() + 9,
                "{name}"
            );
        }
        assert_eq!(
            n,
            names("my agent", &["web.search", "web search", "web_search"]),
            "stable"
        );
    }

    #[test]
    fn long_names_are_cut_to_64_and_clashes_resolved() {
        let conn = "c".repeat(70);
        let n = names(&conn, &["alpha", "beta"]);
        assert!(n.iter().all(|x| x.len() == MAX_NAME), "{n:?}");
        assert_eq!(n[0], base_name(&conn, "alpha"));
        assert_eq!(n[0], format!("a2a__{}", "c".repeat(59)));
        assert_ne!(n[0], n[1]);
        assert!(
            n[1].starts_with(&n[0][..55]) && n[1].as_bytes()[55] == b'_',
            "{}",
            n[1]
        );
        assert!(n[1][56..].chars().all(|c| c.is_ascii_hexdigit()));
        let ok = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        assert!(n.iter().all(|x| ok(x)));
    }

    #[test]
    fn parameters_require_a_prompt() {
        assert_eq!(parameters()["required"], json!(["prompt"]));
        assert!(parameters()["properties"]["taskId"].is_object());
    }
}
