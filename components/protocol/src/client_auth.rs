//! Which of a remote card's security schemes an outbound connection can satisfy
//! (docs/outbound.md "Outbound connections"). A connection sends one credential,
//! `Authorization: Bearer <token>`, the token static (`outbound.setAuth`) or got by OAuth 2.0
//! client credentials (`outbound.setOAuth`); so HTTP bearer, OAuth 2.0 and OpenID Connect schemes
//! can be met, API keys, HTTP Basic and mutual TLS cannot. Reads A2A 1.0 cards (`securitySchemes`
//! as the proto's oneof, `securityRequirements`) and 0.3 ones (`type`, `security`).

use serde_json::{Map, Value, json};

/// The most schemes and requirements read from one card.
const MAX_ENTRIES: usize = 32;

/// What a connection holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// A static bearer token.
    pub token: bool,
    /// An OAuth 2.0 client.
    pub oauth: bool,
}

impl Held {
    fn bearer(self) -> bool {
        self.token || self.oauth
    }
}

/// One scheme as the card declares it, in either version's form.
fn scheme(name: &str, s: &Value) -> Value {
    let one = |k: &str| s.get(k).filter(|v| v.is_object());
    let (kind, ok, how, mut extra) = if let Some(h) =
        one("httpAuthSecurityScheme").or_else(|| (s["type"] == "http").then_some(s))
    {
        let scheme = h["scheme"].as_str().unwrap_or_default();
        if scheme.eq_ignore_ascii_case("bearer") {
            (
                "bearer",
                true,
                "a bearer token: outbound.setAuth, or outbound.setOAuth",
                json!({}),
            )
        } else {
            (
                "http",
                false,
                "only HTTP Bearer is sent, not this HTTP scheme",
                json!({"scheme": scheme}),
            )
        }
    } else if let Some(k) =
        one("apiKeySecurityScheme").or_else(|| (s["type"] == "apiKey").then_some(s))
    {
        let at = k
            .get("location")
            .or_else(|| k.get("in"))
            .cloned()
            .unwrap_or_default();
        (
            "apiKey",
            false,
            "API keys are not sent; the remote would need to take a bearer token",
            json!({"location": at, "header": k["name"]}),
        )
    } else if let Some(o) =
        one("oauth2SecurityScheme").or_else(|| (s["type"] == "oauth2").then_some(s))
    {
        let cc = &o["flows"]["clientCredentials"];
        let extra = json!({"tokenUrl": cc["tokenUrl"], "scopes": cc["scopes"].as_object().map(|m| m.keys().cloned().collect::<Vec<_>>())});
        let how = if cc.is_object() {
            "outbound.setOAuth with this tokenUrl (client credentials), or a token got elsewhere by outbound.setAuth"
        } else {
            "a token got elsewhere by outbound.setAuth (the card offers no client-credentials flow)"
        };
        ("oauth2", true, how, extra)
    } else if let Some(o) =
        one("openIdConnectSecurityScheme").or_else(|| (s["type"] == "openIdConnect").then_some(s))
    {
        (
            "openIdConnect",
            true,
            "outbound.setOAuth with the issuer's token endpoint, or a token by outbound.setAuth",
            json!({"openIdConnectUrl": o["openIdConnectUrl"]}),
        )
    } else if one("mtlsSecurityScheme").is_some() || s["type"] == "mutualTLS" {
        (
            "mutualTLS",
            false,
            "client certificates are not sent",
            json!({}),
        )
    } else {
        (
            "unknown",
            false,
            "a scheme a2a-edge does not know",
            json!({}),
        )
    };
    let o = extra.as_object_mut().expect("an object");
    o.retain(|_, v| !v.is_null());
    let mut v = Map::from_iter([
        ("name".to_owned(), json!(name)),
        ("kind".to_owned(), json!(kind)),
        ("satisfiable".to_owned(), json!(ok)),
        ("how".to_owned(), json!(how)),
    ]);
    v.append(o);
    Value::Object(v)
}

/// The scheme names of each requirement (any one requirement, all its schemes), in either
/// version's form.
fn requirements(card: &Value) -> Vec<Vec<String>> {
    let names = |m: &Value| -> Vec<String> {
        m.as_object()
            .map(|m| m.keys().take(MAX_ENTRIES).cloned().collect())
            .unwrap_or_default()
    };
    let listed = |k: &str| card[k].as_array().map(|a| a.iter().take(MAX_ENTRIES));
    if let Some(list) = listed("securityRequirements") {
        list.map(|r| names(&r["schemes"])).collect()
    } else if let Some(list) = listed("security") {
        list.map(names).collect()
    } else {
        Vec::new()
    }
}

/// The card's schemes, each with whether a connection can satisfy it and how; `required` when
/// the card asks for credentials (no requirement is empty), `satisfiable` when some
/// requirement is a single scheme a connection can meet, and `satisfied` when it is with what
/// the connection holds (`held`).
pub fn report(card: &Value, held: Held) -> Value {
    let schemes: Vec<Value> = card["securitySchemes"]
        .as_object()
        .map(|m| {
            m.iter()
                .take(MAX_ENTRIES)
                .map(|(n, s)| scheme(n, s))
                .collect()
        })
        .unwrap_or_default();
    let can = |n: &String| {
        schemes
            .iter()
            .any(|s| s["name"] == n.as_str() && s["satisfiable"] == true)
    };
    let listed = requirements(card);
    // An empty requirement lets anyone in; a connection sends one credential, so only a
    // requirement of a single scheme it can meet is met.
    let required = !listed.is_empty() && listed.iter().all(|r| !r.is_empty());
    let satisfiable = !required || listed.iter().any(|r| r.len() == 1 && r.iter().all(can));
    json!({
        "schemes": schemes,
        "required": required,
        "satisfiable": satisfiable,
        "satisfied": !required || (satisfiable && held.bearer()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: Held = Held {
        token: true,
        oauth: false,
    };
    const OAUTH: Held = Held {
        token: false,
        oauth: true,
    };
    const BOTH: Held = Held {
        token: true,
        oauth: true,
    };

    fn kinds(r: &Value) -> Vec<(String, bool)> {
        r["schemes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["kind"].as_str().unwrap().to_owned(),
                    s["satisfiable"] == true,
                )
            })
            .collect()
    }

    #[test]
    fn an_open_card_needs_nothing() {
        let r = report(&json!({"name": "x"}), Held::default());
        assert_eq!(
            r,
            json!({"schemes": [], "required": false, "satisfiable": true, "satisfied": true})
        );
    }

    #[test]
    fn every_1_0_scheme_is_judged() {
        let card = json!({
            "securitySchemes": {
                "a": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
                "b": {"httpAuthSecurityScheme": {"scheme": "Basic"}},
                "c": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
                "d": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {"tokenUrl": "https://idp/token", "scopes": {"a2a": "call"}}}}},
                "e": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://idp/.well-known/openid-configuration"}},
                "f": {"mtlsSecurityScheme": {}},
                "g": {"somethingNew": {}},
            },
            "securityRequirements": [{"schemes": {"c": {"list": []}}}, {"schemes": {"d": {"list": ["a2a"]}}}],
        });
        let r = report(&card, Held::default());
        assert_eq!(
            kinds(&r),
            [
                ("bearer", true),
                ("http", false),
                ("apiKey", false),
                ("oauth2", true),
                ("openIdConnect", true),
                ("mutualTLS", false),
                ("unknown", false)
            ]
            .map(|(k, s)| (k.to_owned(), s))
        );
        assert_eq!(r["schemes"][3]["tokenUrl"], "https://idp/token");
        assert_eq!(r["schemes"][3]["scopes"], json!(["a2a"]));
        assert_eq!(r["schemes"][2]["header"], "X-API-Key");
        assert_eq!(
            (
                r["required"].clone(),
                r["satisfiable"].clone(),
                r["satisfied"].clone()
            ),
            (json!(true), json!(true), json!(false))
        );
        let held = report(&card, OAUTH);
        assert_eq!(held["satisfied"], true);
    }

    #[test]
    fn a_requirement_of_two_schemes_cannot_be_met_with_one_header_and_an_empty_one_needs_none() {
        let card = json!({
            "securitySchemes": {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "bearer"}},
                "key": {"apiKeySecurityScheme": {"location": "header", "name": "K"}},
            },
            "securityRequirements": [{"schemes": {"bearer": {"list": []}, "key": {"list": []}}}],
        });
        let r = report(&card, TOKEN);
        assert_eq!(
            (r["satisfiable"].clone(), r["satisfied"].clone()),
            (json!(false), json!(false))
        );
        // Two bearer-type schemes at once still need two credentials.
        let both = json!({
            "securitySchemes": {
                "a": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
                "b": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://idp/x"}},
            },
            "securityRequirements": [{"schemes": {"a": {"list": []}, "b": {"list": []}}}],
        });
        assert_eq!(report(&both, BOTH)["satisfiable"], false);
        // An empty requirement beside another: anyone may call.
        let optional = json!({
            "securitySchemes": {"key": {"apiKeySecurityScheme": {"location": "header", "name": "K"}}},
            "securityRequirements": [{"schemes": {"key": {"list": []}}}, {"schemes": {}}],
        });
        let r = report(&optional, Held::default());
        assert_eq!(
            (r["required"].clone(), r["satisfied"].clone()),
            (json!(false), json!(true))
        );
        // A requirement naming a scheme the card does not declare cannot be met either.
        let r = report(
            &json!({"securityRequirements": [{"schemes": {"ghost": {"list": []}}}]}),
            BOTH,
        );
        assert_eq!(r["satisfiable"], false);
    }

    #[test]
    fn a_0_3_card_is_read_too() {
        let card = json!({
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
                "oauth": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "https://idp/t", "scopes": {}}}},
                "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://idp/.well-known/openid-configuration"},
                "mtls": {"type": "mutualTLS"},
            },
            "security": [{"key": []}, {"bearer": []}],
        });
        let r = report(&card, TOKEN);
        assert_eq!(
            kinds(&r),
            [
                ("bearer", true),
                ("apiKey", false),
                ("oauth2", true),
                ("openIdConnect", true),
                ("mutualTLS", false)
            ]
            .map(|(k, s)| (k.to_owned(), s))
        );
        assert_eq!(r["schemes"][1]["location"], "header");
        assert_eq!(r["satisfied"], true);
    }

    #[test]
    fn huge_cards_are_read_only_so_far() {
        let many: Map<String, Value> = (0..100)
            .map(|i| (format!("s{i:03}"), json!({"mtlsSecurityScheme": {}})))
            .collect();
        let r = report(&json!({"securitySchemes": many}), Held::default());
        assert_eq!(r["schemes"].as_array().unwrap().len(), MAX_ENTRIES);
    }
}
