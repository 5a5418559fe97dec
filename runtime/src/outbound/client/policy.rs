//! Outbound HTTP policy of the client component (`wasi:http/outgoing-handler`): it may reach
//! http/https URLs only, past the SSRF guard, within its connection's timeout and a response
//! size cap; the bearer credential is added here, by the host, and only for the connection's own
//! origins — the guest never holds it and cannot choose where it goes.

use std::time::Duration;

use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

type Sent = Result<crate::egress::Sent, Error>;

/// What an outbound client may do.
pub struct Rules {
    /// The trace context every request carries (the host's, replacing the guest's).
    pub trace: http::HeaderMap,
    /// Bearer token for the connection's origins.
    pub bearer: Option<String>,
    /// `scheme://authority` origins the token is sent to.
    pub origins: Vec<String>,
    /// Connect, first-byte and between-bytes timeout.
    pub timeout: Duration,
    /// Largest response body.
    pub max_response_bytes: u64,
    /// Which addresses requests may reach (the SSRF guard).
    pub reach: crate::egress::Reach,
    /// How they leave (TLS roots, proxy).
    pub exit: crate::egress::Exit,
}

/// The outbound policy of a client component's store: its requests, under its rules.
pub struct Policy(pub Rules);

/// `scheme://authority` of a URI (lower-cased), if it has both.
pub fn origin(uri: &http::Uri) -> Option<String> {
    Some(format!("{}://{}", uri.scheme_str()?, uri.authority()?).to_ascii_lowercase())
}

impl WasiHttpHooks for Policy {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let rules = &self.0;
        if !matches!(request.uri().scheme_str(), Some("http" | "https")) {
            return Box::new(async { Err(ErrorCode::HttpRequestUriInvalid.into()) });
        }
        // Guests never choose credentials: only the host's, and only to the connection's origins.
        request.headers_mut().remove(http::header::AUTHORIZATION);
        // Nor trace context: the call's span is the parent of what the remote agent does.
        for h in crate::telemetry::trace::HEADERS {
            request.headers_mut().remove(h);
        }
        for (name, value) in &rules.trace {
            request.headers_mut().insert(name, value.clone());
        }
        if let (Some(token), Some(o)) = (&rules.bearer, origin(request.uri()))
            && rules.origins.contains(&o)
            && let Ok(v) = http::HeaderValue::from_str(&format!("Bearer {token}"))
        {
            request.headers_mut().insert(http::header::AUTHORIZATION, v);
        }
        let t = crate::egress::guarded::timeout(options, rules.timeout);
        let (cap, reach, exit) = (
            rules.max_response_bytes,
            rules.reach.clone(),
            rules.exit.clone(),
        );
        Box::new(async move { crate::egress::guarded::send(request, &reach, &exit, t, cap).await })
    }
}
