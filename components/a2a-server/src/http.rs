//! WASI HTTP plumbing: read a request, write a JSON answer or an SSE stream.

use std::cell::RefCell;
use std::rc::Rc;

use a2a_guest::Arrival;
use a2a_guest::server::a2a::edge::exchange;
use a2a_guest::server::a2a::edge::request_context::{self, InstanceInfo, RouteKind};
use wasip2::http::types::{
    Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasip2::io::streams::{OutputStream, StreamError};

/// A request as the handlers need it.
pub struct Request {
    /// When it came, and random bytes for its ids.
    pub arrival: Arrival,
    /// The method, read only for the HTTP+JSON binding (empty otherwise).
    pub method: String,
    /// The path (for the HTTP+JSON binding, the part below the endpoint path).
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub query: String,
    pub body: Vec<u8>,
}

/// A request begun: what it is, the route it hit and the instance serving it.
pub struct Begun {
    pub request: Request,
    pub route: RouteKind,
    pub instance: Rc<InstanceInfo>,
}

thread_local! {
    /// The instance info the host gave last, and its stamp: kept from one request to the next
    /// (it carries no secret and nothing of a request), taken again when its stamp changes.
    static KEPT: RefCell<Option<(u64, Rc<InstanceInfo>)>> = const { RefCell::new(None) };
}

impl Begun {
    /// Reads the request, its body whole (the host bounded it already), its route and the
    /// instance's info (when it changed since the last request) in one crossing.
    pub fn read(req: IncomingRequest) -> Begun {
        let known = KEPT.with_borrow(|k| k.as_ref().map(|(stamp, info)| (*stamp, info.clone())));
        let begun = exchange::begin(req, known.as_ref().map_or(0, |(stamp, _)| *stamp));
        let instance = match (begun.instance, known) {
            (Some(info), _) => Rc::new(info),
            (None, Some((stamp, info))) if stamp == begun.instance_stamp => info,
            (None, _) => Rc::new(request_context::instance()),
        };
        KEPT.set(Some((begun.instance_stamp, instance.clone())));
        let exchange::Request {
            method,
            path_with_query,
            headers,
            body,
        } = begun.request;
        let (path, query) = match path_with_query.split_once('?') {
            Some((p, q)) => (p.to_owned(), q.to_owned()),
            None => (path_with_query, String::new()),
        };
        Begun {
            request: Request {
                arrival: Arrival::new(begun.received_ms, begun.received_ns, begun.random),
                method,
                path,
                headers,
                query,
                body,
            },
            route: begun.route,
            instance,
        }
    }
}

impl Request {
    /// The first value of a header (names compare case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// Every value of a header, joined by `, ` as HTTP reads repeated fields (a client may send
    /// `Accept` twice).
    pub fn header_list(&self, name: &str) -> Option<String> {
        let values: Vec<&str> = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .filter_map(|(_, v)| std::str::from_utf8(v).ok())
            .collect();
        (!values.is_empty()).then(|| values.join(", "))
    }

    /// The first value of a query parameter (no percent-decoding: the values we read are tokens).
    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

/// Sends a complete response and tells the host the request was `method` and ended
/// `outcome` (`request-context.record-call`), in one crossing; the host adds its
/// `Content-Length`, so it goes out in one piece, not chunked, where the status allows one.
pub fn answer(
    out: ResponseOutparam,
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
    (method, outcome): (&str, &str),
) {
    // A malformed header is the component's fault: the host answers 500 then.
    let _ = exchange::finish(out, status, &owned(headers), body, method, outcome);
}

/// Headers as WASI HTTP and the exchange take them.
fn owned(headers: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .map(|(n, v)| ((*n).to_owned(), v.as_bytes().to_vec()))
        .collect()
}

/// A started response: its body and the stream writing it.
pub type Started = (OutgoingBody, OutputStream);

/// Sends the status and headers; the body follows through [`write_all`] and [`finish`].
pub fn start(out: ResponseOutparam, status: u16, headers: &[(&str, &str)]) -> Option<Started> {
    let response = OutgoingResponse::new(Fields::from_list(&owned(headers)).ok()?);
    // A new response is 200 already: a crossing saved on most answers.
    if status != 200 {
        response.set_status_code(status).ok()?;
    }
    let body = response.body().ok()?;
    ResponseOutparam::set(out, Ok(response));
    let stream = body.write().ok()?;
    Some((body, stream))
}

/// Writes bytes; an error means the client went away.
pub fn write_all(stream: &OutputStream, mut bytes: &[u8]) -> Result<(), StreamError> {
    while !bytes.is_empty() {
        let n = bytes.len().min(4096);
        stream.blocking_write_and_flush(&bytes[..n])?;
        bytes = &bytes[n..];
    }
    Ok(())
}

/// Drops a body whose client went away (the stream first: it is the body's child).
pub fn abandon((body, stream): Started) {
    drop(stream);
    drop(body);
}

/// Ends the body.
pub fn finish((body, stream): Started) {
    drop(stream);
    let _ = OutgoingBody::finish(body, None);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn request(headers: &[(&str, &str)], query: &str) -> Request {
        Request {
            arrival: Arrival::default(),
            method: String::new(),
            path: String::new(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
                .collect(),
            query: query.into(),
            body: Vec::new(),
        }
    }

    #[test]
    fn headers_compare_names_case_insensitively_and_take_the_first() {
        let r = request(
            &[
                ("Content-Type", "application/json"),
                ("content-type", "text/plain"),
            ],
            "",
        );
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert_eq!(r.header("accept"), None);
        assert_eq!(r.header_list("accept"), None);
    }

    #[test]
    fn repeated_fields_read_as_one_list() {
        let r = request(&[("accept", "*/*"), ("Accept", "text/event-stream")], "");
        assert_eq!(
            r.header_list("accept").as_deref(),
            Some("*/*, text/event-stream")
        );
        assert!(a2a_protocol::methods::accepts_sse(
            r.header_list("accept").as_deref()
        ));
    }

    #[test]
    fn query_params_are_found_by_name_without_decoding() {
        let r = request(&[], "a=1&A2A-Version=1.0&flag&b=x%20y");
        assert_eq!(r.query_param("a2a-version"), Some("1.0"));
        assert_eq!(r.query_param("b"), Some("x%20y"));
        assert_eq!(
            r.query_param("flag"),
            None,
            "a name without a value is no param"
        );
        assert_eq!(r.query_param("c"), None);
    }
}
