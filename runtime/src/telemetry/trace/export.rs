//! The OTLP exporter: where spans go (`[telemetry]`, else the standard `OTEL_*` variables),
//! over HTTP with the runtime's own client (its CA file and proxy) or over gRPC.

use std::time::Duration;

use anyhow::{Context as _, bail};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::BatchSpanProcessor;

use super::TelemetrySettings;

/// The largest answer a collector's export response may have.
const MAX_ANSWER_BYTES: usize = 1 << 20;

/// How an exporter speaks.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Protocol {
    HttpProtobuf,
    Grpc,
}

/// The first of `vars` that is set and not empty.
fn env(vars: &[&str]) -> Option<String> {
    vars.iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
}

/// Where and how spans are exported; `None` when nowhere (no endpoint, or the standard
/// variables switch the SDK or its trace exporter off and the file sets none).
fn destination(s: &TelemetrySettings) -> anyhow::Result<Option<(String, Protocol)>> {
    let off = env(&["OTEL_SDK_DISABLED"]).is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || env(&["OTEL_TRACES_EXPORTER"]).is_some_and(|v| v.eq_ignore_ascii_case("none"));
    let (traces, general) = if off {
        (None, None)
    } else {
        (
            env(&["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]),
            env(&["OTEL_EXPORTER_OTLP_ENDPOINT"]),
        )
    };
    if s.otlp_endpoint.is_none() && traces.is_none() && general.is_none() {
        return Ok(None);
    }
    let protocol = match s.otlp_protocol.clone().or_else(|| {
        env(&[
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ])
    }) {
        None => Protocol::HttpProtobuf,
        Some(p) if p == "http/protobuf" => Protocol::HttpProtobuf,
        Some(p) if p == "grpc" => Protocol::Grpc,
        Some(p) => bail!(
            "telemetry: the OTLP protocol {p:?} is not supported; use \"http/protobuf\" or \"grpc\""
        ),
    };
    let http = protocol == Protocol::HttpProtobuf;
    // Over HTTP the general endpoint is a base the traces path goes under; a configured one
    // without a path gets it too, so `http://collector:4318` works as the collector's docs say.
    let endpoint = match (s.otlp_endpoint.clone(), traces, general) {
        (Some(e), _, _) if http => with_traces_path(&e, false),
        (Some(e), _, _) | (None, Some(e), _) => e,
        (None, None, Some(e)) if http => with_traces_path(&e, true),
        (None, None, Some(e)) => e,
        (None, None, None) => return Ok(None),
    };
    let uri = endpoint.parse::<http::Uri>().ok();
    if !uri.is_some_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
    {
        bail!(
            "telemetry: the OTLP endpoint {} must be an http:// or https:// URL",
            shown(&endpoint)
        );
    }
    Ok(Some((endpoint, protocol)))
}

/// An endpoint as logs and errors show it: without credentials or query.
fn shown(endpoint: &str) -> String {
    let without_query = endpoint.split(['?', '#']).next().unwrap_or_default();
    match without_query.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit('@').next().unwrap_or_default();
            format!("{scheme}://{host}{path}")
        }
        None => without_query
            .rsplit('@')
            .next()
            .unwrap_or_default()
            .to_owned(),
    }
}

/// Whether `s` (with the `OTEL_*` variables) describes an exporter that can start.
pub fn check(s: &TelemetrySettings) -> anyhow::Result<()> {
    destination(s).map(|_| ())
}

/// `base` with the OTLP traces path: always (`always`), else only when it has no path.
fn with_traces_path(base: &str, always: bool) -> String {
    let trimmed = base.trim_end_matches('/');
    let has_path = trimmed
        .split_once("://")
        .is_some_and(|(_, r)| r.contains('/'));
    if always || !has_path {
        format!("{trimmed}/v1/traces")
    } else {
        base.to_owned()
    }
}

/// The batch processor that exports to the configured destination, and where that is; `None`
/// when spans stay in the process.
pub fn processor(
    s: &TelemetrySettings,
    exit: &crate::egress::Exit,
) -> anyhow::Result<Option<(BatchSpanProcessor, String)>> {
    let Some((endpoint, protocol)) = destination(s)? else {
        return Ok(None);
    };
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let exporter = match protocol {
        Protocol::HttpProtobuf => {
            let http = exit
                .client(reqwest::Client::builder().timeout(Duration::from_secs(10)))
                .build()
                .context("telemetry: building the OTLP client")?;
            let client = Client {
                http,
                runtime: tokio::runtime::Handle::try_current()
                    .context("telemetry: the exporter starts inside the server's runtime")?,
            };
            builder
                .with_http()
                .with_http_client(client)
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(endpoint.clone())
                .build()
        }
        Protocol::Grpc => builder.with_tonic().with_endpoint(endpoint.clone()).build(),
    }
    .with_context(|| format!("telemetry: cannot export to {}", shown(&endpoint)))?;
    let to = match protocol {
        Protocol::HttpProtobuf => format!("{} (OTLP/HTTP)", shown(&endpoint)),
        Protocol::Grpc => format!("{} (OTLP/gRPC)", shown(&endpoint)),
    };
    Ok(Some((BatchSpanProcessor::builder(exporter).build(), to)))
}

/// The resource the spans describe: `service.name` from the settings, `OTEL_SERVICE_NAME`, or
/// `a2a-edge`, and the service's version; `OTEL_RESOURCE_ATTRIBUTES` add to it.
pub fn resource(s: &TelemetrySettings) -> opentelemetry_sdk::Resource {
    let name = s
        .service_name
        .clone()
        .or_else(|| env(&["OTEL_SERVICE_NAME"]))
        .unwrap_or_else(|| "a2a-edge".into());
    opentelemetry_sdk::Resource::builder()
        .with_service_name(name)
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}

/// The exporter's HTTP client: the runtime's own `reqwest` client, run on the server's runtime
/// (the batch processor exports from a thread of its own).
#[derive(Debug)]
struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let http = self.http.clone();
        let answer = self.runtime.spawn(async move {
            let mut r = http.execute(request).await?;
            let mut answer = http::Response::builder().status(r.status());
            let mut body = Vec::new();
            while let Some(chunk) = r.chunk().await? {
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            if let Some(h) = answer.headers_mut() {
                *h = std::mem::take(r.headers_mut());
            }
            Ok::<_, opentelemetry_http::HttpError>(answer.body(bytes::Bytes::from(body))?)
        });
        answer.await?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_endpoint_gets_the_traces_path_only_where_the_spec_says() {
        assert_eq!(
            with_traces_path("http://c:4318", false),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            with_traces_path("http://c:4318/", false),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            with_traces_path("http://c:4318/custom", false),
            "http://c:4318/custom"
        );
        assert_eq!(
            with_traces_path("http://c:4318/base/", true),
            "http://c:4318/base/v1/traces"
        );
    }

    #[test]
    fn settings_choose_the_destination_and_bad_ones_say_what_to_fix() {
        let s = |endpoint: &str, protocol: Option<&str>| TelemetrySettings {
            otlp_endpoint: Some(endpoint.into()),
            otlp_protocol: protocol.map(Into::into),
            service_name: None,
        };
        assert_eq!(
            destination(&s("http://c:4317", Some("grpc"))).unwrap(),
            Some(("http://c:4317".into(), Protocol::Grpc))
        );
        assert_eq!(
            destination(&s("https://c", None)).unwrap(),
            Some(("https://c/v1/traces".into(), Protocol::HttpProtobuf))
        );
        let e = destination(&s("c:4318", None)).unwrap_err().to_string();
        assert!(e.contains("http:// or https://"), "{e}");
        let e = destination(&s("ftp://user:s3cret@c/x?key=s3cret", None))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("ftp://c/x") && !e.contains("s3cret"),
            "no credentials in errors: {e}"
        );
        assert_eq!(
            destination(&TelemetrySettings::default()).unwrap(),
            None,
            "no endpoint, no exporter"
        );
        let e = destination(&s("http://c", Some("http/json")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("use \"http/protobuf\" or \"grpc\""), "{e}");
    }
}
