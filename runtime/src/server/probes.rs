//! Probes for orchestrators and load balancers on the public listener. `/healthz`: the process
//! serves. `/readyz`: it can do its work — the store answers a write and a read within
//! a second, every instance record is served (its component loaded, its preset known), and on a
//! shared store this node renewed its leases within a lease time and its change notices flow, and
//! the outbound connections enabled at start were each tried once.
//! Neither answer carries a secret, a store's error text or an instance id (the log has those).

use std::time::{Duration, Instant};

use hyper::Response;
use serde_json::{Value, json};

use crate::app::App;
use crate::clock::now_ms;
use crate::responses::{Body, json};
use crate::store::{KvKey, StoreError};

/// The liveness path.
const HEALTH: &str = crate::instances::PROBES[0];

/// The longest the store's write and read may take together for the node to be ready.
const BOUND: Duration = Duration::from_secs(1);

/// Whether `path` is a probe's (no instance may take it).
pub fn is_probe(path: &str) -> bool {
    crate::instances::PROBES.contains(&path)
}

/// Answers a probe: 200 when live or ready, else 503, with what was checked. Readiness is
/// checked once a second at most (callers meanwhile get the latest answer), so probing does not
/// multiply store writes; its changes are logged, not every answer.
pub async fn answer(app: &App, path: &str) -> Response<Body> {
    if path == HEALTH {
        return json(200, &json!({ "status": "ok" }));
    }
    let ((ready, body), before) = app.readiness.get(|| readiness(app)).await;
    match before {
        Some((true, _)) if !ready => tracing::warn!(checks = %body["checks"], "not ready"),
        Some((false, _)) if ready => tracing::info!("ready again"),
        _ => {}
    }
    json(if ready { 200 } else { 503 }, &body)
}

/// Whether the node is ready, and the checks that say so.
async fn readiness(app: &App) -> (bool, Value) {
    let checks = [
        ("store", store(app).await),
        ("instances", instances(app)),
        ("cluster", cluster(app)),
        ("connections", connections(app)),
    ];
    let ready = checks.iter().all(|(_, c)| c["ok"] == true);
    let body = json!({
        "status": if ready { "ready" } else { "not ready" },
        "checks": checks
            .into_iter()
            .map(|(name, check)| (name.to_owned(), check))
            .collect::<serde_json::Map<String, Value>>(),
    });
    (ready, body)
}

/// A write and a read of the runtime's own key (scope `""`, which no instance id is).
async fn store(app: &App) -> Value {
    let started = Instant::now();
    let key = KvKey {
        scope: String::new(),
        bucket: "readyz".into(),
        key: "probe".into(),
    };
    let round_trip = async {
        let written = now_ms().to_string().into_bytes();
        app.store
            .kv_set(key.clone(), written.clone(), u64::MAX)
            .await?;
        let read = app.store.kv_get(key).await?;
        Ok::<bool, StoreError>(read.is_some())
    };
    let ms = |started: Instant| started.elapsed().as_millis() as u64;
    match tokio::time::timeout(BOUND, round_trip).await {
        Ok(Ok(true)) => json!({ "ok": true, "ms": ms(started) }),
        Ok(Ok(false)) => {
            json!({ "ok": false, "ms": ms(started), "why": "a value written was not read back" })
        }
        Ok(Err(e)) => json!({ "ok": false, "ms": ms(started), "why": refused(&e) }),
        Err(_) => json!({
            "ok": false,
            "ms": ms(started),
            "why": format!("no answer within {} ms", BOUND.as_millis()),
        }),
    }
}

/// What a store refusal says here: its kind, never its cause.
fn refused(e: &StoreError) -> &'static str {
    match e {
        StoreError::Unavailable(_) => "the store is unavailable",
        _ => "the store refused the write or the read",
    }
}

/// Every instance record served (the ones that are not name an unknown component or preset;
/// the log and the control API name them, this public answer only counts them).
fn instances(app: &App) -> Value {
    let served: Vec<String> = app
        .instances()
        .iter()
        .map(|i| i.record.id.clone())
        .collect();
    let not_served = app
        .records()
        .iter()
        .filter(|r| !served.contains(&r.id))
        .count();
    json!({ "ok": not_served == 0, "served": served.len(), "notServed": not_served })
}

/// The outbound connections enabled at start, each tried once (connected or failed: a remote
/// that is down does not keep the node from serving, the control API says why it failed).
fn connections(app: &App) -> Value {
    use crate::outbound::Status;
    let o = &app.outbound;
    json!({
        "ok": o.tried(),
        "connected": o.count(Status::Connected),
        "failed": o.count(Status::Failed),
    })
}

/// On a shared store: leases renewed within a lease time, and the notices' connection up.
fn cluster(app: &App) -> Value {
    if !app.store.is_shared() {
        return json!({ "ok": true, "shared": false });
    }
    let renewed = app.services().metrics.leases_renewed_at();
    let age = now_ms().saturating_sub(renewed);
    let fresh = renewed != 0 && age <= app.config.cluster.lease_ms;
    let listening = app.store.listening().unwrap_or(false);
    json!({
        "ok": fresh && listening,
        "shared": true,
        "leaseRenewedMsAgo": age,
        "listening": listening,
    })
}
