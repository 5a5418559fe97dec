//! A local OpenAI-compatible chat-completions server for the model-backed tests (the `openai`
//! backend and agents' `llm` grant).

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// The secret the model server takes, under [`KEY_ENV`].
pub const KEY: &str = "test-llm-key";

/// A running model server.
pub struct Model {
    /// Its API base URL, `http://127.0.0.1:<port>/v1`.
    pub base: String,
    /// Every request body it received, in order.
    pub seen: Arc<Mutex<Vec<Value>>>,
    /// Set once a slow stream's client went away.
    pub slow_closed: Arc<AtomicBool>,
    /// The `traceparent` of every request (empty when it had none), in order.
    traces: Arc<Mutex<Vec<String>>>,
}

impl Model {
    /// The request bodies so far.
    pub fn requests(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }

    /// The `traceparent` headers of the requests so far (empty: none).
    pub fn traceparents(&self) -> Vec<String> {
        self.traces.lock().unwrap().clone()
    }

    /// Waits until `n` requests arrived (panics after 20 s).
    pub async fn wait_requests(&self, n: usize) {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while self.seen.lock().unwrap().len() < n {
            assert!(
                std::time::Instant::now() < until,
                "the model got {} requests, not {n}",
                self.requests().len()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Whether a slow stream's client left within `secs`.
    pub async fn slow_stream_closed_within(&self, secs: u64) -> bool {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while !self.slow_closed.load(Ordering::SeqCst) {
            if std::time::Instant::now() > until {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        true
    }
}

/// A chat-completions server: answers a tool result with `The remote said: <result>`, a prompt
/// containing "use the tool" with a streamed tool call (prompt "ping"), a prompt starting "slow"
/// with one chunk and then nothing until the client leaves, anything else with
/// `You said: <prompt>`. Records every request body.
pub async fn model() -> Model {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let slow_closed: Arc<AtomicBool> = Arc::default();
    let closed = slow_closed.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let log = seen.clone();
    let traces: Arc<Mutex<Vec<String>>> = Arc::default();
    let traced = traces.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let log = log.clone();
            let closed = closed.clone();
            let traced = traced.clone();
            let service = hyper::service::service_fn(
                move |req: hyper::Request<hyper::body::Incoming>| {
                    let log = log.clone();
                    let closed = closed.clone();
                    let traced = traced.clone();
                    async move {
                        let traceparent = req
                            .headers()
                            .get("traceparent")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        traced.lock().unwrap().push(traceparent);
                        let authorized = req
                            .headers()
                            .get("authorization")
                            .is_some_and(|v| v == format!("Bearer {KEY}").as_str());
                        let given = req
                            .headers()
                            .get("authorization")
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        let path_ok = req.uri().path() == "/v1/chat/completions";
                        let body: Value = serde_json::from_slice(
                            &req.into_body().collect().await.unwrap().to_bytes(),
                        )
                        .unwrap_or(Value::Null);
                        log.lock().unwrap().push(body.clone());
                        if !authorized || !path_ok {
                            return Ok::<_, Infallible>(
                                hyper::Response::builder()
                                    .status(401)
                                    .body(
                                        Full::new(Bytes::from(format!(
                                            "{{\"error\":{{\"message\":\"bad key: {given}\"}}}}"
                                        )))
                                        .boxed(),
                                    )
                                    .unwrap(),
                            );
                        }
                        let messages = body["messages"].as_array().cloned().unwrap_or_default();
                        let last = messages.last().cloned().unwrap_or(Value::Null);
                        let chunk = |delta: Value, finish: Option<&str>| {
                            format!(
                                "data: {}\n\n",
                                json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                            )
                        };
                        let mut sse = String::new();
                        if last["content"].as_str().unwrap_or("").starts_with("slow") {
                            let (tx, rx) = tokio::sync::mpsc::channel::<
                                Result<hyper::body::Frame<Bytes>, Infallible>,
                            >(4);
                            tx.send(Ok(hyper::body::Frame::data(Bytes::from(chunk(
                                json!({"content": "thinking"}),
                                None,
                            )))))
                            .await
                            .unwrap();
                            tokio::spawn(async move {
                                tx.closed().await;
                                closed.store(true, Ordering::SeqCst);
                            });
                            let body =
                                http_body_util::StreamBody::new(tokio_stream_from(rx)).boxed();
                            return Ok(hyper::Response::builder()
                                .header("content-type", "text/event-stream")
                                .body(body)
                                .unwrap());
                        }
                        if last["role"] == "tool" {
                            sse += &chunk(json!({"content": "The remote said: "}), None);
                            sse += &chunk(json!({"content": last["content"]}), Some("stop"));
                        } else if last["content"]
                            .as_str()
                            .unwrap_or("")
                            .contains("use the tool")
                        {
                            let tool = body["tools"][0]["function"]["name"]
                                .as_str()
                                .unwrap_or("none")
                                .to_owned();
                            sse += &chunk(json!({"content": "Let me ask. "}), None);
                            sse += &chunk(
                                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": tool, "arguments": "{\"prom"}}]}),
                                None,
                            );
                            sse += &chunk(
                                json!({"tool_calls": [{"index": 0, "function": {"arguments": "pt\": \"ping\"}"}}]}),
                                Some("tool_calls"),
                            );
                        } else {
                            sse += &chunk(json!({"content": "You said: "}), None);
                            sse += &chunk(json!({"content": last["content"]}), Some("stop"));
                        }
                        sse += "data: [DONE]\n\n";
                        Ok(hyper::Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(Full::new(Bytes::from(sse)).boxed())
                            .unwrap())
                    }
                },
            );
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    Model {
        base,
        seen,
        slow_closed,
        traces,
    }
}

/// A receiver as a stream of body frames.
fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<hyper::body::Frame<Bytes>, Infallible>>,
) -> impl futures_util::Stream<Item = Result<hyper::body::Frame<Bytes>, Infallible>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// The secret name presets read the model key from.
pub const KEY_ENV: &str = "A2A_TEST_LLM_KEY";

/// Writes `key` as [`KEY_ENV`] into the data directory's credentials file.
pub fn hold_key(dir: &std::path::Path, key: &str) {
    use std::os::unix::fs::PermissionsExt;
    let file = dir.join("credentials.json");
    std::fs::write(&file, json!({ KEY_ENV: key }).to_string()).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
}
