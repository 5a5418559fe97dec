//! The control API's actions (SPEC §2.2): which exist, which fields each takes, and typed reading
//! of those fields. A wrong type or a missing field is a message naming the field, never a
//! crash. Pure (serde_json only), so the parser is fuzzed and property-tested on its own.

mod fields;

pub use fields::{Fields, Refusal, check_secret_name, secret_name};
use serde_json::{Map, Value};

/// Fields each action accepts, besides `action`.
pub const ACTIONS: &[(&str, &[&str])] = &[
    ("inbound.create", &["name", "description", "version", "endpointPath", "preset", "authTokenEnv", "enabled", "component", "maxBodyBytes", "limits"]),
    ("inbound.update", &["id", "name", "description", "version", "endpointPath", "preset", "authTokenEnv", "component", "maxBodyBytes", "limits"]),
    ("inbound.remove", &["id"]),
    ("inbound.enable", &["id"]),
    ("inbound.disable", &["id"]),
    ("inbound.setAuth", &["id", "token", "clear", "allowWeak"]),
    ("inbound.sendTest", &["id", "text", "contextId", "skill"]),
    ("inbound.close", &["id"]),
    ("task.cancel", &["id"]),
    ("session.cancel", &["id", "serverId"]),
    ("session.close", &["id", "serverId"]),
    ("component.reload", &["name"]),
    ("outbound.create", &["name", "agentCardUrl", "bearerTokenEnv", "preset", "enabled", "timeoutMs", "disabledSkills", "skillOverrides", "allowPrivate"]),
    ("outbound.update", &["id", "name", "preset", "timeoutMs", "disabledSkills", "skillOverrides", "agentCardUrl", "allowPrivate"]),
    ("outbound.remove", &["id"]),
    ("outbound.enable", &["id"]),
    ("outbound.disable", &["id"]),
    ("outbound.refresh", &["id"]),
    ("outbound.setAuth", &["id", "token", "clear"]),
    ("outbound.discover", &["agentCardUrl", "token", "allowPrivate"]),
    ("outbound.call", &["id", "skill", "prompt", "taskId", "contextId"]),
];

/// The action a body names, once its name and field names are checked against [`ACTIONS`].
pub fn parse(body: &Map<String, Value>) -> Result<&'static str, Refusal> {
    let action = Fields(body).str("action")?;
    let Some((name, known)) = ACTIONS.iter().find(|(name, _)| *name == action) else {
        let names: Vec<&str> = ACTIONS.iter().map(|(n, _)| *n).collect();
        let shown: String = action.chars().take(64).collect();
        return Err(format!("unknown action {shown:?}; known actions: {}", names.join(", ")));
    };
    if let Some(extra) = body.keys().find(|k| *k != "action" && !known.contains(&k.as_str())) {
        let shown: String = extra.chars().take(64).collect();
        return Err(format!("{action} has no field {shown:?}; its fields are {}", known.join(", ")));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "\\PC{0,20}".prop_map(Value::from)
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect()))
            ]
        })
    }

    fn field_name() -> impl Strategy<Value = String> {
        let known: Vec<String> = ACTIONS.iter().flat_map(|(_, f)| f.iter().map(|s| (*s).to_owned())).collect();
        prop_oneof![prop::sample::select(known), "[a-zA-Z]{1,10}"]
    }

    proptest! {
        /// Any body is parsed or refused with a message; no field reading panics.
        #[test]
        fn any_action_body_is_parsed_or_refused_in_words(action in prop_oneof![prop::sample::select(ACTIONS.iter().map(|(n, _)| (*n).to_owned()).collect::<Vec<_>>()), "\\PC{0,80}"], fields in prop::collection::btree_map(field_name(), value(), 0..6)) {
            let mut body: Map<String, Value> = fields.into_iter().collect();
            body.insert("action".into(), Value::from(action));
            match parse(&body) {
                Ok(name) => prop_assert!(ACTIONS.iter().any(|(n, _)| *n == name)),
                Err(m) => prop_assert!(!m.is_empty() && m.len() < 2000),
            }
            let f = Fields(&body);
            for k in body.keys() {
                let _ = (f.opt_str(k), f.str(k), f.opt_bool(k), f.opt_u64(k, 0..=100), f.opt_object(k), f.opt_nonempty(k));
            }
            let _ = f.auth_change(16);
        }
    }
}
