//! The store's health as its calls find it: every call that fails as unavailable is counted,
//! its cause kept, and logged at error at most once per `LOG_EVERY` (with how many failed
//! since the last line). The store is unhealthy from its first failure until a call succeeds
//! `HEALTHY_AFTER` after the latest failure (on a full disk reads still succeed while every
//! write fails). One store per server process, so these are the process's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::StoreError;
use crate::clock::now_ms;

/// The least time between two error lines about store failures, ms.
const LOG_EVERY: u64 = 10_000;

/// How long after its latest failure a succeeding call marks the store healthy again, ms.
const HEALTHY_AFTER: u64 = 10_000;

/// Failed calls since start.
static FAILURES: AtomicU64 = AtomicU64::new(0);
/// When the current run of failures began, ms (0: healthy).
static FAILING_SINCE: AtomicU64 = AtomicU64::new(0);
/// When the latest call failed, ms.
static FAILED_AT: AtomicU64 = AtomicU64::new(0);

/// The latest failure, and what the log has said of the failures.
struct Latest {
    cause: String,
    at: u64,
    logged_at: u64,
    unlogged: u64,
}

static LATEST: Mutex<Latest> = Mutex::new(Latest {
    cause: String::new(),
    at: 0,
    logged_at: 0,
    unlogged: 0,
});

/// Records how a store call ended.
pub fn record<T>(result: &Result<T, StoreError>) {
    match result {
        Err(StoreError::Unavailable(cause)) if cause != super::SHUT_DOWN => failed(cause),
        Ok(_) if FAILING_SINCE.load(Ordering::Relaxed) != 0 => recovered(),
        _ => {}
    }
}

fn failed(cause: &str) {
    FAILURES.fetch_add(1, Ordering::Relaxed);
    let now = now_ms();
    FAILED_AT.store(now, Ordering::Relaxed);
    let _ = FAILING_SINCE.compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    let mut l = LATEST.lock().unwrap();
    l.cause = cause.chars().take(500).collect();
    l.at = now;
    if now.saturating_sub(l.logged_at) < LOG_EVERY {
        l.unlogged += 1;
        return;
    }
    let since = std::mem::take(&mut l.unlogged);
    l.logged_at = now;
    drop(l);
    tracing::error!(cause = %cause, unlogged_failures = since, "a store call failed: requests and task writes fail until the store answers again");
}

fn recovered() {
    if now_ms().saturating_sub(FAILED_AT.load(Ordering::Relaxed)) < HEALTHY_AFTER {
        return;
    }
    let since = FAILING_SINCE.swap(0, Ordering::Relaxed);
    if since != 0 {
        tracing::info!(
            failing_ms = now_ms().saturating_sub(since),
            "the store answers again"
        );
    }
}

/// Store calls that failed since start.
pub fn failures() -> u64 {
    FAILURES.load(Ordering::Relaxed)
}

/// The store's health: whether its calls succeed, the failures, the latest cause.
pub fn view() -> Value {
    let l = LATEST.lock().unwrap();
    let since = FAILING_SINCE.load(Ordering::Relaxed);
    json!({
        "healthy": since == 0,
        "failingSince": (since != 0).then_some(since),
        "failures": failures(),
        "lastError": (!l.cause.is_empty()).then(|| l.cause.clone()),
        "lastErrorAt": (l.at != 0).then_some(l.at),
    })
}
