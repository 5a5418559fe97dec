//! HTTP over `wasi:http/outgoing-handler`, every wait abortable by the caller and bounded by the
//! connection's timeout; transport errors and 5xx retried with backoff.

use a2a_protocol::client::{MAX_RETRIES, retry_delay_ms, retryable};
use serde_json::Value;
use wasip2::clocks::monotonic_clock;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    Fields, IncomingBody, IncomingResponse, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use wasip2::io::poll::{self, Pollable};
use wasip2::io::streams::{InputStream, StreamError};

use a2a_guest::client::a2a::edge::outbound;
use a2a_guest::client::exports::a2a::edge::client::CallError;

/// Largest response body read whole.
const MAX_BODY: usize = 8 << 20;

/// The waits of one call: the caller's abort and the connection's deadline.
pub struct Ctx {
    aborted: Option<Pollable>,
    deadline: Pollable,
    timeout_ms: u64,
}

/// Why a wait ended early.
enum Stop {
    Aborted,
    Deadline,
}

impl Ctx {
    /// The waits of the current call.
    pub fn new() -> Ctx {
        let timeout_ms = outbound::connection().timeout_ms.max(1);
        Ctx {
            aborted: Some(outbound::aborted()),
            deadline: monotonic_clock::subscribe_duration(timeout_ms * 1_000_000),
            timeout_ms,
        }
    }

    /// Waits for cleanup after an abort: not abortable, a few seconds at most.
    pub fn cleanup() -> Ctx {
        Ctx {
            aborted: None,
            deadline: monotonic_clock::subscribe_duration(5_000_000_000),
            timeout_ms: 5_000,
        }
    }

    /// Waits until `p` is ready, or the call is aborted or out of time.
    fn wait(&self, p: &Pollable) -> Result<(), CallError> {
        let mut list = vec![p, &self.deadline];
        if let Some(a) = &self.aborted {
            list.push(a);
        }
        let ready = poll::poll(&list);
        if ready.contains(&0) {
            return Ok(());
        }
        Err(self.error(if ready.contains(&2) {
            Stop::Aborted
        } else {
            Stop::Deadline
        }))
    }

    fn error(&self, why: Stop) -> CallError {
        match why {
            Stop::Aborted => CallError::Aborted,
            Stop::Deadline => CallError::Transport(format!(
                "the remote agent did not finish within {} ms",
                self.timeout_ms
            )),
        }
    }

    /// Whether the call was aborted or ran out of time (without waiting).
    pub fn stopped(&self) -> Option<CallError> {
        if self.aborted.as_ref().is_some_and(Pollable::ready) {
            return Some(CallError::Aborted);
        }
        self.deadline.ready().then(|| self.error(Stop::Deadline))
    }

    /// Sleeps `ms` unless aborted or out of time.
    pub fn sleep(&self, ms: u64) -> Result<(), CallError> {
        self.wait(&monotonic_clock::subscribe_duration(ms * 1_000_000))
    }
}

/// A response whose body is read as it arrives.
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// `content-type`, lower-cased.
    pub content_type: String,
    stream: Option<InputStream>,
    body: Option<IncomingBody>,
    _response: IncomingResponse,
}

impl Drop for Response {
    fn drop(&mut self) {
        // Children before parents: the stream, then the body, then the response.
        drop(self.stream.take());
        drop(self.body.take());
    }
}

impl Response {
    /// The next chunk; none at the end of the body.
    pub fn chunk(&mut self, ctx: &Ctx) -> Result<Option<Vec<u8>>, CallError> {
        let Some(stream) = &self.stream else {
            return Ok(None);
        };
        loop {
            match stream.read(64 * 1024) {
                Ok(bytes) if bytes.is_empty() => ctx.wait(&stream.subscribe())?,
                Ok(bytes) => return Ok(Some(bytes)),
                Err(StreamError::Closed) => return Ok(None),
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(CallError::Transport(format!(
                        "the response broke off: {}",
                        e.to_debug_string()
                    )));
                }
            }
        }
    }

    /// The whole body (at most 8 MiB).
    pub fn bytes(&mut self, ctx: &Ctx) -> Result<Vec<u8>, CallError> {
        let mut all = Vec::new();
        while let Some(c) = self.chunk(ctx)? {
            all.extend_from_slice(&c);
            if all.len() > MAX_BODY {
                return Err(CallError::InvalidResponse(format!(
                    "the response is larger than {MAX_BODY} bytes"
                )));
            }
        }
        Ok(all)
    }
}

/// One request, no retry: the response head, or why there is none.
fn exchange(
    ctx: &Ctx,
    method: &Method,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Response, CallError> {
    let target = a2a_protocol::client::split_url(url).map_err(CallError::Transport)?;
    let scheme = if target.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let (authority, path) = (target.authority, target.path_and_query.as_str());
    let list: Vec<(String, Vec<u8>)> = headers
        .iter()
        .map(|(n, v)| ((*n).to_owned(), v.as_bytes().to_vec()))
        .collect();
    let fields = Fields::from_list(&list)
        .map_err(|e| CallError::Transport(format!("bad request header: {e:?}")))?;
    let req = OutgoingRequest::new(fields);
    let invalid = |what: &str| CallError::Transport(format!("{url}: invalid {what}"));
    req.set_method(method).map_err(|_| invalid("method"))?;
    req.set_scheme(Some(&scheme))
        .map_err(|_| invalid("scheme"))?;
    req.set_authority(Some(authority))
        .map_err(|_| invalid("host"))?;
    req.set_path_with_query(Some(path))
        .map_err(|_| invalid("path"))?;
    let out = req.body().map_err(|_| invalid("body"))?;
    let future = outgoing_handler::handle(req, None)
        .map_err(|e| CallError::Transport(format!("{url}: {e:?}")))?;
    // A body the host stopped taking (the request was refused or failed meanwhile) is not the
    // cause: the response's error code says why, so it is awaited either way.
    let sent = {
        let stream = out.write().map_err(|_| invalid("body"))?;
        body.chunks(4096)
            .try_for_each(|chunk| stream.blocking_write_and_flush(chunk))
    };
    let sent = match sent {
        Ok(()) => OutgoingBody::finish(out, None).map_err(|e| format!("{e:?}")),
        Err(e) => {
            drop(out);
            Err(format!("sending the request failed: {e:?}"))
        }
    };
    ctx.wait(&future.subscribe())?;
    let response = match (future.get(), sent) {
        (Some(Ok(Err(code))), _) => {
            return Err(CallError::Transport(format!("{url}: {}", describe(&code))));
        }
        (_, Err(e)) => return Err(CallError::Transport(format!("{url}: {e}"))),
        (Some(Ok(Ok(r))), Ok(())) => r,
        _ => return Err(CallError::Transport(format!("{url}: no response"))),
    };
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .first()
        .map(|v| String::from_utf8_lossy(v).to_ascii_lowercase())
        .unwrap_or_default();
    let body = response
        .consume()
        .map_err(|_| CallError::Transport(format!("{url}: the response has no body")))?;
    let stream = body
        .stream()
        .map_err(|_| CallError::Transport(format!("{url}: the response has no body")))?;
    Ok(Response {
        status,
        content_type,
        stream: Some(stream),
        body: Some(body),
        _response: response,
    })
}

fn describe(code: &wasip2::http::types::ErrorCode) -> String {
    use wasip2::http::types::ErrorCode as E;
    match code {
        E::DnsError(_) => "the host name does not resolve".into(),
        E::ConnectionRefused => "connection refused (is the remote agent running?)".into(),
        E::ConnectionTimeout | E::ConnectionReadTimeout | E::HttpResponseTimeout => {
            "timed out".into()
        }
        E::HttpRequestDenied => "refused by the runtime's outbound policy".into(),
        E::DestinationIpProhibited => {
            "the host resolves to an address the egress guard refuses: an internal address (allowPrivate on the connection allows it; link-local never), or this runtime's own listener for its control API (never)".into()
        }
        E::TlsCertificateError => {
            "its TLS certificate is not trusted (a site's own CA goes in [egress] caFile)".into()
        }
        E::HttpResponseBodySize(_) => "the response is larger than the runtime allows".into(),
        E::InternalError(Some(m)) => m.clone(),
        other => format!("{other:?}"),
    }
}

/// A request retried on transport errors and 5xx (at most [`MAX_RETRIES`] times, with backoff);
/// any other status is answered as is.
pub fn send(
    ctx: &Ctx,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Response, CallError> {
    let mut attempt = 0;
    loop {
        let result = exchange(ctx, &method, url, headers, body);
        let retry = match &result {
            Err(CallError::Transport(_)) => true,
            Ok(r) => retryable(r.status),
            Err(_) => false,
        };
        if !retry || attempt == MAX_RETRIES {
            return result;
        }
        attempt += 1;
        drop(result);
        ctx.sleep(retry_delay_ms(attempt))?;
    }
}

/// A request expecting a JSON answer with a 2xx status.
pub fn json(
    ctx: &Ctx,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Value, CallError> {
    let mut r = send(ctx, method, url, headers, body)?;
    let bytes = r.bytes(ctx)?;
    if !(200..300).contains(&r.status) {
        let snippet: String = String::from_utf8_lossy(&bytes).chars().take(300).collect();
        return Err(CallError::Http((r.status, snippet)));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| CallError::InvalidResponse(format!("{url} did not answer JSON: {e}")))
}
