//! Counters the runtime keeps, and their two renderings: JSON for the control API and the
//! Prometheus text format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use crate::histogram::Histogram;

/// Method names counted as themselves; anything else counts as `other` (bounded label sets).
const METHODS: &[&str] = &[
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "GetExtendedAgentCard",
    "GetAgentCard",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
];

/// Gate reasons counted as themselves.
const REASONS: &[&str] = &["skill", "rate", "quota", "timeout", "auth"];

/// The runtime's counters.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, &'static str, String), u64>>,
    rejections: Mutex<BTreeMap<&'static str, u64>>,
    /// SendMessage latency, request in to answer out.
    pub send_latency: Histogram,
}

/// Counts that live elsewhere, gathered when a snapshot is taken.
pub struct Gauges {
    /// Tasks by instance and state name.
    pub tasks: Vec<(String, &'static str, u64)>,
    /// Open SSE streams.
    pub open_streams: usize,
    /// Component instantiations.
    pub instantiations: u64,
    /// Invocations that trapped or hit a limit.
    pub traps: u64,
    /// Database and WAL bytes.
    pub store_bytes: u64,
    /// Attachment bytes.
    pub attachment_bytes: u64,
    /// Live sessions.
    pub live_sessions: usize,
}

impl Metrics {
    /// Counts one request; unknown method names count as `other`, outcomes are capped.
    pub fn request(&self, instance: &str, method: &str, outcome: &str) {
        let method = METHODS.iter().find(|m| **m == method).copied().unwrap_or("other");
        let outcome: String = outcome.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_').take(40).collect();
        *self.requests.lock().unwrap().entry((instance.to_owned(), method, outcome)).or_default() += 1;
    }

    /// Counts one gate rejection.
    pub fn rejection(&self, reason: &str) {
        let reason = REASONS.iter().find(|r| **r == reason).copied().unwrap_or("other");
        *self.rejections.lock().unwrap().entry(reason).or_default() += 1;
    }

    /// Records the latency of one SendMessage.
    pub fn send_latency(&self, d: Duration) {
        self.send_latency.record(d);
    }

    /// The JSON snapshot.
    pub fn json(&self, g: &Gauges) -> Value {
        let requests: Vec<Value> = self.requests.lock().unwrap().iter().map(|((i, m, o), n)| json!({ "instance": i, "method": m, "outcome": o, "count": n })).collect();
        let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, s, n) in &g.tasks {
            *by_state.entry(s).or_default() += n;
        }
        let active: u64 = by_state.iter().filter(|(s, _)| is_active(s)).map(|(_, n)| n).sum();
        let h = &self.send_latency;
        json!({
            "requests": requests,
            "tasksByState": by_state,
            "activeTasks": active,
            "openStreams": g.open_streams,
            "liveSessions": g.live_sessions,
            "gateRejections": *self.rejections.lock().unwrap(),
            "sendMessageLatency": { "count": h.count(), "p50Us": h.quantile_us(0.5), "p90Us": h.quantile_us(0.9), "p99Us": h.quantile_us(0.99) },
            "components": { "instantiations": g.instantiations, "traps": g.traps },
            "store": { "bytes": g.store_bytes, "attachmentBytes": g.attachment_bytes },
        })
    }

    /// The Prometheus text exposition format (0.0.4).
    pub fn prometheus(&self, g: &Gauges) -> String {
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, String)>| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let requests = self.requests.lock().unwrap().iter().map(|((i, m, o), n)| (labels(&[("instance", i), ("method", m), ("outcome", o)]), n.to_string())).collect();
        family("a2a_edge_requests_total", "counter", "A2A requests by instance, method and outcome.", requests);
        let tasks = g.tasks.iter().map(|(i, s, n)| (labels(&[("instance", i), ("state", s)]), n.to_string())).collect();
        family("a2a_edge_tasks", "gauge", "Stored tasks by instance and state.", tasks);
        let active: u64 = g.tasks.iter().filter(|(_, s, _)| is_active(s)).map(|(_, _, n)| n).sum();
        family("a2a_edge_active_tasks", "gauge", "Tasks not yet in a terminal state.", vec![(String::new(), active.to_string())]);
        family("a2a_edge_open_streams", "gauge", "Open SSE streams.", vec![(String::new(), g.open_streams.to_string())]);
        family("a2a_edge_live_sessions", "gauge", "Live agent sessions.", vec![(String::new(), g.live_sessions.to_string())]);
        let rejections = self.rejections.lock().unwrap().iter().map(|(r, n)| (labels(&[("reason", r)]), n.to_string())).collect();
        family("a2a_edge_gate_rejections_total", "counter", "Requests or tasks refused by the gate, by reason.", rejections);
        let h = &self.send_latency;
        let _ = writeln!(out, "# HELP a2a_edge_send_message_seconds SendMessage latency (quantiles are bucket upper bounds).\n# TYPE a2a_edge_send_message_seconds summary");
        for q in [0.5, 0.9, 0.99] {
            let v = h.quantile_us(q).map_or("NaN".into(), |us| (us as f64 / 1e6).to_string());
            let _ = writeln!(out, "a2a_edge_send_message_seconds{{quantile=\"{q}\"}} {v}");
        }
        let _ = writeln!(out, "a2a_edge_send_message_seconds_sum {}\na2a_edge_send_message_seconds_count {}", h.sum_us() as f64 / 1e6, h.count());
        let mut family = |name: &str, kind: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        };
        family("a2a_edge_component_instantiations_total", "counter", "Component instances created.", g.instantiations);
        family("a2a_edge_component_traps_total", "counter", "Component invocations that trapped or hit a limit.", g.traps);
        family("a2a_edge_store_bytes", "gauge", "Database and WAL size.", g.store_bytes);
        family("a2a_edge_attachment_bytes", "gauge", "Stored attachment bytes.", g.attachment_bytes);
        out
    }
}

fn is_active(state: &str) -> bool {
    matches!(state, "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING" | "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED")
}

/// `{a="x",b="y"}` with values escaped as the format requires.
fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))).collect();
    format!("{{{}}}", inner.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_both_formats_with_bounded_labels() {
        let m = Metrics::default();
        m.request("a", "SendMessage", "ok");
        m.request("a", "SendMessage", "ok");
        m.request("a", "Bogus\"Method", "x\ny");
        m.rejection("rate");
        m.send_latency(Duration::from_micros(1500));
        let g = Gauges {
            tasks: vec![("a".into(), "TASK_STATE_WORKING", 2), ("a".into(), "TASK_STATE_COMPLETED", 3)],
            open_streams: 1,
            instantiations: 4,
            traps: 0,
            store_bytes: 10,
            attachment_bytes: 0,
            live_sessions: 1,
        };
        let j = m.json(&g);
        assert_eq!(j["activeTasks"], 2);
        assert_eq!(j["gateRejections"]["rate"], 1);
        assert_eq!(j["requests"][0]["method"], "SendMessage");
        assert_eq!(j["requests"][0]["count"], 2);
        let p = m.prometheus(&g);
        assert!(p.contains("a2a_edge_requests_total{instance=\"a\",method=\"SendMessage\",outcome=\"ok\"} 2"), "{p}");
        assert!(p.contains("method=\"other\",outcome=\"xy\""), "{p}");
        assert!(p.contains("a2a_edge_active_tasks 2"));
        assert!(p.contains("a2a_edge_send_message_seconds_count 1"));
        assert!(p.contains("a2a_edge_send_message_seconds_sum 0.0015"), "{p}");
        assert!(p.lines().all(|l| l.starts_with('#') || l.rsplit_once(' ').is_some_and(|(_, v)| v == "NaN" || v.parse::<f64>().is_ok())), "{p}");
    }
}
