//! Outbound HTTP policy of guests (`wasi:http/outgoing-handler`). The server component has no
//! business calling out: every request is refused. The outbound client component gets its
//! own policy (timeouts, schemes, credential injection) with the outbound issue.

use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

/// Deny-by-default outbound policy.
pub struct Policy;

impl Policy {
    /// Refuses every outbound request.
    pub fn deny_all() -> Policy {
        Policy
    }
}

impl WasiHttpHooks for Policy {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Result<(http::Response<WasiBody>, Box<dyn Future<Output = Result<(), Error>> + Send>), Error>> + Send> {
        tracing::warn!(uri = %request.uri(), "refused an outbound request from a component: outbound HTTP is not allowed here");
        Box::new(async { Err(ErrorCode::HttpRequestDenied.into()) })
    }
}
