//! The runtime's own small exchanges past the guard (an issuer's keys, an OAuth token): one
//! request, its answer read whole within a size and a time bound.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::Value;

use super::{Exit, Reach};

/// Sends `request` where `reach` allows, within `timeout` in all, reading at most `cap` bytes
/// of the answer; the answer's status and body, or why there is none.
pub async fn exchange(
    exit: &Exit,
    request: http::Request<Bytes>,
    reach: &Reach,
    timeout: Duration,
    cap: u64,
) -> Result<(http::StatusCode, Bytes), String> {
    let uri = request.uri().clone();
    let request = request.map(|b| Full::new(b).map_err(|never| match never {}).boxed_unsync());
    let exchange = async {
        let (response, io) = super::guarded::send(request, reach, exit, timeout, cap)
            .await
            .map_err(|e| format!("{uri} could not be reached: {e}"))?;
        tokio::spawn(Box::into_pin(io));
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{uri} broke off its answer: {e}"))?
            .to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("{uri} did not answer within {} ms", timeout.as_millis()))?
}

/// GETs the JSON document at `url` (a 2xx answer), as [`exchange`] bounds it.
pub async fn fetch_json(
    exit: &Exit,
    url: &str,
    reach: &Reach,
    timeout: Duration,
    cap: u64,
) -> Result<Value, String> {
    let request = http::Request::get(url)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::USER_AGENT, super::USER_AGENT)
        .body(Bytes::new())
        .map_err(|e| format!("{url:?} is not a URL that can be fetched: {e}"))?;
    let (status, body) = exchange(exit, request, reach, timeout, cap).await?;
    if !status.is_success() {
        return Err(format!("{url} answered HTTP {}", status.as_u16()));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url} did not answer JSON: {e}"))
}
