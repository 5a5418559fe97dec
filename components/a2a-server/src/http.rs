//! WASI HTTP plumbing: read a request, write a JSON answer or an SSE stream.

use wasip2::http::types::{
    Fields, IncomingRequest, Method, OutgoingBody, OutgoingResponse, ResponseOutparam,
};
use wasip2::io::streams::{OutputStream, StreamError};

/// A request as the handlers need it.
pub struct Request {
    /// The method, read only for the HTTP+JSON binding (empty otherwise).
    pub method: String,
    /// The path (for the HTTP+JSON binding, the part below the endpoint path).
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub query: String,
    pub body: Vec<u8>,
}

impl Request {
    /// Reads headers and the whole body (the host bounded it already), and the method when
    /// `routes_on_method` (only the HTTP+JSON binding does: a host call the hot path spares).
    pub fn read(req: IncomingRequest, routes_on_method: bool) -> Request {
        let headers = req.headers().entries();
        let method = if !routes_on_method {
            String::new()
        } else {
            match req.method() {
                Method::Get => "GET".to_owned(),
                Method::Post => "POST".to_owned(),
                Method::Delete => "DELETE".to_owned(),
                Method::Head => "HEAD".to_owned(),
                Method::Put => "PUT".to_owned(),
                Method::Patch => "PATCH".to_owned(),
                Method::Options => "OPTIONS".to_owned(),
                Method::Connect => "CONNECT".to_owned(),
                Method::Trace => "TRACE".to_owned(),
                Method::Other(m) => m,
            }
        };
        let target = req.path_with_query().unwrap_or_default();
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_owned(), q.to_owned()),
            None => (target, String::new()),
        };
        let mut body = Vec::new();
        if let Ok(incoming) = req.consume()
            && let Ok(stream) = incoming.stream()
        {
            while let Ok(chunk) = stream.blocking_read(64 * 1024) {
                body.extend_from_slice(&chunk);
            }
        }
        Request {
            method,
            path,
            headers,
            query,
            body,
        }
    }

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

/// Sends a complete response, with its `Content-Length` (so it goes out in one piece, not
/// chunked) where the status allows one.
pub fn respond(out: ResponseOutparam, status: u16, headers: &[(&str, &str)], body: &[u8]) {
    let length = body.len().to_string();
    let mut all = headers.to_vec();
    if !matches!(status, 100..=199 | 204 | 304) {
        all.push(("content-length", &length));
    }
    let Some(stream) = start(out, status, &all) else {
        return;
    };
    let _ = write_all(&stream.1, body);
    finish(stream);
}

/// A started response: its body and the stream writing it.
pub type Started = (OutgoingBody, OutputStream);

/// Sends the status and headers; the body follows through [`write_all`] and [`finish`].
pub fn start(out: ResponseOutparam, status: u16, headers: &[(&str, &str)]) -> Option<Started> {
    let list: Vec<(String, Vec<u8>)> = headers
        .iter()
        .map(|(n, v)| ((*n).to_owned(), v.as_bytes().to_vec()))
        .collect();
    let response = OutgoingResponse::new(Fields::from_list(&list).ok()?);
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
