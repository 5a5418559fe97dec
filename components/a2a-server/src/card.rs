//! `GET <endpoint>/agent-card.json`: the instance's AgentCard with caching headers, for the
//! version and media type the request names.

use a2a_protocol::{card, methods};
use wasip2::http::types::ResponseOutparam;

use a2a_guest::server::a2a::edge::request_context::InstanceInfo;

use crate::http::{self, Request};

/// Serves the card; `If-None-Match` with the current ETag answers 304.
pub fn serve(req: &Request, instance: &InstanceInfo, out: ResponseOutparam) {
    let mut input: card::CardInput = instance.into();
    // With 0.3 callers served, the card depends on the version the request names.
    let vary = if input.compat03 {
        "A2A-Version, Accept"
    } else {
        "Accept"
    };
    input.compat03 = card::with_03_fields(input.compat03, req.header("a2a-version"));
    let media = methods::answer_type(None, req.header_list("accept").as_deref())
        .unwrap_or("application/json");
    let body = card::build(&input).to_string();
    let etag = card::etag(body.as_bytes());
    let modified = a2a_protocol::time::http_date(instance.updated_at);
    let headers = [
        ("content-type", media),
        ("cache-control", "public, max-age=300"),
        ("vary", vary),
        ("etag", etag.as_str()),
        ("last-modified", modified.as_str()),
    ];
    let fresh = req
        .header("if-none-match")
        .is_some_and(|v| card::etag_matches(v, &etag));
    if fresh {
        http::answer(
            out,
            304,
            &headers[1..],
            b"",
            ("GetAgentCard", "not_modified"),
        );
    } else {
        http::answer(out, 200, &headers, body.as_bytes(), ("GetAgentCard", "ok"));
    }
}
