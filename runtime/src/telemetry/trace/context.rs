//! W3C trace context (`traceparent`, `tracestate`) in and out of the runtime's spans.

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The headers of W3C trace context.
pub const HEADERS: [&str; 2] = ["traceparent", "tracestate"];

/// Makes `span` a child of the trace `headers` carry (a `traceparent`), if any.
pub fn continue_from(span: &tracing::Span, headers: &http::HeaderMap) {
    if !headers.contains_key(HEADERS[0]) {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Makes `span` a child of `parent`, a span that ran earlier in this process (a push delivery
/// continues the trace of the write it tells of).
pub fn follow(span: &tracing::Span, parent: &super::SpanRef) {
    let context = opentelemetry::Context::new().with_remote_span_context(parent.clone());
    let _ = span.set_parent(context);
}

/// Replaces whatever trace context `headers` carry with `span`'s (nothing when `span` is in no
/// trace): the host's, never what a component put there.
pub fn inject(span: &tracing::Span, headers: &mut http::HeaderMap) {
    for h in HEADERS {
        headers.remove(h);
    }
    let context = span.context();
    if context.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(headers));
    }
}

/// Renames `span` (one already started, whose `otel.name` field no longer applies).
pub fn rename(span: &tracing::Span, name: &'static str) {
    span.context().span().update_name(name);
}

/// Bytes a span keeps of a text a caller or a component chose.
pub const MAX_TEXT: usize = 256;

/// `s` cut to `MAX_TEXT` (256) bytes, at a character boundary.
pub fn short(s: &str) -> &str {
    &s[..s.floor_char_boundary(MAX_TEXT)]
}

/// Where `span` is in its trace, when it is in one.
pub fn position(span: &tracing::Span) -> Option<super::SpanRef> {
    let context = span.context();
    let s = context.span().span_context().clone();
    s.is_valid().then_some(s)
}

/// Records `trace_id` and `span_id` on `span` (fields it declares), so the log lines inside it
/// carry them.
pub fn record_ids(span: &tracing::Span) {
    if let Some(at) = position(span) {
        span.record("trace_id", at.trace_id().to_string().as_str());
        span.record("span_id", at.span_id().to_string().as_str());
    }
}
