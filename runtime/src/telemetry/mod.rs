//! What the runtime counts, and its two renderings: JSON for the control API, and the
//! OpenMetrics text format (which Prometheus reads) through `prometheus-client`.

pub mod access;
mod histogram;
pub mod logging;
pub mod series;
pub mod trace;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelValue, EncodeMetric, LabelValueEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use serde_json::{Value, json};

pub use histogram::Histogram;

/// What a request is counted by: instance, method, protocol version, outcome.
type RequestKey = (String, &'static str, &'static str, String);

/// Method names counted as themselves (the A2A methods, then the public card); anything else
/// counts as `other` (bounded label sets).
fn counted() -> impl Iterator<Item = &'static str> {
    a2a_protocol::methods::NAMES
        .into_iter()
        .chain(["GetAgentCard"])
}

/// A method as counted and traced: its name as called (an A2A 0.3 name as its 1.0 successor),
/// `other` outside the bounded set; and its protocol version.
pub fn method_label(method: &str) -> (&'static str, &'static str) {
    let (method, version) = a2a_protocol::compat03::as_1_0(method);
    (counted().find(|m| *m == method).unwrap_or("other"), version)
}

/// An outcome as counted and traced: its first 40 letters, digits and underscores.
pub fn outcome_label(outcome: &str) -> String {
    outcome
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(40)
        .collect()
}

/// Whether an outcome counts as an error (a card answered 304 does not).
fn is_error(outcome: &str) -> bool {
    !matches!(outcome, "ok" | "not_modified")
}

/// How many names [`counted`] gives.
const COUNTED: usize = a2a_protocol::methods::NAMES.len() + 1;

/// Gate reasons counted as themselves.
const REASONS: &[&str] = &["skill", "rate", "quota", "timeout", "auth", "streams"];

/// How push-notification attempts end: delivered (2xx), retried later, given up on (too many
/// attempts or too old), refused by the egress guard.
pub const PUSH_OUTCOMES: [&str; 4] = ["delivered", "retried", "failed", "refused"];

/// How agent turns end.
pub const AGENT_OUTCOMES: [&str; 6] = [
    "completed",
    "input_required",
    "auth_required",
    "failed",
    "unavailable",
    "canceled",
];

/// What agent turns took (docs/agents.md).
#[derive(Debug, Default)]
struct AgentCounts {
    /// Turns by outcome, in [`AGENT_OUTCOMES`] order.
    turns: [AtomicU64; AGENT_OUTCOMES.len()],
    /// Computing time per turn.
    cpu: Histogram,
    /// Memory high-water marks: their sum over turns, and the highest.
    memory: [AtomicU64; 2],
    /// Model tokens: prompt, completion.
    tokens: [AtomicU64; 2],
}

/// Agent turns by outcome, the [sum, max] of their memory high-water marks, the [prompt,
/// completion] tokens.
type AgentTotals = (
    [(&'static str, u64); AGENT_OUTCOMES.len()],
    [u64; 2],
    [u64; 2],
);

/// One agent turn's account, for [`Metrics::agent_turn`].
pub struct AgentTurn {
    /// One of [`AGENT_OUTCOMES`].
    pub outcome: &'static str,
    /// Computing time.
    pub cpu: std::time::Duration,
    /// The most memory it held, bytes.
    pub peak_memory: u64,
    /// Model tokens: prompt, completion.
    pub tokens: (u64, u64),
}

/// The runtime's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<RequestKey, u64>>,
    rejections: Mutex<BTreeMap<&'static str, u64>>,
    latency: Latencies,
    /// Time to create a request's store and instantiate its component.
    pub instantiate_time: Histogram,
    traps: AtomicU64,
    host_calls: AtomicU64,
    /// Requests served on a kept (warm) instance instead of a new one.
    reuses: AtomicU64,
    /// Push attempts by outcome, in [`PUSH_OUTCOMES`] order.
    pushes: [AtomicU64; 4],
    /// Notifications in the outbox at the delivery worker's latest look.
    push_pending: AtomicU64,
    /// Tasks of lost nodes this node settled FAILED, and renewals of its leases that failed.
    cluster: [AtomicU64; 2],
    /// When this node's leases were last renewed, ms (0: no renewal runs here).
    leases_renewed_at: AtomicU64,
    agents: AgentCounts,
    /// The last 15 minutes of traffic.
    series: series::Series,
}

/// Latency by method, request in to answer out (head sent, for streams): one histogram per
/// name of [`counted`], then `other`.
#[derive(Debug)]
struct Latencies(Box<[Histogram]>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies((0..=COUNTED).map(|_| Histogram::default()).collect())
    }
}

impl Latencies {
    /// The histogram of `method`.
    fn of(&self, method: &str) -> &Histogram {
        &self.0[counted().position(|m| m == method).unwrap_or(COUNTED)]
    }

    /// The histograms with anything recorded, by method name.
    fn used(&self) -> impl Iterator<Item = (&'static str, &Histogram)> {
        counted()
            .chain(["other"])
            .zip(self.0.iter())
            .filter(|(_, h)| h.count() > 0)
    }
}

/// Counts that live elsewhere, gathered when a snapshot is taken.
#[derive(Clone, Debug, Default)]
pub struct Gauges {
    /// Tasks by instance and state name.
    pub tasks: Vec<(String, &'static str, u64)>,
    /// Open SSE streams.
    pub open_streams: usize,
    /// Database and WAL bytes.
    pub store_bytes: u64,
    /// Attachment bytes.
    pub attachment_bytes: u64,
    /// Live sessions.
    pub live_sessions: usize,
    /// SQL statements the store ran since start (0 for a store that runs none).
    pub store_statements: u64,
    /// Store calls that failed since start.
    pub store_failures: u64,
    /// Push notifications the outbox gave up at its bound (counted as failed).
    pub push_dropped: u64,
}

impl Metrics {
    /// Counts one request by its method as called (an A2A 0.3 name counts as its 1.0
    /// successor, of version 0.3); unknown method names count as `other`, outcomes are capped.
    pub fn request(&self, instance: &str, method: &str, outcome: &str) {
        let (method, version) = method_label(method);
        let outcome = outcome_label(outcome);
        *self
            .requests
            .lock()
            .unwrap()
            .entry((instance.to_owned(), method, version, outcome))
            .or_default() += 1;
    }

    /// Counts one gate rejection.
    pub fn rejection(&self, reason: &str) {
        let reason = REASONS
            .iter()
            .find(|r| **r == reason)
            .copied()
            .unwrap_or("other");
        *self.rejections.lock().unwrap().entry(reason).or_default() += 1;
    }

    /// Gate rejections by reason.
    pub fn rejections(&self) -> BTreeMap<&'static str, u64> {
        self.rejections.lock().unwrap().clone()
    }

    /// Records how long one request of `method` took.
    pub fn latency(&self, method: &str, d: Duration) {
        self.latency
            .of(a2a_protocol::compat03::as_1_0(method).0)
            .record(d);
    }

    /// SendMessage's latency histogram.
    pub fn send_latency(&self) -> &Histogram {
        self.latency.of("SendMessage")
    }

    /// Records one instantiation and how long it took.
    pub fn instantiated(&self, d: Duration) {
        self.instantiate_time.record(d);
    }

    /// Counts a request served on a kept instance.
    pub fn reused(&self) {
        self.reuses.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests served on a kept instance.
    pub fn reuses(&self) -> u64 {
        self.reuses.load(Ordering::Relaxed)
    }

    /// Counts an invocation that trapped or hit a limit.
    pub fn trapped(&self) {
        self.traps.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a push attempt that ended as `outcome` (one of [`PUSH_OUTCOMES`]).
    pub fn push_attempt(&self, outcome: &str) {
        if let Some(i) = PUSH_OUTCOMES.iter().position(|o| *o == outcome) {
            self.pushes[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts `tasks` of lost nodes this node settled FAILED.
    pub fn failed_over(&self, tasks: u64) {
        self.cluster[0].fetch_add(tasks, Ordering::Relaxed);
    }

    /// Counts a renewal of this node's leases that failed.
    pub fn lease_renewal_failed(&self) {
        self.cluster[1].fetch_add(1, Ordering::Relaxed);
    }

    /// Records that this node's leases were renewed (or the renewals began) at `now` ms.
    pub fn leases_renewed(&self, now: u64) {
        self.leases_renewed_at.store(now, Ordering::Relaxed);
    }

    /// When this node's leases were last renewed, ms (0: no renewal runs here).
    pub fn leases_renewed_at(&self) -> u64 {
        self.leases_renewed_at.load(Ordering::Relaxed)
    }

    fn cluster(&self) -> [u64; 2] {
        std::array::from_fn(|i| self.cluster[i].load(Ordering::Relaxed))
    }

    /// Records how many notifications wait in the outbox.
    pub fn push_pending(&self, n: u64) {
        self.push_pending.store(n, Ordering::Relaxed);
    }

    /// Push notifications by outcome (`dropped` given up at the outbox's bound count as
    /// failed), and the outbox size.
    fn pushes_with(&self, dropped: u64) -> ([(&'static str, u64); 4], u64) {
        let counts = std::array::from_fn(|i| {
            let n = self.pushes[i].load(Ordering::Relaxed);
            (
                PUSH_OUTCOMES[i],
                n + if PUSH_OUTCOMES[i] == "failed" {
                    dropped
                } else {
                    0
                },
            )
        });
        (counts, self.push_pending.load(Ordering::Relaxed))
    }

    /// Counts one agent turn.
    pub fn agent_turn(&self, t: AgentTurn) {
        let a = &self.agents;
        let i = AGENT_OUTCOMES
            .iter()
            .position(|o| *o == t.outcome)
            .unwrap_or(3);
        a.turns[i].fetch_add(1, Ordering::Relaxed);
        a.cpu.record(t.cpu);
        a.memory[0].fetch_add(t.peak_memory, Ordering::Relaxed);
        a.memory[1].fetch_max(t.peak_memory, Ordering::Relaxed);
        a.tokens[0].fetch_add(t.tokens.0, Ordering::Relaxed);
        a.tokens[1].fetch_add(t.tokens.1, Ordering::Relaxed);
    }

    /// What agent turns took so far.
    fn agent_counts(&self) -> AgentTotals {
        let a = &self.agents;
        let load = |x: &AtomicU64| x.load(Ordering::Relaxed);
        (
            std::array::from_fn(|i| (AGENT_OUTCOMES[i], load(&a.turns[i]))),
            [load(&a.memory[0]), load(&a.memory[1])],
            [load(&a.tokens[0]), load(&a.tokens[1])],
        )
    }

    /// Invocations that trapped or hit a limit.
    pub fn traps(&self) -> u64 {
        self.traps.load(Ordering::Relaxed)
    }

    /// Counts the host functions (WASI and `a2a:edge`) one invocation called.
    pub fn host_calls(&self, n: u64) {
        self.host_calls.fetch_add(n, Ordering::Relaxed);
    }

    /// Samples the traffic since the previous call (every [`series::STEP`]) at `now_ms`.
    pub fn sample(&self, now_ms: u64) {
        let (mut requests, mut errors) = (0, 0);
        for ((_, _, _, outcome), n) in self.requests.lock().unwrap().iter() {
            requests += n;
            if is_error(outcome) {
                errors += n;
            }
        }
        let mut buckets: Vec<u64> = Vec::new();
        for (_, h) in self.latency.used() {
            let counts = h.buckets();
            buckets.resize(counts.len(), 0);
            for (sum, n) in buckets.iter_mut().zip(counts) {
                *sum += n;
            }
        }
        self.series.sample(series::Reading {
            at_ms: now_ms,
            requests,
            errors,
            buckets,
        });
    }

    /// The JSON snapshot.
    pub fn json(&self, g: &Gauges) -> Value {
        let requests: Vec<Value> = self
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|((i, m, v, o), n)| json!({ "instance": i, "method": m, "version": v, "outcome": o, "count": n }))
            .collect();
        let mut by_state: BTreeMap<&str, u64> = BTreeMap::new();
        for (_, s, n) in &g.tasks {
            *by_state.entry(s).or_default() += n;
        }
        let h = self.send_latency();
        let by_method: serde_json::Map<String, Value> = self
            .latency
            .used()
            .map(|(m, h)| (m.to_owned(), h.summary()))
            .collect();
        let (pushes, pending) = self.pushes_with(g.push_dropped);
        let mut push: serde_json::Map<String, Value> = pushes
            .iter()
            .map(|(o, n)| ((*o).to_owned(), json!(n)))
            .collect();
        push.insert("pending".into(), json!(pending));
        let [failed_over, renewal_failures] = self.cluster();
        let (turns, [memory_sum, memory_max], [prompt, completion]) = self.agent_counts();
        let turn_count: u64 = turns.iter().map(|(_, n)| n).sum();
        let agents = json!({
            "turns": turns.iter().map(|(o, n)| ((*o).to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "cpuMs": self.agents.cpu.summary(),
            "memoryPeakBytes": { "max": memory_max, "mean": memory_sum.checked_div(turn_count).unwrap_or(0) },
            "tokens": { "prompt": prompt, "completion": completion },
        });
        json!({
            "requests": requests,
            "push": push,
            "tasksByState": by_state,
            "activeTasks": active(&g.tasks),
            "openStreams": g.open_streams,
            "liveSessions": g.live_sessions,
            "gateRejections": self.rejections(),
            "sendMessageLatency": { "count": h.count(), "p50Us": h.quantile_us(0.5), "p90Us": h.quantile_us(0.9), "p99Us": h.quantile_us(0.99) },
            "latencyByMethod": by_method,
            "components": { "instantiations": self.instantiate_time.count(), "reuses": self.reuses(), "traps": self.traps(), "hostCalls": self.host_calls.load(Ordering::Relaxed) },
            "store": { "bytes": g.store_bytes, "attachmentBytes": g.attachment_bytes, "statements": g.store_statements, "failures": g.store_failures },
            "log": { "droppedLines": logging::dropped_lines() },
            "cluster": { "failedOver": failed_over, "leaseRenewalFailures": renewal_failures },
            "agents": agents,
            "series": { "stepSeconds": series::STEP.as_secs(), "points": self.series.points() },
        })
    }

    /// The OpenMetrics text exposition (`application/openmetrics-text; version=1.0.0`).
    pub fn openmetrics(&self, g: &Gauges) -> String {
        let scrape = Scrape {
            requests: self.requests.lock().unwrap().clone(),
            rejections: self.rejections(),
            gauges: g.clone(),
            latency: self.latency.used().map(|(m, h)| (m, h.clone())).collect(),
            instantiate_time: self.instantiate_time.clone(),
            traps: self.traps(),
            reuses: self.reuses(),
            host_calls: self.host_calls.load(Ordering::Relaxed),
            pushes: self.pushes_with(g.push_dropped),
            cluster: self.cluster(),
            agents: self.agent_counts(),
            agent_cpu: self.agents.cpu.clone(),
        };
        let mut registry = Registry::with_prefix("a2a_edge");
        registry.register_collector(Box::new(scrape));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String never fails");
        out
    }
}

/// Tasks in an active state.
fn active(tasks: &[(String, &'static str, u64)]) -> u64 {
    tasks
        .iter()
        .filter(|(_, s, _)| a2a_protocol::TaskState::from_name(s).is_some_and(|s| s.is_active()))
        .map(|(_, _, n)| n)
        .sum()
}

/// A label value escaped as the text format requires (`\\`, `\"`, `\n`): prometheus-client
/// writes label values as they are.
struct Escaped<'a>(&'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// The values of one scrape, encoded as metric families.
#[derive(Debug)]
struct Scrape {
    requests: BTreeMap<RequestKey, u64>,
    rejections: BTreeMap<&'static str, u64>,
    gauges: Gauges,
    latency: Vec<(&'static str, Histogram)>,
    instantiate_time: Histogram,
    traps: u64,
    reuses: u64,
    host_calls: u64,
    pushes: ([(&'static str, u64); 4], u64),
    cluster: [u64; 2],
    agents: AgentTotals,
    agent_cpu: Histogram,
}

impl Scrape {
    /// The requests and gate rejections, by their labels.
    fn counters(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let help = "A2A requests by instance, method, protocol version and outcome.";
        let mut requests = e.encode_descriptor("requests", help, None, MetricType::Counter)?;
        for ((i, m, v, o), n) in &self.requests {
            let labels = [
                ("instance", Escaped(i)),
                ("method", Escaped(m)),
                ("version", Escaped(v)),
                ("outcome", Escaped(o)),
            ];
            requests
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
        let help = "Requests or tasks refused by the gate, by reason.";
        let mut rejections =
            e.encode_descriptor("gate_rejections", help, None, MetricType::Counter)?;
        for (r, n) in &self.rejections {
            rejections
                .encode_family(&[("reason", *r)])?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
        let help = "Agent component turns, by outcome.";
        let mut turns = e.encode_descriptor("agent_turns", help, None, MetricType::Counter)?;
        for (o, n) in &self.agents.0 {
            turns
                .encode_family(&[("outcome", *o)])?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
        let help = "Model tokens agent components used, by kind.";
        let mut tokens = e.encode_descriptor("agent_tokens", help, None, MetricType::Counter)?;
        for (kind, n) in [
            ("prompt", self.agents.2[0]),
            ("completion", self.agents.2[1]),
        ] {
            tokens
                .encode_family(&[("kind", kind)])?
                .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        }
        let help = "Push-notification delivery attempts, by outcome.";
        let mut pushes = e.encode_descriptor("push_attempts", help, None, MetricType::Counter)?;
        for (o, n) in &self.pushes.0 {
            pushes
                .encode_family(&[("outcome", *o)])?
                .encode_counter::<NoLabelSet, _, u64>(n, None)?;
        }
        let counts = [
            (
                "component_traps",
                "Component invocations that trapped or hit a limit.",
                self.traps,
            ),
            (
                "component_reuses",
                "Requests served on a kept instance of the built-in component.",
                self.reuses,
            ),
            (
                "component_host_calls",
                "Host functions (WASI and a2a:edge) called by components.",
                self.host_calls,
            ),
            (
                "store_statements",
                "SQL statements the store ran.",
                self.gauges.store_statements,
            ),
            (
                "store_failures",
                "Store calls that failed (the database was unavailable or refused a write).",
                self.gauges.store_failures,
            ),
            (
                "log_lines_dropped",
                "Log lines dropped: refused by the log output or over the log queue's bound.",
                logging::dropped_lines(),
            ),
            (
                "tasks_failed_over",
                "Running tasks of lost nodes (lease run out) this node settled FAILED.",
                self.cluster[0],
            ),
            (
                "lease_renewal_failures",
                "Renewals of this node's task leases that failed.",
                self.cluster[1],
            ),
        ];
        for (name, help, n) in counts {
            e.encode_descriptor(name, help, None, MetricType::Counter)?
                .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        }
        Ok(())
    }

    /// The counts that live elsewhere.
    fn gauges(&self, e: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let g = &self.gauges;
        let mut tasks = e.encode_descriptor(
            "tasks",
            "Stored tasks by instance and state.",
            None,
            MetricType::Gauge,
        )?;
        for (i, s, n) in &g.tasks {
            tasks
                .encode_family(&[("instance", Escaped(i)), ("state", Escaped(s))])?
                .encode_gauge(n)?;
        }
        let plain: [(&str, &str, Option<&Unit>, u64); 7] = [
            (
                "agent_turn_memory_peak",
                "The most memory one agent turn held.",
                Some(&Unit::Bytes),
                self.agents.1[1],
            ),
            (
                "push_pending",
                "Push notifications waiting in the outbox.",
                None,
                self.pushes.1,
            ),
            (
                "active_tasks",
                "Tasks not yet in a terminal state.",
                None,
                active(&g.tasks),
            ),
            (
                "open_streams",
                "Open SSE streams.",
                None,
                g.open_streams as u64,
            ),
            (
                "live_sessions",
                "Live agent sessions.",
                None,
                g.live_sessions as u64,
            ),
            (
                "store",
                "Database and WAL size.",
                Some(&Unit::Bytes),
                g.store_bytes,
            ),
            (
                "attachment",
                "Stored attachment bytes.",
                Some(&Unit::Bytes),
                g.attachment_bytes,
            ),
        ];
        for (name, help, unit, v) in plain {
            e.encode_descriptor(name, help, unit, MetricType::Gauge)?
                .encode_gauge(&v)?;
        }
        Ok(())
    }
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.counters(&mut e)?;
        self.gauges(&mut e)?;
        let help = "SendMessage latency, request in to answer out.";
        let send = self.latency.iter().find(|(m, _)| *m == "SendMessage");
        send.map(|(_, h)| h.clone())
            .unwrap_or_default()
            .encode(e.encode_descriptor(
                "send_message",
                help,
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?)?;
        let help = "A2A request latency by method, request in to answer out (head, for streams).";
        let mut family =
            e.encode_descriptor("request", help, Some(&Unit::Seconds), MetricType::Histogram)?;
        for (m, h) in &self.latency {
            h.encode(family.encode_family(&[("method", *m)])?)?;
        }
        let help = "Time to prepare a store and instantiate a component.";
        self.instantiate_time.encode(e.encode_descriptor(
            "component_instantiation",
            help,
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?)?;
        let help = "Computing time of agent component turns (10 ms resolution).";
        self.agent_cpu.encode(e.encode_descriptor(
            "agent_turn_cpu",
            help,
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_both_formats_with_bounded_labels() {
        let m = Metrics::default();
        m.request("a", "SendMessage", "ok");
        m.request("a", "SendMessage", "ok");
        m.request("a\"b\\c\nd", "Bogus\"Method", "x\ny");
        m.request("z", "tasks/get", "ok");
        m.rejection("rate");
        m.latency("SendMessage", Duration::from_micros(1500));
        m.latency("GetTask", Duration::from_micros(90));
        m.instantiated(Duration::from_micros(300));
        m.host_calls(40);
        m.reused();
        m.push_attempt("retried");
        m.push_attempt("delivered");
        m.push_attempt("bogus");
        m.push_pending(3);
        m.failed_over(1);
        for (outcome, peak) in [("completed", 100u64), ("failed", 300)] {
            m.agent_turn(AgentTurn {
                outcome,
                cpu: Duration::from_millis(20),
                peak_memory: peak,
                tokens: (5, 7),
            });
        }
        let g = Gauges {
            tasks: vec![
                ("a".into(), "TASK_STATE_WORKING", 2),
                ("a".into(), "TASK_STATE_COMPLETED", 3),
            ],
            open_streams: 1,
            store_bytes: 10,
            attachment_bytes: 0,
            live_sessions: 1,
            store_statements: 9,
            store_failures: 4,
            push_dropped: 2,
        };
        let j = m.json(&g);
        assert_eq!(j["components"]["hostCalls"], 40);
        assert_eq!(j["store"]["statements"], 9);
        assert_eq!(j["store"]["failures"], 4);
        assert_eq!(j["activeTasks"], 2);
        assert_eq!(j["gateRejections"]["rate"], 1);
        assert_eq!(j["requests"][0]["method"], "SendMessage");
        assert_eq!(j["requests"][0]["count"], 2);
        assert_eq!(
            j["requests"].as_array().unwrap().last().unwrap(),
            &json!({ "instance": "z", "method": "GetTask", "version": "0.3", "outcome": "ok", "count": 1 }),
            "a 0.3 call counts as its 1.0 method, of version 0.3"
        );
        assert_eq!(j["components"]["instantiations"], 1);
        assert_eq!(
            j["push"],
            json!({ "delivered": 1, "retried": 1, "failed": 2, "refused": 0, "pending": 3 }),
            "notifications dropped at the outbox's bound count as failed"
        );
        let p = m.openmetrics(&g);
        assert!(
            p.contains("a2a_edge_push_attempts_total{outcome=\"retried\"} 1"),
            "{p}"
        );
        assert!(p.contains("a2a_edge_push_pending 3"), "{p}");
        assert!(
            p.contains("a2a_edge_push_attempts_total{outcome=\"failed\"} 2"),
            "{p}"
        );
        assert!(p.contains("a2a_edge_component_host_calls_total 40"), "{p}");
        assert!(p.contains("a2a_edge_component_reuses_total 1"), "{p}");
        assert_eq!(j["components"]["reuses"], 1);
        assert!(p.contains("a2a_edge_store_statements_total 9"), "{p}");
        assert_eq!(
            j["cluster"],
            json!({ "failedOver": 1, "leaseRenewalFailures": 0 })
        );
        assert!(p.contains("a2a_edge_tasks_failed_over_total 1"), "{p}");
        assert_eq!(j["agents"]["turns"]["failed"], 1);
        assert_eq!(j["agents"]["cpuMs"]["count"], 2);
        assert_eq!(
            j["agents"]["memoryPeakBytes"],
            json!({ "max": 300, "mean": 200 })
        );
        assert_eq!(
            j["agents"]["tokens"],
            json!({ "prompt": 10, "completion": 14 })
        );
        assert!(
            p.contains("a2a_edge_agent_turns_total{outcome=\"completed\"} 1"),
            "{p}"
        );
        assert!(
            p.contains("a2a_edge_agent_tokens_total{kind=\"completion\"} 14"),
            "{p}"
        );
        assert!(
            p.contains("a2a_edge_agent_turn_memory_peak_bytes 300"),
            "{p}"
        );
        assert!(p.contains("a2a_edge_agent_turn_cpu_seconds_count 2"), "{p}");
        assert!(p.contains("a2a_edge_store_failures_total 4"), "{p}");
        assert!(p.contains("a2a_edge_lease_renewal_failures_total 0"), "{p}");
        assert!(
            p.contains(
                "a2a_edge_requests_total{instance=\"a\",method=\"SendMessage\",version=\"1.0\",outcome=\"ok\"} 2"
            ),
            "{p}"
        );
        assert!(
            p.contains(
                "instance=\"a\\\"b\\\\c\\nd\",method=\"other\",version=\"1.0\",outcome=\"xy\""
            ),
            "label values are escaped: {p}"
        );
        assert!(p.contains("a2a_edge_active_tasks 2"), "{p}");
        assert!(
            p.contains("# TYPE a2a_edge_send_message_seconds histogram"),
            "{p}"
        );
        assert!(p.contains("a2a_edge_send_message_seconds_count 1"), "{p}");
        assert!(
            p.contains("a2a_edge_send_message_seconds_sum 0.0015"),
            "{p}"
        );
        assert!(
            p.contains("a2a_edge_send_message_seconds_bucket{le=\"+Inf\"} 1"),
            "{p}"
        );
        assert!(
            p.contains("a2a_edge_send_message_seconds_bucket{le=\"0.002048\"} 1")
                && p.contains("a2a_edge_send_message_seconds_bucket{le=\"0.001024\"} 0"),
            "{p}"
        );
        assert_eq!(j["latencyByMethod"]["GetTask"]["count"], 1);
        assert_eq!(j["latencyByMethod"]["GetTask"]["p50Us"], 91);
        assert_eq!(
            j["latencyByMethod"]["SendMessage"]["buckets"],
            json!([[2048, 1]]),
            "1.5 ms lies in the bucket up to 2.048 ms"
        );
        assert!(
            j["latencyByMethod"].get("ListTasks").is_none(),
            "unused methods are left out"
        );
        assert!(
            p.contains("a2a_edge_request_seconds_count{method=\"GetTask\"} 1"),
            "{p}"
        );
        assert!(p.ends_with("# EOF\n"));
    }
}
