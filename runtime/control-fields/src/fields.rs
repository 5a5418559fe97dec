//! Typed reading of an action's fields.

use serde_json::{Map, Value};

/// The fields of one action body.
pub struct Fields<'a>(pub &'a Map<String, Value>);

/// What a failed read says (answered as 409).
pub type Refusal = String;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Fields<'a> {
    /// Whether the field is present (and not null).
    pub fn has(&self, name: &str) -> bool {
        self.0.get(name).is_some_and(|v| !v.is_null())
    }

    /// An optional string (absent or null = none).
    pub fn opt_str(&self, name: &str) -> Result<Option<&'a str>, Refusal> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!("field \"{name}\" must be a string, not {}", type_name(v))),
        }
    }

    /// A required, non-empty string.
    pub fn str(&self, name: &str) -> Result<&'a str, Refusal> {
        match self.opt_str(name)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => Err(format!("field \"{name}\" must not be empty")),
            None => Err(format!("missing field \"{name}\"")),
        }
    }

    /// An optional non-empty string: present but blank is refused.
    pub fn opt_nonempty(&self, name: &str) -> Result<Option<&'a str>, Refusal> {
        if self.has(name) { self.str(name).map(Some) } else { Ok(None) }
    }

    /// An optional boolean.
    pub fn opt_bool(&self, name: &str) -> Result<Option<bool>, Refusal> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(format!("field \"{name}\" must be a boolean, not {}", type_name(v))),
        }
    }

    /// An optional whole number in `range`.
    pub fn opt_u64(&self, name: &str, range: std::ops::RangeInclusive<u64>) -> Result<Option<u64>, Refusal> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if range.contains(&v) => Ok(Some(v)),
                _ => Err(format!("field \"{name}\" must be a whole number from {} to {}, not {n}", range.start(), range.end())),
            },
            Some(v) => Err(format!("field \"{name}\" must be a number, not {}", type_name(v))),
        }
    }

    /// What a setAuth asks: a `token` to set, or `clear: true`. An empty or blank token is
    /// refused (it would silently remove auth, e.g. from `echo "$UNSET" | …`); so is one shorter
    /// than `min_len` unless `allowWeak: true`. At most 4096 characters, no spaces or control
    /// characters.
    pub fn auth_change(&self, min_len: usize) -> Result<Option<&'a str>, Refusal> {
        let clear = self.opt_bool("clear")?.unwrap_or(false);
        match (self.opt_str("token")?, clear) {
            (Some(_), true) => Err("give either \"token\" or \"clear\": true, not both".into()),
            (None, true) => Ok(None),
            (None, false) => Err("missing field \"token\"; to remove the token send \"clear\": true".into()),
            (Some(t), false) if t.trim().is_empty() => Err("field \"token\" is empty; to remove the token send \"clear\": true".into()),
            (Some(t), false) if t.len() > 4096 || t.chars().any(|c| c.is_whitespace() || c.is_control()) => {
                Err("field \"token\" must be at most 4096 characters without spaces or control characters".into())
            }
            (Some(t), false) if t.chars().count() < min_len && self.opt_bool("allowWeak")? != Some(true) => {
                Err(format!("field \"token\" has {} characters; use at least {min_len} (e.g. `openssl rand -hex 32`), or send \"allowWeak\": true", t.chars().count()))
            }
            (Some(t), false) => Ok(Some(t)),
        }
    }

    /// An optional object.
    pub fn opt_object(&self, name: &str) -> Result<Option<&'a Map<String, Value>>, Refusal> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(v) => Err(format!("field \"{name}\" must be an object, not {}", type_name(v))),
        }
    }
}

/// A secret name: an environment-variable-like identifier.
pub fn secret_name(field: &str, name: &str) -> Result<String, Refusal> {
    check_secret_name(name).map_err(|e| format!("field \"{field}\" {e}"))
}

/// Checks a secret name: an environment-variable-like identifier of at most 128 characters.
pub fn check_secret_name(name: &str) -> Result<String, String> {
    let ok = name.len() <= 128 && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let shown: String = name.chars().take(64).collect();
    if ok { Ok(name.to_owned()) } else { Err(format!("must name a secret like MY_TOKEN (letters, digits, _), not {shown:?}")) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_types_name_the_field() {
        let v = json!({"name": 3, "enabled": "yes", "n": -1, "s": " ", "o": []});
        let f = Fields(v.as_object().unwrap());
        assert_eq!(f.str("name").unwrap_err(), "field \"name\" must be a string, not a number");
        assert_eq!(f.str("missing").unwrap_err(), "missing field \"missing\"");
        assert_eq!(f.str("s").unwrap_err(), "field \"s\" must not be empty");
        assert!(f.opt_bool("enabled").unwrap_err().contains("\"enabled\" must be a boolean"));
        assert!(f.opt_u64("n", 1..=10).unwrap_err().contains("from 1 to 10"));
        assert!(f.opt_object("o").unwrap_err().contains("an array"));
        assert_eq!(f.opt_str("missing").unwrap(), None);
        assert!(secret_name("authTokenEnv", "MY_TOKEN_1").is_ok());
        let auth = |v: serde_json::Value| Fields(v.as_object().unwrap()).auth_change(16).map(|t| t.map(str::to_owned));
        assert_eq!(auth(json!({"token": "0123456789abcdef"})), Ok(Some("0123456789abcdef".into())));
        assert_eq!(auth(json!({"clear": true})), Ok(None));
        assert!(auth(json!({})).unwrap_err().contains("\"clear\": true"));
        assert!(auth(json!({"token": ""})).unwrap_err().contains("is empty"));
        assert!(auth(json!({"token": "   "})).unwrap_err().contains("is empty"));
        assert!(auth(json!({"token": "short"})).unwrap_err().contains("at least 16"));
        assert_eq!(auth(json!({"token": "short", "allowWeak": true})), Ok(Some("short".into())));
        assert!(auth(json!({"token": "0123456789abcdef", "clear": true})).unwrap_err().contains("not both"));
        assert!(secret_name("authTokenEnv", "1BAD").is_err());
        assert!(secret_name("authTokenEnv", "a b").is_err());
    }
}
