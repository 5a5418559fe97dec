//! Traces (docs/operating.md "Traces"): the runtime's `tracing` spans become OpenTelemetry spans,
//! kept per task in a bounded ring for the panel's waterfall whether or not they are exported, and
//! sent over OTLP when an endpoint is set. Trace context comes in with a request's `traceparent`
//! and goes out, added by the host, on model requests, outbound A2A calls and webhooks.

mod context;
mod export;
mod ring;

use std::sync::{Arc, OnceLock};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SamplingDecision, SamplingResult, SdkTracerProvider, ShouldSample,
    SpanData, SpanProcessor,
};
use serde::{Deserialize, Serialize};
use tracing_subscriber::Layer;

pub use context::{HEADERS, LineIds, continue_from, follow, inject, position, rename, short};
pub use export::check;
pub use ring::{SpanRef, SpanRing, SpanView};

/// `[telemetry]`: where traces are exported. Unset fields fall back to the standard
/// `OTEL_*` variables; with no endpoint anywhere nothing leaves the process.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TelemetrySettings {
    /// The OTLP endpoint: the full URL over HTTP (`http://collector:4318/v1/traces`), the
    /// collector's address over gRPC (`http://collector:4317`).
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc`.
    pub otlp_protocol: Option<String>,
    /// The `service.name` of the spans (default `OTEL_SERVICE_NAME`, else `a2a-edge`).
    pub service_name: Option<String>,
}

/// The spans of this process, once [`Tracing::start`] ran.
static RING: OnceLock<Arc<SpanRing>> = OnceLock::new();

/// Whether this process exports spans (set once, by the first [`Tracing`]).
static EXPORTS: OnceLock<bool> = OnceLock::new();

/// Whether spans leave the process: when not, a span no task can ever name (a card read) is
/// seen by nobody, and need not be made.
pub fn exporting() -> bool {
    EXPORTS.get().copied().unwrap_or(false)
}

/// The recent spans of each task; `None` when this process records no traces (a library user
/// that set up no [`Tracing`]).
pub fn ring() -> Option<&'static SpanRing> {
    RING.get().map(|r| &**r)
}

/// The process's trace pipeline: every span into the ring, sampled ones to the exporter.
pub struct Tracing {
    provider: SdkTracerProvider,
    /// Where spans are exported (`None`: they stay in the ring).
    pub exports_to: Option<String>,
}

impl Tracing {
    /// The pipeline `settings` (and the `OTEL_*` variables) describe; the exporter's requests
    /// leave through `exit`, on the current Tokio runtime.
    pub fn start(
        settings: &TelemetrySettings,
        exit: &crate::egress::Exit,
    ) -> anyhow::Result<Tracing> {
        let export = export::processor(settings, exit)?;
        Ok(Tracing::with(settings, export))
    }

    /// The pipeline of a process that keeps its spans for the task pages and exports none,
    /// whatever the environment says (for tests and embedders).
    pub fn in_process() -> Tracing {
        Tracing::with(&TelemetrySettings::default(), None)
    }

    fn with(settings: &TelemetrySettings, export: Option<(BatchSpanProcessor, String)>) -> Tracing {
        let ring = RING.get_or_init(|| Arc::new(SpanRing::default())).clone();
        let exports_to = export.as_ref().map(|(_, to)| to.clone());
        EXPORTS.get_or_init(|| exports_to.is_some());
        let provider = SdkTracerProvider::builder()
            .with_sampler(Recorded(
                opentelemetry_sdk::trace::Config::default().sampler,
            ))
            .with_resource(export::resource(settings))
            .with_span_processor(Pipeline {
                ring,
                export: export.map(|(p, _)| p),
            })
            .build();
        Tracing {
            provider,
            exports_to,
        }
    }

    /// The layer that turns the runtime's spans (and its warnings, as span events) into
    /// OpenTelemetry spans.
    pub fn layer<S>(&self) -> impl Layer<S>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        let tracer = self.provider.tracer("a2a-edge");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_target(false)
            .with_threads(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            .with_filter(
                tracing_subscriber::filter::filter_fn(|m| {
                    m.target().starts_with("a2a_edge")
                        && *m.level() <= tracing::Level::INFO
                        && (m.is_span() || *m.level() <= tracing::Level::WARN)
                })
                .with_max_level_hint(tracing::level_filters::LevelFilter::INFO),
            )
    }

    /// Exports what is still queued (bounded by the exporter's timeout).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("a2a-edge: the last spans were not exported: {e}");
        }
    }
}

/// The span of one store operation (the database conventions): `system` is the database
/// (`sqlite`, `postgresql`), `operation` what the request asked of it.
pub fn store_span(system: &'static str, operation: &'static str) -> tracing::Span {
    tracing::info_span!(
        "store",
        otel.name = operation,
        otel.kind = "client",
        db.system.name = system,
        db.operation.name = operation,
    )
}

/// The configured sampler, except that a span it drops is still recorded (for the ring): the
/// sampling decision says what is exported and what `traceparent` flags go out.
#[derive(Clone, Debug)]
struct Recorded(Box<dyn ShouldSample>);

impl ShouldSample for Recorded {
    fn should_sample(
        &self,
        parent: Option<&opentelemetry::Context>,
        trace_id: opentelemetry::trace::TraceId,
        name: &str,
        kind: &opentelemetry::trace::SpanKind,
        attributes: &[opentelemetry::KeyValue],
        links: &[opentelemetry::trace::Link],
    ) -> SamplingResult {
        let mut r = self
            .0
            .should_sample(parent, trace_id, name, kind, attributes, links);
        if r.decision == SamplingDecision::Drop {
            r.decision = SamplingDecision::RecordOnly;
        }
        r
    }
}

/// Where ended spans go: all to the ring, the sampled ones to the exporter.
#[derive(Debug)]
struct Pipeline {
    ring: Arc<SpanRing>,
    export: Option<BatchSpanProcessor>,
}

impl SpanProcessor for Pipeline {
    fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &opentelemetry::Context) {}

    fn on_end(&self, span: SpanData) {
        if let Some(export) = &self.export
            && span.span_context.is_sampled()
        {
            export.on_end(span.clone());
        }
        self.ring.keep(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.export.as_ref().map_or(Ok(()), |e| e.force_flush())
    }

    fn shutdown_with_timeout(&self, timeout: std::time::Duration) -> OTelSdkResult {
        self.export
            .as_ref()
            .map_or(Ok(()), |e| e.shutdown_with_timeout(timeout))
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        if let Some(e) = &mut self.export {
            e.set_resource(resource);
        }
    }
}
