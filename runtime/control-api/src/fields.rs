//! The value types of action fields. Each reads a JSON value and refuses a wrong one with the
//! words that follow the field's name (`must be a string, not a number`); [`crate::parse`] puts
//! the name in front.

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What a refused action says (answered as 409).
pub type Refusal = String;

/// The JSON type of a value, in words.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn refuse<'de, D: Deserializer<'de>, T>(why: String) -> Result<T, D::Error> {
    Err(D::Error::custom(why))
}

/// A string that is not blank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) if !s.trim().is_empty() => Ok(Text(s)),
            Value::String(_) => refuse::<D, _>("must not be empty".into()),
            v => refuse::<D, _>(format!("must be a string, not {}", type_name(&v))),
        }
    }
}

impl Text {
    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Any string, blank ones included.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Str(pub String);

impl<'de> Deserialize<'de> for Str {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) => Ok(Str(s)),
            v => refuse::<D, _>(format!("must be a string, not {}", type_name(&v))),
        }
    }
}

/// A boolean.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Bool(b) => Ok(Flag(b)),
            v => refuse::<D, _>(format!("must be a boolean, not {}", type_name(&v))),
        }
    }
}

/// A whole number from `MIN` to `MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Bounded<const MIN: u64, const MAX: u64>(pub u64);

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => match n.as_u64() {
                Some(v) if (MIN..=MAX).contains(&v) => Ok(Bounded(v)),
                _ => refuse::<D, _>(format!(
                    "must be a whole number from {MIN} to {MAX}, not {n}"
                )),
            },
            v => refuse::<D, _>(format!("must be a number, not {}", type_name(&v))),
        }
    }
}

/// A JSON object, read further by the action (limits, skill overrides).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Object(pub Map<String, Value>);

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::Object(o) => Ok(Object(o)),
            v => refuse::<D, _>(format!("must be an object, not {}", type_name(&v))),
        }
    }
}

/// A list of skill ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Names(pub Vec<String>);

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Value::Array(list) = Value::deserialize(d)? else {
            return refuse::<D, _>("must be a list of skill ids".into());
        };
        let names = list.into_iter().map(|v| match v {
            Value::String(s) => Ok(s),
            _ => Err(D::Error::custom("must be a list of strings")),
        });
        names.collect::<Result<_, _>>().map(Names)
    }
}

/// What a setAuth asks: a `token` to set; no token (as the seed's contract has it) or
/// `clear: true` removes it. An empty or blank token is refused (it would silently remove auth,
/// e.g. from `echo "$UNSET" | …`); so is one shorter than `min_len` unless `allow_weak`. At most
/// 4096 characters, no spaces or control characters.
pub fn auth_change(
    token: Option<&Str>,
    clear: Option<Flag>,
    allow_weak: Option<Flag>,
    min_len: usize,
) -> Result<Option<&str>, Refusal> {
    match (token.map(|t| t.0.as_str()), clear.is_some_and(|c| c.0)) {
        (Some(_), true) => Err("give either \"token\" or \"clear\": true, not both".into()),
        (None, _) => Ok(None),
        (Some(t), false) if t.trim().is_empty() => Err("field \"token\" is empty; to remove the token send \"clear\": true".into()),
        (Some(t), false) if t.len() > 4096 || t.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            Err("field \"token\" must be at most 4096 characters without spaces or control characters".into())
        }
        (Some(t), false) if t.chars().count() < min_len && !allow_weak.is_some_and(|w| w.0) => {
            Err(format!("field \"token\" has {} characters; use at least {min_len} (e.g. `openssl rand -hex 32`), or send \"allowWeak\": true", t.chars().count()))
        }
        (Some(t), false) => Ok(Some(t)),
    }
}

/// A secret name of a field: an environment-variable-like identifier.
pub fn secret_name(field: &str, name: &str) -> Result<String, Refusal> {
    check_secret_name(name).map_err(|e| format!("field \"{field}\" {e}"))
}

/// Checks a secret name: an environment-variable-like identifier of at most 128 characters.
pub fn check_secret_name(name: &str) -> Result<String, String> {
    let ok = name.len() <= 128
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let shown: String = name.chars().take(64).collect();
    if ok {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "must name a secret like MY_TOKEN (letters, digits, _), not {shown:?}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read<T: for<'de> Deserialize<'de>>(v: Value) -> Result<T, String> {
        T::deserialize(v).map_err(|e| e.to_string())
    }

    #[test]
    fn wrong_values_are_refused_in_words() {
        assert_eq!(
            read::<Text>(json!(3)).unwrap_err(),
            "must be a string, not a number"
        );
        assert_eq!(read::<Text>(json!(" ")).unwrap_err(), "must not be empty");
        assert_eq!(read::<Str>(json!(" ")).unwrap(), Str(" ".into()));
        assert_eq!(
            read::<Flag>(json!("yes")).unwrap_err(),
            "must be a boolean, not a string"
        );
        assert_eq!(
            read::<Bounded<1, 10>>(json!(-1)).unwrap_err(),
            "must be a whole number from 1 to 10, not -1"
        );
        assert_eq!(
            read::<Bounded<1, 10>>(json!(2.5)).unwrap_err(),
            "must be a whole number from 1 to 10, not 2.5"
        );
        assert_eq!(read::<Bounded<1, 10>>(json!(10)).unwrap(), Bounded(10));
        assert_eq!(
            read::<Object>(json!([])).unwrap_err(),
            "must be an object, not an array"
        );
        assert_eq!(
            read::<Names>(json!("a")).unwrap_err(),
            "must be a list of skill ids"
        );
        assert_eq!(
            read::<Names>(json!(["a", 1])).unwrap_err(),
            "must be a list of strings"
        );
    }

    #[test]
    fn auth_changes() {
        let t = |s: &str| Some(Str(s.into()));
        let yes = Some(Flag(true));
        assert_eq!(
            auth_change(t("0123456789abcdef").as_ref(), None, None, 16),
            Ok(Some("0123456789abcdef"))
        );
        assert_eq!(auth_change(None, yes, None, 16), Ok(None));
        assert_eq!(
            auth_change(None, None, None, 16),
            Ok(None),
            "an omitted token clears (the seed's contract)"
        );
        assert!(
            auth_change(t("").as_ref(), None, None, 16)
                .unwrap_err()
                .contains("is empty")
        );
        assert!(
            auth_change(t("   ").as_ref(), None, None, 16)
                .unwrap_err()
                .contains("is empty")
        );
        assert!(
            auth_change(t("short").as_ref(), None, None, 16)
                .unwrap_err()
                .contains("at least 16")
        );
        assert_eq!(
            auth_change(t("short").as_ref(), None, yes, 16),
            Ok(Some("short"))
        );
        assert!(
            auth_change(t("0123456789abcdef").as_ref(), yes, None, 16)
                .unwrap_err()
                .contains("not both")
        );
        assert!(
            auth_change(t("a b").as_ref(), None, yes, 1)
                .unwrap_err()
                .contains("without spaces")
        );
    }

    #[test]
    fn secret_names() {
        assert!(secret_name("authTokenEnv", "MY_TOKEN_1").is_ok());
        assert!(
            secret_name("authTokenEnv", "1BAD")
                .unwrap_err()
                .starts_with("field \"authTokenEnv\" must name a secret")
        );
        assert!(secret_name("authTokenEnv", "a b").is_err());
    }
}
