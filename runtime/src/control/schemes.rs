//! `inbound.setOidc` and `inbound.setMtls` (docs/auth.md "Authentication"): an instance's OpenID
//! Connect and mutual-TLS schemes, set or cleared; settings are checked before they are kept
//! (only asymmetric algorithms, keys over https unless on loopback; client certificates only
//! where the listener asks for them).

use std::sync::Arc;

use control_api::{InboundSetMtls, InboundSetOidc, Refusal};
use serde_json::Value;

use super::done;
use super::inbound::{record, save};
use crate::app::App;
use crate::clock::now_ms;
use crate::records::{CertName, InstanceRecord, MtlsSettings, OidcSettings};

/// Clears a scheme `r` had (`had`: whether it had it): refused when it had none, or when it was
/// the last credential and the caller did not say `open`.
fn clear(r: &InstanceRecord, had: bool, what: &str, open: bool) -> Result<String, Refusal> {
    let id = &r.id;
    if !had {
        return Err(format!("inbound {id:?} takes no {what}"));
    }
    if !crate::identity::required(r) && !open {
        return Err(format!(
            "{what} are the last credential of inbound {id:?}: without them the instance takes calls from anyone. Set a token or create a key first, or pass \"open\": true to open it"
        ));
    }
    Ok(format!("inbound {id:?}: {what} are no longer accepted"))
}

/// Keeps `r` as changed.
async fn keep(app: &Arc<App>, mut r: InstanceRecord, message: String) -> Result<Value, Refusal> {
    r.updated_at = now_ms();
    save(app, r).await?;
    Ok(done(message))
}

/// `inbound.setOidc`: the scheme replaces any the instance had; `clear` removes it (its last
/// credential only with `open`).
pub async fn set_oidc(app: &Arc<App>, a: &InboundSetOidc) -> Result<Value, Refusal> {
    let id = a.id.as_str();
    let mut r = record(app, id)?;
    let message = if a.clear.is_some_and(|c| c.0) {
        let had = r.oidc.take().is_some();
        clear(
            &r,
            had,
            "OpenID Connect tokens",
            a.open.is_some_and(|o| o.0),
        )?
    } else {
        let (Some(issuer), Some(audience)) = (&a.issuer, &a.audience) else {
            return Err("set issuer and audience (or clear: true to remove the scheme)".into());
        };
        let mut s = OidcSettings::new(issuer.as_str(), audience.as_str());
        s.jwks_url = a.jwks_url.as_ref().map(|u| u.as_str().to_owned());
        if let Some(algorithms) = &a.algorithms {
            s.algorithms = algorithms.0.clone();
        }
        s.scopes = a.scopes.as_ref().map(|n| n.0.clone()).unwrap_or_default();
        if let Some(c) = &a.principal_claim {
            s.principal_claim = c.as_str().to_owned();
        }
        s.check()?;
        crate::identity::oidc::check_https(&s)?;
        let message = format!(
            "inbound {id:?}: accepts OpenID Connect tokens from {} for {} (principal: the {} claim)",
            s.issuer, s.audience, s.principal_claim
        );
        r.oidc = Some(s);
        message
    };
    keep(app, r, message).await
}

/// `inbound.setMtls`: callers presenting a verified client certificate are known by its
/// subject (or first alternative name); `clear` removes the scheme (its last credential only
/// with `open`).
pub async fn set_mtls(app: &Arc<App>, a: &InboundSetMtls) -> Result<Value, Refusal> {
    let id = a.id.as_str();
    let mut r = record(app, id)?;
    let message = if a.clear.is_some_and(|c| c.0) {
        let had = r.mtls.take().is_some();
        clear(&r, had, "client certificates", a.open.is_some_and(|o| o.0))?
    } else {
        app.config.client_certificates()?;
        let from = match a.principal_from.as_ref().map(|p| p.as_str()) {
            None | Some("subject") => CertName::Subject,
            Some("san") => CertName::San,
            Some(other) => {
                return Err(format!(
                    "principalFrom must be \"subject\" (the common name) or \"san\" (the first alternative name), not {other:?}"
                ));
            }
        };
        r.mtls = Some(MtlsSettings {
            principal_from: from,
        });
        let name = match from {
            CertName::Subject => "its subject's common name",
            CertName::San => "its first subject alternative name",
        };
        format!(
            "inbound {id:?}: accepts client certificates the listener verifies (principal: {name})"
        )
    };
    keep(app, r, message).await
}
