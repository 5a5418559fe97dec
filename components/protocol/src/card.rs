//! The AgentCard (docs/protocol.md "What is served"): a pure function of the instance record and its public endpoint URL.

use serde::Serialize;
use serde_json::{Value, json};

/// One announced skill.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skill {
    /// Id clients put in `metadata.skill`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Tags (at least one; the id when none are configured).
    pub tags: Vec<String>,
}

/// A way callers authenticate, as the card announces it (A2A 1.0 `SecurityScheme`).
#[derive(Clone, Debug, PartialEq)]
pub enum SecurityScheme {
    /// `Authorization: Bearer <token>`.
    Bearer,
    /// An API key in the named request header.
    ApiKey {
        /// The header.
        header: String,
    },
    /// Bearer JWTs from an OpenID Connect issuer.
    OpenIdConnect {
        /// The issuer's discovery document.
        discovery_url: String,
        /// The scopes a token must grant.
        scopes: Vec<String>,
    },
    /// A client certificate the TLS handshake verified.
    MutualTls,
}

impl SecurityScheme {
    /// Its name in `securitySchemes`, its ProtoJSON, and the scopes its requirement lists.
    fn entry(&self) -> (&'static str, Value, &[String]) {
        match self {
            SecurityScheme::Bearer => (
                "bearer",
                json!({ "httpAuthSecurityScheme": { "scheme": "Bearer" } }),
                &[],
            ),
            SecurityScheme::ApiKey { header } => (
                "apiKey",
                json!({ "apiKeySecurityScheme": { "location": "header", "name": header } }),
                &[],
            ),
            SecurityScheme::OpenIdConnect {
                discovery_url,
                scopes,
            } => (
                "oidc",
                json!({ "openIdConnectSecurityScheme": { "openIdConnectUrl": discovery_url } }),
                scopes,
            ),
            SecurityScheme::MutualTls => ("mtls", json!({ "mtlsSecurityScheme": {} }), &[]),
        }
    }
}

/// What the card is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct CardInput {
    /// Agent name.
    pub name: String,
    /// Agent description.
    pub description: String,
    /// Agent version.
    pub version: String,
    /// Public JSON-RPC endpoint URL.
    pub endpoint_url: String,
    /// What gRPC requests name to reach this agent (its instance id): several share the
    /// listener's one gRPC service.
    pub tenant: String,
    /// The gRPC interface's URL, if the card announces one ([`crate::grpc::url`] of the
    /// endpoint, or what the operator set).
    pub grpc_url: Option<String>,
    /// Announced skills (a default `chat` skill when empty).
    pub skills: Vec<Skill>,
    /// How callers authenticate (none: anyone may call).
    pub security: Vec<SecurityScheme>,
    /// `raw` attachments are admitted.
    pub attachments: bool,
    /// Push notifications are served (`capabilities.pushNotifications`).
    pub push_notifications: bool,
    /// Provider organisation, if configured.
    pub provider_organization: Option<String>,
    /// Provider URL, if configured.
    pub provider_url: Option<String>,
    /// A2A 0.3 callers are served: the card carries their fields too.
    pub compat03: bool,
}

/// Media types accepted as attachments when the attachments service is on.
pub const ATTACHMENT_MODES: [&str; 5] = [
    "image/png",
    "image/jpeg",
    "image/webp",
    "image/gif",
    "application/octet-stream",
];

/// The id of the skill an instance announces when its preset configures none.
pub const DEFAULT_SKILL: &str = "chat";

/// The default skill of an instance that configures none.
pub fn default_skill() -> Skill {
    Skill {
        id: DEFAULT_SKILL.into(),
        name: DEFAULT_SKILL.into(),
        description: "Talk with the agent.".into(),
        tags: vec![DEFAULT_SKILL.into()],
    }
}

/// Whether a card answer carries the 0.3 fields beside the 1.0 ones: when the instance serves
/// 0.3 callers and the request's `A2A-Version` names none (0.3 clients send none, §3.6.2) or
/// 0.3. A request naming 1.x (or any other version) gets the clean 1.0 card.
pub fn with_03_fields(compat03: bool, asked: Option<&str>) -> bool {
    compat03
        && asked
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .is_none_or(crate::compat03::is_v03)
}

/// Builds the AgentCard JSON. Never includes a secret: only whether one is required.
pub fn build(input: &CardInput) -> Value {
    let skills: Vec<Skill> = if input.skills.is_empty() {
        vec![default_skill()]
    } else {
        input
            .skills
            .iter()
            .cloned()
            .map(|mut s| {
                if s.tags.is_empty() {
                    s.tags.push(s.id.clone());
                }
                s
            })
            .collect()
    };
    let mut input_modes = vec!["text/plain".to_owned()];
    if input.attachments {
        input_modes.extend(ATTACHMENT_MODES.iter().map(|m| (*m).to_owned()));
    }
    let mut card = json!({
        "name": input.name,
        "description": input.description,
        "version": input.version,
        "capabilities": { "streaming": true, "pushNotifications": input.push_notifications, "extendedAgentCard": !input.security.is_empty() },
        "defaultInputModes": input_modes,
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
        "supportedInterfaces": [
            { "url": input.endpoint_url, "protocolBinding": "JSONRPC", "protocolVersion": crate::version::SUPPORTED },
            { "url": input.endpoint_url, "protocolBinding": "HTTP+JSON", "protocolVersion": crate::version::SUPPORTED },
        ],
    });
    if let Some(url) = &input.grpc_url {
        card["supportedInterfaces"].as_array_mut().expect("built above").push(json!(
            { "url": url, "protocolBinding": "GRPC", "protocolVersion": crate::version::SUPPORTED, "tenant": input.tenant }
        ));
    }
    if input.provider_organization.is_some() || input.provider_url.is_some() {
        card["provider"] = json!({
            "organization": input.provider_organization.clone().unwrap_or_default(),
            "url": input.provider_url.clone().unwrap_or_default(),
        });
    }
    if !input.security.is_empty() {
        let entries: Vec<_> = input.security.iter().map(SecurityScheme::entry).collect();
        // Any one scheme is enough: one requirement each.
        card["securitySchemes"] = entries
            .iter()
            .map(|(name, scheme, _)| (name.to_string(), scheme.clone()))
            .collect();
        card["securityRequirements"] = entries
            .iter()
            .map(|(name, _, scopes)| json!({ "schemes": { *name: { "list": scopes } } }))
            .collect();
    }
    if input.compat03 {
        add_03_fields(&mut card, input);
    }
    card
}

/// The fields an A2A 0.3 client reads, beside the 1.0 ones (what the official Python SDK
/// serves): its version, URL and transports, `supportedInterfaces` entries of version 0.3, each
/// security scheme's 0.3 `type` and members, and the 0.3 `security` list.
fn add_03_fields(card: &mut Value, input: &CardInput) {
    let url = &input.endpoint_url;
    card["protocolVersion"] = json!(crate::compat03::VERSION);
    card["url"] = json!(url);
    card["preferredTransport"] = json!("JSONRPC");
    card["additionalInterfaces"] = json!([
        { "url": url, "transport": "JSONRPC" },
        { "url": url, "transport": "HTTP+JSON" }
    ]);
    card["supportsAuthenticatedExtendedCard"] = json!(!input.security.is_empty());
    if let Some(faces) = card["supportedInterfaces"].as_array_mut() {
        for binding in ["JSONRPC", "HTTP+JSON"] {
            faces.push(json!({ "url": url, "protocolBinding": binding, "protocolVersion": "0.3" }));
        }
    }
    if input.security.is_empty() {
        return;
    }
    let mut security = Vec::new();
    for scheme in &input.security {
        let (name, _, scopes) = scheme.entry();
        let fields = match scheme {
            SecurityScheme::Bearer => json!({ "type": "http", "scheme": "Bearer" }),
            SecurityScheme::ApiKey { header } => {
                json!({ "type": "apiKey", "in": "header", "name": header })
            }
            SecurityScheme::OpenIdConnect { discovery_url, .. } => {
                json!({ "type": "openIdConnect", "openIdConnectUrl": discovery_url })
            }
            SecurityScheme::MutualTls => json!({ "type": "mutualTLS" }),
        };
        if let (Some(entry), Some(fields)) = (
            card["securitySchemes"][name].as_object_mut(),
            fields.as_object(),
        ) {
            entry.extend(fields.clone());
        }
        security.push(json!({ name: scopes }));
    }
    card["security"] = json!(security);
}

/// The members an A2A 1.0 AgentCard must have.
const REQUIRED: [&str; 8] = [
    "name",
    "description",
    "version",
    "supportedInterfaces",
    "capabilities",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
];

/// One check of a card: what it asks, whether the card passes, and a detail.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// What is checked.
    pub label: String,
    /// Whether the card passes.
    pub ok: bool,
    /// What was found (empty when nothing more is to say).
    pub detail: String,
}

/// What a card needs for A2A 1.0 clients to use it, checked from the card alone (the panel's
/// card view and `a2a-edge card` show these): the required members, a 1.0 interface (0.3 ones
/// beside it are for 0.3 clients), complete skills, and security requirements that name
/// declared schemes.
pub fn checks(card: &Value) -> Vec<Check> {
    let check = |label: String, ok: bool, detail: String| Check { label, ok, detail };
    let mut out: Vec<Check> = REQUIRED
        .iter()
        .map(|k| {
            let v = &card[*k];
            let ok = match v {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                Value::Array(a) => !a.is_empty() || *k == "skills",
                _ => true,
            };
            let detail = if ok { "" } else { "missing" };
            check(format!("has {k}"), ok, detail.into())
        })
        .collect();
    let faces = card["supportedInterfaces"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let version = |i: &Value| i["protocolVersion"].as_str().unwrap_or("").to_owned();
    let speaks_1_0 = faces.iter().any(|i| version(i).starts_with("1."))
        && faces.iter().all(|i| {
            let v = version(i);
            v.starts_with("1.") || crate::compat03::is_v03(&v)
        });
    let listed: Vec<String> = faces
        .iter()
        .map(|i| {
            format!(
                "{} {}",
                i["protocolBinding"].as_str().unwrap_or("?"),
                version(i)
            )
        })
        .collect();
    out.push(check(
        "speaks A2A 1.0 (0.3 interfaces beside it are for 0.3 clients)".into(),
        speaks_1_0,
        listed.join(", "),
    ));
    let skills = card["skills"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let complete = skills.iter().all(|s| {
        ["id", "name", "description"]
            .iter()
            .all(|k| s[*k].as_str().is_some_and(|v| !v.is_empty()))
            && s["tags"].is_array()
    });
    out.push(check(
        "every skill has id, name, description and tags".into(),
        complete,
        String::new(),
    ));
    let declared: Vec<&str> = card["securitySchemes"]
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let named = card["securityRequirements"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .all(|r| {
            r["schemes"]
                .as_object()
                .is_none_or(|o| o.keys().all(|k| declared.contains(&k.as_str())))
        });
    let detail = if declared.is_empty() {
        "no auth".into()
    } else {
        declared.join(", ")
    };
    out.push(check(
        "security requirements name declared schemes".into(),
        named,
        detail,
    ));
    out
}

/// `GetExtendedAgentCard`: A2A 1.0.1 §13.3 says it MUST require authentication, so only an
/// instance that takes credentials (the host has checked them) has one; the others answer
/// EXTENDED_AGENT_CARD_NOT_CONFIGURED.
pub fn extended(input: &CardInput) -> Result<Value, crate::RpcError> {
    if input.security.is_empty() {
        let why = "this agent has no extended card: it takes no token, and GetExtendedAgentCard requires authentication";
        return Err(crate::RpcError::new(
            crate::ErrorKind::ExtendedAgentCardNotConfigured,
            why,
        ));
    }
    Ok(build(input))
}

/// The skill a message runs: its `metadata.skill` when the instance announces it, else the
/// first announced skill (`chat` when none is configured); standard clients never send
/// `metadata.skill`. The error lists what the instance announces.
pub fn select_skill<'a>(
    requested: Option<&'a str>,
    announced: &'a [String],
) -> Result<&'a str, String> {
    let list = if announced.is_empty() {
        DEFAULT_SKILL.to_owned()
    } else {
        announced.join(", ")
    };
    match requested {
        None => Ok(announced.first().map_or(DEFAULT_SKILL, String::as_str)),
        Some(s)
            if announced.iter().any(|a| a == s) || (announced.is_empty() && s == DEFAULT_SKILL) =>
        {
            Ok(s)
        }
        Some(s) => Err(format!("unknown skill {s:?}: this agent announces {list}")),
    }
}

/// A strong ETag for a serialised card (FNV-1a 64 of the bytes).
pub fn etag(body: &[u8]) -> String {
    let hash = body.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("\"{hash:016x}\"")
}

/// Whether an `If-None-Match` header value matches `etag` (a list, weak forms and `*` included).
pub fn etag_matches(if_none_match: &str, etag: &str) -> bool {
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/") == etag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input() -> CardInput {
        CardInput {
            name: "reports".into(),
            description: "Reporting agent".into(),
            version: "0.1.0".into(),
            endpoint_url: "http://127.0.0.1:3080/a2a/reports-1a2b3c4d".into(),
            tenant: "reports-1a2b3c4d".into(),
            grpc_url: Some("http://127.0.0.1:3080".into()),
            skills: vec![],
            security: Vec::new(),
            attachments: false,
            push_notifications: false,
            provider_organization: None,
            provider_url: None,
            compat03: false,
        }
    }

    #[test]
    fn plain_card_matches_spec_shape() {
        let c = build(&input());
        assert_eq!(
            c,
            json!({
                "name": "reports", "description": "Reporting agent", "version": "0.1.0",
                "capabilities": { "streaming": true, "pushNotifications": false, "extendedAgentCard": false },
                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                "skills": [{ "id": "chat", "name": "chat", "description": "Talk with the agent.", "tags": ["chat"] }],
                "supportedInterfaces": [
                    { "url": "http://127.0.0.1:3080/a2a/reports-1a2b3c4d", "protocolBinding": "JSONRPC", "protocolVersion": "1.0" },
                    { "url": "http://127.0.0.1:3080/a2a/reports-1a2b3c4d", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0" },
                    { "url": "http://127.0.0.1:3080", "protocolBinding": "GRPC", "protocolVersion": "1.0", "tenant": "reports-1a2b3c4d" }
                ]
            })
        );
    }

    #[test]
    fn grpc_is_announced_only_with_its_url() {
        let without = build(&CardInput {
            grpc_url: None,
            ..input()
        });
        let bindings: Vec<&str> = without["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["protocolBinding"].as_str().unwrap())
            .collect();
        assert_eq!(bindings, ["JSONRPC", "HTTP+JSON"]);
    }

    #[test]
    fn our_cards_pass_every_check_and_a_broken_one_fails_what_it_breaks() {
        let security = vec![SecurityScheme::Bearer];
        for compat03 in [false, true] {
            let card = build(&CardInput {
                compat03,
                security: security.clone(),
                ..input()
            });
            let failed: Vec<Check> = checks(&card).into_iter().filter(|c| !c.ok).collect();
            assert!(failed.is_empty(), "compat03 {compat03}: {failed:?}");
        }
        let mut broken = build(&input());
        broken["description"] = json!("");
        broken["supportedInterfaces"] =
            json!([{"url": "u", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]);
        broken["skills"] = json!([{"id": "a", "name": "A"}]);
        broken["securityRequirements"] = json!([{"schemes": {"ghost": {"list": []}}}]);
        let failed: Vec<String> = checks(&broken)
            .into_iter()
            .filter(|c| !c.ok)
            .map(|c| c.label)
            .collect();
        assert_eq!(
            failed,
            [
                "has description",
                "speaks A2A 1.0 (0.3 interfaces beside it are for 0.3 clients)",
                "every skill has id, name, description and tags",
                "security requirements name declared schemes"
            ]
        );
    }

    #[test]
    fn a_card_for_0_3_callers_too_keeps_every_1_0_field_and_adds_theirs() {
        let security = vec![SecurityScheme::Bearer, SecurityScheme::MutualTls];
        let plain = build(&CardInput {
            security: security.clone(),
            ..input()
        });
        let both = build(&CardInput {
            compat03: true,
            security,
            ..input()
        });
        let url = "http://127.0.0.1:3080/a2a/reports-1a2b3c4d";
        assert_eq!(both["protocolVersion"], "0.3.0");
        assert_eq!(both["url"], url);
        assert_eq!(both["preferredTransport"], "JSONRPC");
        assert_eq!(
            both["additionalInterfaces"],
            json!([{"url": url, "transport": "JSONRPC"}, {"url": url, "transport": "HTTP+JSON"}])
        );
        assert_eq!(both["supportsAuthenticatedExtendedCard"], true);
        let faces = both["supportedInterfaces"].as_array().unwrap();
        assert_eq!(
            faces[..3],
            plain["supportedInterfaces"].as_array().unwrap()[..]
        );
        assert_eq!(
            faces[3..],
            [
                json!({"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}),
                json!({"url": url, "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"})
            ]
        );
        assert_eq!(
            both["securitySchemes"]["bearer"],
            json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}, "type": "http", "scheme": "Bearer"})
        );
        assert_eq!(
            both["securitySchemes"]["mtls"],
            json!({"mtlsSecurityScheme": {}, "type": "mutualTLS"})
        );
        assert_eq!(both["security"], json!([{"bearer": []}, {"mtls": []}]));
        for (k, v) in plain.as_object().unwrap() {
            if k == "securitySchemes" {
                for (name, scheme) in v.as_object().unwrap() {
                    let (member, value) = scheme.as_object().unwrap().iter().next().unwrap();
                    assert_eq!(&both[k][name][member], value, "{name}'s 1.0 member is kept");
                }
            } else if k != "supportedInterfaces" {
                assert_eq!(&both[k], v, "{k} is the 1.0 card's");
            }
        }
    }

    #[test]
    fn token_adds_security_schemes_but_never_a_secret() {
        let c = build(&CardInput {
            security: vec![SecurityScheme::Bearer],
            ..input()
        });
        assert_eq!(
            c["securitySchemes"],
            json!({"bearer":{"httpAuthSecurityScheme":{"scheme":"Bearer"}}})
        );
        assert_eq!(
            c["securityRequirements"],
            json!([{"schemes":{"bearer":{"list":[]}}}])
        );
        assert_eq!(c["capabilities"]["extendedAgentCard"], true);
    }

    #[test]
    fn each_scheme_is_an_alternative() {
        let c = build(&CardInput {
            security: vec![
                SecurityScheme::Bearer,
                SecurityScheme::ApiKey {
                    header: "X-API-Key".into(),
                },
            ],
            ..input()
        });
        assert_eq!(
            c["securitySchemes"]["apiKey"],
            json!({"apiKeySecurityScheme":{"location":"header","name":"X-API-Key"}})
        );
        assert_eq!(
            c["securityRequirements"],
            json!([{"schemes":{"bearer":{"list":[]}}}, {"schemes":{"apiKey":{"list":[]}}}])
        );
    }

    #[test]
    fn an_oidc_scheme_names_its_discovery_document_and_the_scopes_it_requires() {
        let c = build(&CardInput {
            security: vec![SecurityScheme::OpenIdConnect {
                discovery_url: "https://id.example/.well-known/openid-configuration".into(),
                scopes: vec!["a2a:call".into()],
            }],
            ..input()
        });
        assert_eq!(
            c["securitySchemes"],
            json!({"oidc":{"openIdConnectSecurityScheme":{"openIdConnectUrl":"https://id.example/.well-known/openid-configuration"}}})
        );
        assert_eq!(
            c["securityRequirements"],
            json!([{"schemes":{"oidc":{"list":["a2a:call"]}}}])
        );
    }

    #[test]
    fn extended_card_needs_a_token() {
        assert_eq!(
            extended(&input()).unwrap_err().kind,
            crate::ErrorKind::ExtendedAgentCardNotConfigured
        );
        assert_eq!(
            extended(&CardInput {
                security: vec![SecurityScheme::Bearer],
                ..input()
            })
            .unwrap()["name"],
            "reports"
        );
    }

    #[test]
    fn skills_default_to_the_first_announced() {
        let announced = vec!["shout".to_owned(), "whisper".to_owned()];
        assert_eq!(select_skill(None, &announced), Ok("shout"));
        assert_eq!(select_skill(Some("whisper"), &announced), Ok("whisper"));
        assert_eq!(
            select_skill(Some("chat"), &announced).unwrap_err(),
            "unknown skill \"chat\": this agent announces shout, whisper"
        );
        assert_eq!(select_skill(None, &[]), Ok("chat"));
        assert_eq!(select_skill(Some("chat"), &[]), Ok("chat"));
        assert!(
            select_skill(Some("x"), &[])
                .unwrap_err()
                .contains("announces chat")
        );
    }

    #[test]
    fn attachments_extend_input_modes() {
        let c = build(&CardInput {
            attachments: true,
            ..input()
        });
        assert_eq!(c["defaultInputModes"].as_array().unwrap().len(), 6);
        assert_eq!(c["defaultInputModes"][5], "application/octet-stream");
    }

    #[test]
    fn provider_and_skill_tags() {
        let c = build(&CardInput {
            provider_organization: Some("Acme".into()),
            skills: vec![Skill {
                id: "sum".into(),
                name: "Sum".into(),
                description: "Adds".into(),
                tags: vec![],
            }],
            ..input()
        });
        assert_eq!(c["provider"], json!({"organization":"Acme","url":""}));
        assert_eq!(c["skills"][0]["tags"], json!(["sum"]));
    }

    #[test]
    fn the_03_fields_go_to_callers_naming_no_version_or_0_3() {
        for (compat03, asked, want) in [
            (true, None, true),
            (true, Some(""), true),
            (true, Some(" "), true),
            (true, Some("0.3"), true),
            (true, Some("0.3.0"), true),
            (true, Some("1.0"), false),
            (true, Some("1.0.1"), false),
            (true, Some("1"), false),
            (true, Some("2.0"), false),
            (false, None, false),
            (false, Some("0.3"), false),
        ] {
            assert_eq!(
                with_03_fields(compat03, asked),
                want,
                "{compat03} {asked:?}"
            );
        }
    }

    #[test]
    fn etags() {
        let e = etag(b"{}");
        assert_eq!(e, etag(b"{}"));
        assert_ne!(e, etag(b"{ }"));
        assert!(etag_matches(&e, &e));
        assert!(etag_matches(&format!("\"x\", W/{e}"), &e));
        assert!(etag_matches("*", &e));
        assert!(!etag_matches("\"other\"", &e));
    }
}
