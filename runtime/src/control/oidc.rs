//! `inbound.setOidc` (README "Authentication"): an instance's OpenID Connect scheme, set or
//! cleared; the settings are checked before they are kept (only asymmetric algorithms).

use std::sync::Arc;

use control_api::{InboundSetOidc, Refusal};
use serde_json::Value;

use super::done;
use super::inbound::{record, save};
use crate::app::App;
use crate::clock::now_ms;
use crate::records::OidcSettings;

/// `inbound.setOidc`: the scheme replaces any the instance had; `clear` removes it (its last
/// credential only with `open`).
pub async fn set(app: &Arc<App>, a: &InboundSetOidc) -> Result<Value, Refusal> {
    let id = a.id.as_str();
    let mut r = record(app, id)?;
    let message = if a.clear.is_some_and(|c| c.0) {
        if r.oidc.take().is_none() {
            return Err(format!("inbound {id:?} takes no OpenID Connect tokens"));
        }
        if !crate::identity::required(&r) && !a.open.is_some_and(|o| o.0) {
            return Err(format!(
                "OpenID Connect is the last credential of inbound {id:?}: without it the instance takes calls from anyone. Set a token or create a key first, or pass \"open\": true to open it"
            ));
        }
        format!("inbound {id:?}: OpenID Connect tokens are no longer accepted")
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
        let message = format!(
            "inbound {id:?}: accepts OpenID Connect tokens from {} for {} (principal: the {} claim)",
            s.issuer, s.audience, s.principal_claim
        );
        r.oidc = Some(s);
        message
    };
    r.updated_at = now_ms();
    save(app, r).await?;
    Ok(done(message))
}
