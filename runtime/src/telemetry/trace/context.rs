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

/// Records a request span's `trace_id` and `span_id` (fields it declares empty) when the first
/// line inside it is logged, before the log writes it: the lines carry them, and the requests
/// that log nothing (most) never format them. Goes before the log's layer, with its filter (a
/// layer without one enables every event).
#[derive(Default)]
pub struct LineIds {
    /// The subscriber it is part of (inside a callback, the default dispatcher is none).
    dispatch: std::sync::OnceLock<tracing::dispatcher::WeakDispatch>,
}

/// A span whose ids [`LineIds`] recorded.
struct IdsRecorded;

impl<S> tracing_subscriber::Layer<S> for LineIds
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_register_dispatch(&self, subscriber: &tracing::Dispatch) {
        let _ = self.dispatch.set(subscriber.downgrade());
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
        let Some(span) = ctx.event_scope(event).and_then(|scope| {
            scope
                .into_iter()
                .find(|s| s.name() == crate::telemetry::logging::REQUEST_SPAN)
        }) else {
            return;
        };
        // Checked and marked under one lock: two threads logging the span's first line at once
        // must not both insert (the second insert panics, poisoning the span's extensions).
        if span.extensions_mut().replace(IdsRecorded).is_some() {
            return;
        }
        let (id, fields) = (span.id(), span.metadata().fields());
        drop(span);
        if let Some(d) = self.dispatch.get().and_then(|d| d.upgrade()) {
            let Some(cx) = tracing_opentelemetry::get_otel_context(&id, &d) else {
                return;
            };
            let at = cx.span().span_context().clone();
            let (Some(t), Some(s), true) = (
                fields.field("trace_id"),
                fields.field("span_id"),
                at.is_valid(),
            ) else {
                return;
            };
            let (trace, span) = (at.trace_id().to_string(), at.span_id().to_string());
            let values: [(&tracing::field::Field, Option<&dyn tracing::Value>); 2] =
                [(&t, Some(&trace.as_str())), (&s, Some(&span.as_str()))];
            d.record(&id, &tracing::span::Record::new(&fields.value_set(&values)));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::telemetry::logging::REQUEST_SPAN;

    /// What the log wrote, shared with the test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_inside_a_request_carries_its_trace() {
        let lines = Lines::default();
        let out = lines.clone();
        let tracing = crate::telemetry::trace::Tracing::in_process();
        let subscriber = tracing_subscriber::registry()
            .with(tracing.layer())
            .with(LineIds::default())
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(move || out.clone()),
            );
        let at = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                REQUEST_SPAN,
                trace_id = tracing::field::Empty,
                span_id = tracing::field::Empty
            );
            let _in = span.enter();
            tracing::warn!("first");
            tracing::warn!("second");
            position(&span).unwrap()
        });
        let log = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let ids = format!(
            r#"a2a{{trace_id="{}" span_id="{}"}}"#,
            at.trace_id(),
            at.span_id()
        );
        assert_eq!(log.matches(&ids).count(), 2, "{log}");
        assert!(log.contains("first") && log.contains("second"), "{log}");
    }
}
