//! A small HTTP/1.1 server on a loopback port for the tests' fakes (webhooks, an OpenID Connect
//! issuer, a token server): each request, read whole, goes to a handler.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

/// What a fake answers a request (its head and body, read whole).
pub type Handler =
    Arc<dyn Fn(hyper::http::request::Parts, Bytes) -> hyper::Response<Full<Bytes>> + Send + Sync>;

/// Serves `handler` on `127.0.0.1:port` (0: a free port) until the task is aborted.
pub async fn serve(port: u16, handler: Handler) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let handler = handler.clone();
            let service =
                hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let handler = handler.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body.collect().await.map(|b| b.to_bytes());
                        Ok::<_, std::convert::Infallible>(handler(parts, body.unwrap_or_default()))
                    }
                });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
            );
        }
    });
    (addr, task)
}

/// A JSON answer with `status`.
pub fn json(status: u16, body: &serde_json::Value) -> hyper::Response<Full<Bytes>> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}
