//! `a2a:edge/exchange`: the request read and a complete answer written in one crossing each.
//! A component that imports it gets the request here, whole; WASI HTTP gets only its line.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use wasmtime::component::Resource;
use wasmtime_wasi::HostMonotonicClock;
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::p2::types::{HostIncomingRequest, HostResponseOutparam};

use std::sync::Arc;
use std::time::Instant;

use super::bindings::exchange::{Begun, Host, Request};
use super::bindings::request_context::{InstanceInfo, RouteKind};
use super::context::{ContextCtx, Recorder};
use super::services::View;

/// The exchange capability of one request: the request, until the component reads it, and what
/// `begin` and `finish` hand over and record of it.
pub struct ExchangeCtx {
    held: Option<Held>,
    route: RouteKind,
    info: Arc<InstanceInfo>,
    stamp: u64,
    recorder: Recorder,
    /// The origin of the request's monotonic clock ([`Since`]).
    started: Instant,
}

/// The monotonic clock of a request's component: nanoseconds since the request started, so the
/// host can tell the component times on it (`begun.received-ns`).
pub struct Since(pub Instant);

impl wasmtime_wasi::HostMonotonicClock for Since {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos().try_into().unwrap_or(u64::MAX)
    }
}

/// A request as the host received it.
struct Held {
    parts: http::request::Parts,
    body: Bytes,
}

impl ExchangeCtx {
    /// The exchange of the request `context` describes, which started at `started`.
    pub fn prepare(context: &ContextCtx, started: Instant) -> ExchangeCtx {
        let (info, stamp) = context.info();
        ExchangeCtx {
            held: None,
            route: context.route_kind(),
            info: info.clone(),
            stamp,
            recorder: context.recorder().clone(),
            started,
        }
    }

    /// Keeps `req` for the component to read, and gives back what WASI HTTP is handed: the
    /// same method, target and `Host` (which it requires), no other header, no body.
    pub fn hold(&mut self, req: http::Request<Bytes>) -> http::Request<Full<Bytes>> {
        let (parts, body) = req.into_parts();
        let mut line = http::Request::new(Full::new(Bytes::new()));
        *line.method_mut() = parts.method.clone();
        *line.uri_mut() = parts.uri.clone();
        if let Some(host) = parts.headers.get(http::header::HOST) {
            line.headers_mut().insert(http::header::HOST, host.clone());
        }
        self.held = Some(Held { parts, body });
        line
    }
}

impl View<'_, ExchangeCtx> {
    /// The held request, once.
    fn take(&mut self, req: Resource<HostIncomingRequest>) -> wasmtime::Result<Request> {
        self.table.delete(req)?;
        let Some(Held { parts, body }) = self.ctx.held.take() else {
            wasmtime::bail!("the request was read already (exchange.read or begin, once)");
        };
        Ok(Request {
            method: parts.method.as_str().to_owned(),
            path_with_query: parts
                .uri
                .path_and_query()
                .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned()),
            headers: parts
                .headers
                .iter()
                .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
                .collect(),
            body: body.to_vec(),
        })
    }
}

impl Host for View<'_, ExchangeCtx> {
    fn read(&mut self, req: Resource<HostIncomingRequest>) -> wasmtime::Result<Request> {
        self.take(req)
    }

    fn begin(
        &mut self,
        req: Resource<HostIncomingRequest>,
        known_stamp: u64,
    ) -> wasmtime::Result<Begun> {
        let request = self.take(req)?;
        let mut random = vec![0; 32];
        getrandom::fill(&mut random)
            .map_err(|e| wasmtime::Error::msg(format!("cannot draw random bytes: {e}")))?;
        Ok(Begun {
            request,
            route: self.ctx.route,
            instance: (known_stamp != self.ctx.stamp).then(|| (*self.ctx.info).clone()),
            instance_stamp: self.ctx.stamp,
            received_ms: crate::clock::now_ms(),
            received_ns: Since(self.ctx.started).now(),
            random,
        })
    }

    fn finish(
        &mut self,
        out: Resource<HostResponseOutparam>,
        status: u16,
        headers: Vec<(String, Vec<u8>)>,
        body: Vec<u8>,
        method: String,
        outcome: String,
    ) -> wasmtime::Result<Result<(), String>> {
        self.ctx.recorder.call(&method, &outcome);
        self.respond(out, status, headers, body)
    }

    fn respond(
        &mut self,
        out: Resource<HostResponseOutparam>,
        status: u16,
        headers: Vec<(String, Vec<u8>)>,
        body: Vec<u8>,
    ) -> wasmtime::Result<Result<(), String>> {
        let out = self.table.delete(out)?;
        let (response, result) = match answer(status, headers, body) {
            Ok(r) => (Ok(r), Ok(())),
            Err(e) => (Err(ErrorCode::InternalError(Some(e.clone()))), Err(e)),
        };
        (out.send)(response);
        Ok(result)
    }
}

/// The response `status`, `headers` and `body` make, with its `Content-Length` where the status
/// allows one; what is malformed, in words.
fn answer(
    status: u16,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
) -> Result<http::Response<wasmtime_wasi_http::p2::body::HyperOutgoingBody>, String> {
    let status = http::StatusCode::from_u16(status)
        .map_err(|_| format!("{status} is not an HTTP status (100 to 999)"))?;
    let mut map = http::HeaderMap::with_capacity(headers.len() + 1);
    for (name, value) in headers {
        let n = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("{name:?} is not a header name"))?;
        let v = http::HeaderValue::from_bytes(&value)
            .map_err(|_| format!("the value of {name} is not a header value"))?;
        map.append(n, v);
    }
    let bodiless = status.is_informational()
        || status == http::StatusCode::NO_CONTENT
        || status == http::StatusCode::NOT_MODIFIED;
    if !bodiless {
        map.insert(http::header::CONTENT_LENGTH, body.len().into());
    }
    let mut response = http::Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = status;
    *response.headers_mut() = map;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_carries_its_length_unless_its_status_has_no_body() {
        let headers = vec![("content-type".to_owned(), b"application/json".to_vec())];
        let ok = answer(200, headers.clone(), b"{}".to_vec()).unwrap();
        assert_eq!(ok.headers()["content-length"], "2");
        assert_eq!(ok.headers()["content-type"], "application/json");
        for status in [204, 304] {
            let none = answer(status, headers.clone(), Vec::new()).unwrap();
            assert!(!none.headers().contains_key("content-length"), "{status}");
        }
    }

    #[test]
    fn a_malformed_header_or_status_is_named() {
        let bad = vec![("bad name".to_owned(), b"x".to_vec())];
        assert!(
            answer(200, bad, Vec::new())
                .unwrap_err()
                .contains("\"bad name\"")
        );
        let bad = vec![("x-ok".to_owned(), b"line\nbreak".to_vec())];
        assert!(answer(200, bad, Vec::new()).unwrap_err().contains("x-ok"));
        assert!(
            answer(42, Vec::new(), Vec::new())
                .unwrap_err()
                .contains("42")
        );
    }
}
