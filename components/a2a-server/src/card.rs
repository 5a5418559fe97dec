//! `GET <endpoint>/agent-card.json`: the instance's AgentCard with caching headers.

use a2a_protocol::card;
use wasip2::http::types::ResponseOutparam;

use a2a_guest::server::a2a::edge::request_context;

use crate::http::{self, Request};

/// Serves the card; `If-None-Match` with the current ETag answers 304.
pub fn serve(req: &Request, out: ResponseOutparam) {
    let instance = request_context::instance();
    let body = card::build(&(&instance).into()).to_string();
    let etag = card::etag(body.as_bytes());
    let modified = a2a_protocol::time::http_date(instance.updated_at);
    let headers = [
        ("content-type", "application/json"),
        ("cache-control", "public, max-age=300"),
        ("etag", etag.as_str()),
        ("last-modified", modified.as_str()),
    ];
    let fresh = req
        .header("if-none-match")
        .is_some_and(|v| card::etag_matches(v, &etag));
    request_context::record_call("GetAgentCard", if fresh { "not_modified" } else { "ok" });
    if fresh {
        http::respond(out, 304, &headers[1..], b"");
    } else {
        http::respond(out, 200, &headers, body.as_bytes());
    }
}
