//! A webhook receiver for push notifications.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One request a webhook received.
#[derive(Clone, Debug)]
pub struct Hit {
    /// What it answered.
    pub status: u16,
    /// The request headers.
    pub headers: hyper::HeaderMap,
    /// The body, as JSON (null when it is not JSON).
    pub body: Value,
}

/// A webhook receiver on a loopback port: records every request and answers 200, or 503 to
/// the next requests [`Webhook::fail_next`] asked for. Stops when dropped.
pub struct Webhook {
    /// Where it listens.
    pub addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    failures: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl Webhook {
    /// A receiver on a free port.
    pub async fn start() -> Webhook {
        Webhook::start_on(0).await
    }

    /// A receiver on `port`.
    pub async fn start_on(port: u16) -> Webhook {
        let hits: Arc<Mutex<Vec<Hit>>> = Arc::default();
        let failures = Arc::new(AtomicU32::new(0));
        let (h, f) = (hits.clone(), failures.clone());
        let handler = move |parts: hyper::http::request::Parts, body: bytes::Bytes| {
            let fail = f
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            let status = if fail { 503 } else { 200 };
            h.lock().unwrap().push(Hit {
                status,
                headers: parts.headers,
                body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            });
            hyper::Response::builder()
                .status(status)
                .body(http_body_util::Full::new(bytes::Bytes::new()))
                .unwrap()
        };
        let (addr, task) = crate::loopback::serve(port, Arc::new(handler)).await;
        Webhook {
            addr,
            hits,
            failures,
            task,
        }
    }

    /// `http://127.0.0.1:<port>/hook`.
    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    /// Answers the next `n` requests 503.
    pub fn fail_next(&self, n: u32) {
        self.failures.store(n, Ordering::SeqCst);
    }

    /// Every request so far.
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// The bodies it took (answered 200), in order.
    pub fn delivered(&self) -> Vec<Value> {
        let hits = self.hits();
        hits.into_iter()
            .filter(|h| h.status == 200)
            .map(|h| h.body)
            .collect()
    }

    /// Waits (at most `secs`) until it took a body whose task is in `state`; every body taken.
    pub async fn wait_for_state(&self, state: &str, secs: u64) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let taken = self.delivered();
            if taken.iter().any(|b| b["task"]["status"]["state"] == state) {
                return taken;
            }
            assert!(
                Instant::now() < deadline,
                "no notification of a {state} task within {secs} s; requests: {:?}",
                self.hits()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}
