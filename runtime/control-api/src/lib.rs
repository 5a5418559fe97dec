//! The control API's actions (docs/control.md "Control API › Actions") as typed values, shared by the server (which parses
//! bodies) and the CLI (which writes them). A wrong type, a missing field or an unknown one is a
//! message naming the field, never a crash. Pure (serde only), so the parser is fuzzed and
//! property-tested on its own.

mod fields;

pub use fields::{
    Bounded, Flag, Names, Object, Refusal, Str, Text, auth_change, check_secret_name, secret_name,
    type_name,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Declares the actions: the enum, its wire names and the parser that dispatches on them.
macro_rules! actions {
    ($($wire:literal => $variant:ident($fields:ident),)+) => {
        /// One control action, as `{"action": "<name>", …fields}`.
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(tag = "action")]
        pub enum Action {
            $(
                #[doc = concat!("`", $wire, "`")]
                #[serde(rename = $wire)]
                $variant($fields),
            )+
        }

        impl Action {
            /// Every action's name, as bodies spell it.
            pub const NAMES: &[&str] = &[$($wire),+];

            /// The action's name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Action::$variant(_) => $wire,)+
                }
            }

            fn read(name: &str, fields: Value) -> Option<Result<Action, serde_path_to_error::Error<serde_json::Error>>> {
                Some(match name {
                    $($wire => serde_path_to_error::deserialize(fields).map(Action::$variant),)+
                    _ => return None,
                })
            }
        }
    };
}

actions! {
    "inbound.create" => InboundCreate(InboundCreate),
    "inbound.update" => InboundUpdate(InboundUpdate),
    "inbound.remove" => InboundRemove(Id),
    "inbound.enable" => InboundEnable(Id),
    "inbound.disable" => InboundDisable(Id),
    "inbound.setAuth" => InboundSetAuth(InboundSetAuth),
    "inbound.setOidc" => InboundSetOidc(InboundSetOidc),
    "inbound.setMtls" => InboundSetMtls(InboundSetMtls),
    "inbound.keys.create" => InboundKeysCreate(KeyCreate),
    "inbound.keys.list" => InboundKeysList(Id),
    "inbound.keys.revoke" => InboundKeysRevoke(KeyRevoke),
    "inbound.sendTest" => InboundSendTest(SendTest),
    "inbound.close" => InboundClose(Id),
    "task.cancel" => TaskCancel(Id),
    "session.cancel" => SessionCancel(Session),
    "session.close" => SessionClose(Session),
    "component.reload" => ComponentReload(Component),
    "outbound.create" => OutboundCreate(OutboundCreate),
    "outbound.update" => OutboundUpdate(OutboundUpdate),
    "outbound.remove" => OutboundRemove(Id),
    "outbound.enable" => OutboundEnable(Id),
    "outbound.disable" => OutboundDisable(Id),
    "outbound.refresh" => OutboundRefresh(Id),
    "outbound.setAuth" => OutboundSetAuth(OutboundSetAuth),
    "outbound.setOAuth" => OutboundSetOAuth(OutboundSetOAuth),
    "outbound.discover" => OutboundDiscover(Discover),
    "outbound.call" => OutboundCall(Call),
}

/// An action on one record.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Id {
    /// The record's id.
    pub id: Text,
}

/// Declares the optional fields a create and an update share (`$shared`, plain), and the two
/// action structs: each its own fields, then the shared ones, with `new` to make one of its own
/// fields and the shared ones, and `settings()` to read those.
macro_rules! shared_fields {
    ($(#[$smeta:meta])* $shared:ident $fields:tt $($(#[$meta:meta])* $name:ident $own:tt)+) => {
        shared_fields!(@settings $(#[$smeta])* $shared $fields);
        $(shared_fields!(@action $shared $fields $(#[$meta])* $name $own);)+
    };
    (@settings $(#[$smeta:meta])* $shared:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$smeta])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $shared {
            $($(#[$fmeta])* pub $field: Option<$ty>,)*
        }
    };
    (
        @action $shared:ident { $($(#[$fmeta:meta])* $field:ident: $ty:ty,)* }
        $(#[$meta:meta])* $name:ident { $($(#[$ometa:meta])* pub $ofield:ident: $oty:ty,)* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            $($(#[$ometa])* pub $ofield: $oty,)*
            $(
                $(#[$fmeta])*
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<$ty>,
            )*
        }

        impl $name {
            /// The action of its own fields and the shared ones.
            pub fn new($($ofield: $oty,)* settings: $shared) -> $name {
                $name { $($ofield,)* $($field: settings.$field,)* }
            }

            /// The fields create and update share.
            pub fn settings(&self) -> $shared {
                $shared { $($field: self.$field.clone(),)* }
            }
        }
    };
}

shared_fields! {
    /// The optional fields `inbound.create` and `inbound.update` share.
    InboundSettings {
        /// JSON-RPC endpoint path.
        endpoint_path: Text,
        /// Session preset.
        preset: Text,
        /// The secret holding the bearer token.
        auth_token_env: Text,
        /// Component name.
        component: Text,
        /// Largest request body (also settable in `limits`).
        max_body_bytes: Bounded<1024, { 64 << 20 }>,
        /// Limits to change (the others keep their values).
        limits: Object,
        /// Serve push notifications (default true).
        push_notifications: Flag,
        /// Serve A2A 0.3 callers too (default true; docs/protocol.md "A2A 0.3").
        compat03: Flag,
        /// Run requests on kept instances of a third-party component (default false; the
        /// built-in component's are always kept;
        /// docs/serving.md "Writing and swapping a component").
        reuse_instances: Flag,
    }
    /// `inbound.create`.
    InboundCreate {
        /// Agent name.
        pub name: Text,
        /// Agent description.
        pub description: Text,
        /// Agent version.
        pub version: Text,
        /// Whether it serves at once (default true).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub enabled: Option<Flag>,
        /// The id (default `<slug(name)>-<8 hex>`): 1-64 letters, digits, `-` or `_`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub id: Option<Text>,
        /// Create it although another instance has the same name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub allow_duplicate_name: Option<Flag>,
    }
    /// `inbound.update` (never `enabled`: that is `inbound.enable` / `inbound.disable`).
    InboundUpdate {
        /// The instance.
        pub id: Text,
        /// New agent name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<Text>,
        /// New agent description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub description: Option<Text>,
        /// New agent version.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub version: Option<Text>,
    }
}

/// `inbound.setAuth`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboundSetAuth {
    /// The instance.
    pub id: Text,
    /// The new token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Str>,
    /// Remove the token instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear: Option<Flag>,
    /// Accept a token shorter than 16 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_weak: Option<Flag>,
}

/// `inbound.setOidc`: OpenID Connect bearer tokens on an instance (docs/auth.md "Authentication"),
/// or none with `clear`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboundSetOidc {
    /// The instance.
    pub id: Text,
    /// The issuer (required unless `clear`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<Text>,
    /// The audience tokens must name (required unless `clear`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Text>,
    /// The key set's URL (default: from the issuer's discovery document).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<Text>,
    /// The algorithms accepted (default `RS256`, `ES256`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithms: Option<Names>,
    /// The scopes every token must grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Names>,
    /// The claim naming the principal (default `sub`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_claim: Option<Text>,
    /// Remove the scheme instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear: Option<Flag>,
    /// With `clear`: remove the instance's last credential although it then takes calls from
    /// anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<Flag>,
}

/// `inbound.keys.create`: a named client with its own API key.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyCreate {
    /// The instance.
    pub id: Text,
    /// The client's name.
    pub name: Text,
    /// The skills it may call (default: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<Names>,
    /// Its own sustained requests per second (default: the instance's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_second: Option<Bounded<1, 1_000_000>>,
}

/// `inbound.keys.revoke`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyRevoke {
    /// The instance.
    pub id: Text,
    /// The client's name.
    pub name: Text,
    /// Revoke the instance's last credential although it then takes calls from anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<Flag>,
}

/// `inbound.sendTest`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SendTest {
    /// The instance.
    pub id: Text,
    /// The message text.
    pub text: Text,
    /// Continue this context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<Text>,
    /// Run this skill.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<Text>,
}

/// `session.cancel` / `session.close`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Session {
    /// The context id.
    pub id: Text,
    /// Only on this instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_id: Option<Text>,
}

/// `component.reload`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Component {
    /// The component's name.
    pub name: Text,
}

shared_fields! {
    /// The optional fields `outbound.create` and `outbound.update` share.
    OutboundSettings {
        /// Only sessions of this preset see its tools.
        preset: Text,
        /// Longest a remote call may take, ms.
        timeout_ms: Bounded<100, 3_600_000>,
        /// Skills that register no tool.
        disabled_skills: Names,
        /// Tool name/description overrides by skill id.
        skill_overrides: Object,
        /// Let endpoints the remote card announces reach internal addresses.
        allow_private: Flag,
    }
    /// `outbound.create`.
    OutboundCreate {
        /// Name (tools are named after it).
        pub name: Text,
        /// The remote AgentCard URL.
        pub agent_card_url: Text,
        /// The secret holding the bearer token sent to the remote.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub bearer_token_env: Option<Text>,
        /// Connect at once (default true).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub enabled: Option<Flag>,
    }
    /// `outbound.update` (never the card URL: a present `agentCardUrl` is refused).
    OutboundUpdate {
        /// The connection.
        pub id: Text,
        /// New name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub name: Option<Text>,
        /// Refused when present (remove and create the connection instead).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub agent_card_url: Option<Value>,
    }
}

/// `inbound.setMtls`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboundSetMtls {
    /// The instance.
    pub id: Text,
    /// `subject` (the common name, default) or `san` (the first alternative name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal_from: Option<Text>,
    /// Remove the scheme instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear: Option<Flag>,
    /// With `clear`: remove the instance's last credential although it then takes calls from
    /// anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open: Option<Flag>,
}

/// `outbound.setAuth`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutboundSetAuth {
    /// The connection.
    pub id: Text,
    /// The new token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Str>,
    /// Remove the token instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear: Option<Flag>,
}

/// `outbound.setOAuth`: OAuth 2.0 client credentials instead of a static token.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutboundSetOAuth {
    /// The connection.
    pub id: Text,
    /// The token endpoint (required unless `clear`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<Text>,
    /// The client id (required unless `clear`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<Text>,
    /// The client secret, stored as `A2A_OUTBOUND_<ID>_CLIENT_SECRET` (or `clientSecretEnv`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Str>,
    /// The name of a secret already set (credentials file or environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<Text>,
    /// The scopes asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes: Option<Names>,
    /// Remove the client instead (the connection then sends no token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clear: Option<Flag>,
}

/// `outbound.discover`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Discover {
    /// The remote AgentCard URL.
    pub agent_card_url: Text,
    /// A bearer token for the remote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<Str>,
    /// Let the card's endpoints reach internal addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_private: Option<Flag>,
}

/// `outbound.call`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Call {
    /// The connection.
    pub id: Text,
    /// The remote skill.
    pub skill: Text,
    /// What to ask.
    pub prompt: Text,
    /// Continue this remote task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<Text>,
    /// The remote context (default: the control API's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<Text>,
}

impl Action {
    /// The action as a request body.
    pub fn to_body(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(body)) => body,
            _ => unreachable!("an action serialises to an object"),
        }
    }
}

/// The action a body names, with its fields read; a refusal names the action, the field and
/// what is wrong with it.
pub fn parse(body: &Map<String, Value>) -> Result<Action, Refusal> {
    let name = match body.get("action") {
        None | Some(Value::Null) => return Err("missing field \"action\"".into()),
        Some(Value::String(s)) => s.as_str(),
        Some(v) => {
            return Err(format!(
                "field \"action\" must be a string, not {}",
                type_name(v)
            ));
        }
    };
    let mut fields = body.clone();
    fields.remove("action");
    let shown: String = name.chars().take(64).collect();
    match Action::read(name, Value::Object(fields)) {
        Some(Ok(action)) => Ok(action),
        Some(Err(e)) => Err(refusal(&shown, &e)),
        None => Err(format!(
            "unknown action {shown:?}; known actions: {}",
            Action::NAMES.join(", ")
        )),
    }
}

/// A field error in words: `missing field "x"`, `<action> has no field "x"; its fields are …`,
/// or `field "x" <what is wrong>`.
fn refusal(action: &str, e: &serde_path_to_error::Error<serde_json::Error>) -> Refusal {
    let message = e.inner().to_string();
    if let Some(rest) = message.strip_prefix("missing field `") {
        return format!("missing field \"{}\"", rest.trim_end_matches('`'));
    }
    if let Some(rest) = message.strip_prefix("unknown field `") {
        let (field, expected) = rest.split_once('`').unwrap_or((rest, ""));
        let shown: String = field.chars().take(64).collect();
        let known = expected
            .trim_start_matches(", expected ")
            .trim_start_matches("one of ")
            .replace('`', "");
        return format!("{action} has no field {shown:?}; its fields are {known}");
    }
    format!("field \"{}\" {message}", e.path())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn refused(v: Value) -> String {
        parse(v.as_object().unwrap()).unwrap_err()
    }

    #[test]
    fn refusals_name_the_action_and_the_field() {
        let create =
            json!({"action": "inbound.create", "name": "n", "description": "d", "version": "1"});
        let with = |k: &str, v: Value| {
            let mut b = create.clone();
            b[k] = v;
            b
        };
        assert!(matches!(
            parse(create.as_object().unwrap()),
            Ok(Action::InboundCreate(_))
        ));
        assert_eq!(
            refused(json!({"action": "inbound.create", "description": "d", "version": "1"})),
            "missing field \"name\""
        );
        assert_eq!(
            refused(with("name", json!(7))),
            "field \"name\" must be a string, not a number"
        );
        assert_eq!(
            refused(with("name", json!(" "))),
            "field \"name\" must not be empty"
        );
        assert_eq!(
            refused(with("enabled", json!("yes"))),
            "field \"enabled\" must be a boolean, not a string"
        );
        assert_eq!(
            refused(with("maxBodyBytes", json!(10))),
            "field \"maxBodyBytes\" must be a whole number from 1024 to 67108864, not 10"
        );
        let colour = refused(with("colour", json!("red")));
        assert!(
            colour.starts_with(
                "inbound.create has no field \"colour\"; its fields are name, description, version"
            ),
            "{colour}"
        );
        assert!(
            refused(json!({"action": "inbound.update", "id": "x", "enabled": false}))
                .contains("has no field \"enabled\"")
        );
        assert!(
            refused(json!({"action": "inbound.explode"}))
                .starts_with("unknown action \"inbound.explode\"; known actions: inbound.create,")
        );
        assert_eq!(
            refused(json!({"action": 5})),
            "field \"action\" must be a string, not a number"
        );
        assert_eq!(
            refused(json!({"action": "task.cancel"})),
            "missing field \"id\""
        );
        assert_eq!(
            refused(json!({"action": "inbound.sendTest", "id": "x"})),
            "missing field \"text\""
        );
        assert_eq!(
            refused(json!({"action": "session.cancel", "id": "c", "serverId": 3})),
            "field \"serverId\" must be a string, not a number"
        );
        assert_eq!(
            refused(
                json!({"action": "outbound.create", "name": "n", "agentCardUrl": "u", "disabledSkills": [1]})
            ),
            "field \"disabledSkills\" must be a list of strings"
        );
    }

    #[test]
    fn null_is_absent_for_optional_fields() {
        let a = parse(
            json!({"action": "inbound.update", "id": "x", "name": null})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        let Action::InboundUpdate(u) = a else {
            panic!()
        };
        assert_eq!(u.name, None);
    }

    #[test]
    fn every_name_reaches_its_action() {
        for name in Action::NAMES {
            let e = refused(json!({"action": name, "zzz": 1}));
            assert!(!e.starts_with("unknown action"), "{name}: {e}");
        }
        let a = parse(
            json!({"action": "outbound.refresh", "id": "c"})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            (a.name(), a.to_body()),
            (
                "outbound.refresh",
                json!({"action": "outbound.refresh", "id": "c"})
                    .as_object()
                    .unwrap()
                    .clone()
            )
        );
    }

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
                prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect()))
            ]
        })
    }

    fn field_name() -> impl Strategy<Value = String> {
        let known = [
            "id",
            "name",
            "description",
            "version",
            "enabled",
            "endpointPath",
            "preset",
            "authTokenEnv",
            "component",
            "maxBodyBytes",
            "limits",
            "token",
            "clear",
        ];
        prop_oneof![
            prop::sample::select(known.map(str::to_owned).to_vec()),
            "[a-zA-Z]{1,10}"
        ]
    }

    proptest! {
        /// Any body is parsed or refused with a message; what parses, written back as the CLI
        /// writes it, parses to the same action.
        #[test]
        fn any_action_body_is_parsed_or_refused_in_words(action in prop_oneof![prop::sample::select(Action::NAMES.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()), "\\PC{0,80}"], fields in prop::collection::btree_map(field_name(), value(), 0..6)) {
            let mut body: Map<String, Value> = fields.into_iter().collect();
            body.insert("action".into(), Value::from(action));
            match parse(&body) {
                Ok(a) => {
                    prop_assert!(Action::NAMES.contains(&a.name()));
                    prop_assert_eq!(parse(&a.to_body()), Ok(a));
                }
                Err(m) => prop_assert!(!m.is_empty() && m.len() < 2000),
            }
        }
    }
}
