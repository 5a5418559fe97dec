//! A loopback OpenTelemetry collector: OTLP over HTTP (protobuf) and over gRPC, keeping every
//! span it is sent.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message;

/// One span the collector received.
#[derive(Clone, Debug)]
pub struct Got {
    /// Its resource's `service.name`.
    pub service: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root.
    pub parent_id: String,
    pub name: String,
    /// Its attributes, as text.
    pub attributes: BTreeMap<String, String>,
}

/// The spans received so far, shared with the servers.
#[derive(Clone, Default)]
pub struct Collector(Arc<Mutex<Vec<Got>>>);

impl Collector {
    /// Keeps the spans of one export.
    fn keep(&self, request: ExportTraceServiceRequest) {
        let mut got = self.0.lock().unwrap();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .map(|kv| text(kv.value.as_ref().and_then(|v| v.value.as_ref())))
                .unwrap_or_default();
            for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
                got.push(Got {
                    service: service.clone(),
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_id: hex::encode(&span.parent_span_id),
                    name: span.name,
                    attributes: span
                        .attributes
                        .into_iter()
                        .map(|kv| {
                            (
                                kv.key,
                                text(kv.value.as_ref().and_then(|v| v.value.as_ref())),
                            )
                        })
                        .collect(),
                });
            }
        }
    }

    /// Every span received.
    pub fn spans(&self) -> Vec<Got> {
        self.0.lock().unwrap().clone()
    }

    /// The spans of `trace_id` once `until` holds of them (panics after 30 s, listing them).
    pub async fn wait(&self, trace_id: &str, until: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spans: Vec<Got> = self
                .spans()
                .into_iter()
                .filter(|s| s.trace_id == trace_id)
                .collect();
            if until(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the collector did not get the spans awaited of trace {trace_id}: {spans:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Listens for OTLP over HTTP; the endpoint (`http://127.0.0.1:<port>/v1/traces`).
    pub async fn http(&self) -> String {
        self.http_on(0).await
    }

    /// Listens for OTLP over HTTP on `port` (0: a free one); the endpoint.
    pub async fn http_on(&self, port: u16) -> String {
        let this = self.clone();
        let handler = move |parts: hyper::http::request::Parts, body: bytes::Bytes| {
            let ok = parts.uri.path() == "/v1/traces"
                && parts
                    .headers
                    .get("content-type")
                    .is_some_and(|v| v == "application/x-protobuf");
            let status = match ExportTraceServiceRequest::decode(body) {
                Ok(request) if ok => {
                    this.keep(request);
                    200
                }
                _ => 400,
            };
            hyper::Response::builder()
                .status(status)
                .header("content-type", "application/x-protobuf")
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    ExportTraceServiceResponse::default().encode_to_vec(),
                )))
                .unwrap()
        };
        let (addr, task) = crate::loopback::serve(port, Arc::new(handler)).await;
        drop(task);
        format!("http://{addr}/v1/traces")
    }

    /// Listens for OTLP over gRPC; the endpoint (`http://127.0.0.1:<port>`).
    pub async fn grpc(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let service = TraceServiceServer::new(self.clone());
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        format!("http://{addr}")
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.keep(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// An attribute's value as text.
fn text(v: Option<&Any>) -> String {
    match v {
        Some(Any::StringValue(s)) => s.clone(),
        Some(Any::IntValue(i)) => i.to_string(),
        Some(Any::BoolValue(b)) => b.to_string(),
        Some(Any::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
