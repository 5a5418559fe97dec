//! The recent spans of each task, in memory and bounded: what the panel's task page draws as a
//! waterfall, kept whether or not spans are exported. Spans are kept by trace, oldest traces
//! dropped first, each as a compact view with its texts cut short; a task names the traces that
//! touched it (the one that created it, always, and the latest reads, writes, cancels and
//! resubscriptions). A span is kept as it ended and made into its view only when read: most
//! spans (a card's, a read's) are dropped unread.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanContext, SpanId, SpanKind, Status, TraceId};
use opentelemetry_sdk::trace::SpanData;
use serde::Serialize;
use serde_json::{Map, Value};

/// Spans kept in all, across traces.
const MAX_SPANS: usize = 20_000;
/// Spans of traces no task named (yet): cards, refusals, a request's first spans. Kept apart and
/// bounded on their own, so traffic that touches no task never pushes tasks' traces out.
const MAX_PENDING_SPANS: usize = 4_096;
/// Spans kept of one trace (a long stream's, or a client's that sends all its calls in one).
const MAX_SPANS_PER_TRACE: usize = 2_000;
/// Traces kept at most (a bound on their count besides their spans').
const MAX_TRACES: usize = 16_384;
/// Tasks whose traces are remembered.
const MAX_TASKS: usize = 4_096;
/// Traces remembered per task besides the one that created it: the latest.
const MAX_TRACES_PER_TASK: usize = 16;
/// Attributes kept per span.
const MAX_ATTRIBUTES: usize = 32;
/// Span events (warnings) kept per span.
const MAX_EVENTS: usize = 8;

/// One ended span, as the control API shows it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanView {
    /// Its trace (hex in JSON).
    #[serde(serialize_with = "hex")]
    pub trace_id: TraceId,
    /// Its id (hex in JSON).
    #[serde(serialize_with = "hex")]
    pub span_id: SpanId,
    /// Its parent's id (none for a root).
    #[serde(serialize_with = "hex_or_none")]
    pub parent_id: Option<SpanId>,
    /// What it did.
    pub name: String,
    /// `server`, `client` or `internal`.
    pub kind: &'static str,
    /// Start, µs since the Unix epoch.
    pub start_us: u64,
    /// How long it took, µs.
    pub duration_us: u64,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// Its attributes (the conventions' names).
    pub attributes: Map<String, Value>,
    /// What was logged in it (warnings).
    pub events: Vec<String>,
}

/// An id as its hex text (formatted when the view is read, not for every span kept).
fn hex<S: serde::Serializer>(id: &impl std::fmt::Display, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

fn hex_or_none<S: serde::Serializer>(id: &Option<SpanId>, s: S) -> Result<S::Ok, S::Error> {
    match id {
        Some(id) => hex(id, s),
        None => s.serialize_none(),
    }
}

fn micros(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// `s` cut as spans keep texts.
fn short(s: &str) -> String {
    super::short(s).to_owned()
}

fn value(v: &opentelemetry::Value) -> Value {
    match v {
        opentelemetry::Value::Bool(b) => Value::Bool(*b),
        opentelemetry::Value::I64(i) => Value::from(*i),
        opentelemetry::Value::F64(f) => Value::from(*f),
        other => Value::String(short(&other.to_string())),
    }
}

impl From<&SpanData> for SpanView {
    fn from(s: &SpanData) -> SpanView {
        let attributes: Map<String, Value> = s
            .attributes
            .iter()
            .take(MAX_ATTRIBUTES)
            .map(|kv| (short(kv.key.as_str()), value(&kv.value)))
            .collect();
        let error_type = attributes
            .get("error.type")
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned));
        // A failed span is drawn failed even when nothing said why.
        let error = match &s.status {
            Status::Error { description } if !description.is_empty() => Some(short(description)),
            Status::Error { .. } => Some(error_type.unwrap_or_else(|| "error".into())),
            _ => error_type,
        };
        SpanView {
            trace_id: s.span_context.trace_id(),
            span_id: s.span_context.span_id(),
            parent_id: (s.parent_span_id != SpanId::INVALID).then_some(s.parent_span_id),
            name: short(&s.name),
            kind: match s.span_kind {
                SpanKind::Server => "server",
                SpanKind::Client | SpanKind::Producer => "client",
                SpanKind::Internal | SpanKind::Consumer => "internal",
            },
            start_us: micros(s.start_time),
            duration_us: s
                .end_time
                .duration_since(s.start_time)
                .map_or(0, |d| d.as_micros() as u64),
            error,
            attributes,
            events: s
                .events
                .iter()
                .take(MAX_EVENTS)
                .map(|e| short(&e.name))
                .collect(),
        }
    }
}

/// A span that worked on a task: where in which trace, and whether it was sampled.
pub type SpanRef = SpanContext;

/// Ended spans by trace, oldest trace first, within a count.
#[derive(Debug, Default)]
struct Traces {
    by_id: HashMap<TraceId, Trace>,
    /// Traces in the order they came, each with the `seq` it came under: an entry whose trace
    /// was taken out since (or came again later) is stale, skipped when it reaches the front.
    /// Each trace held has one live entry, so the rest (`order.len() - by_id.len()`) are stale;
    /// when they are half of it, it is compacted (taking a trace out costs O(1), amortised, not
    /// a scan of every trace kept).
    order: VecDeque<(TraceId, u64)>,
    next: u64,
    spans: usize,
}

/// The spans of one trace, and the `seq` of its entry in the order.
#[derive(Debug)]
struct Trace {
    seq: u64,
    spans: Vec<SpanData>,
}

impl Traces {
    /// Whether `id` has spans (or a place) here.
    fn holds(&self, id: &TraceId) -> bool {
        self.by_id.contains_key(id)
    }

    /// The spans of `id`, a new (empty) trace when it has none yet.
    fn trace(&mut self, id: TraceId) -> &mut Vec<SpanData> {
        let seq = self.next;
        let trace = self.by_id.entry(id).or_insert_with(|| {
            self.order.push_back((id, seq));
            Trace {
                seq,
                spans: Vec::new(),
            }
        });
        if trace.seq == seq {
            self.next += 1;
        }
        &mut trace.spans
    }

    /// Keeps `span` under its trace, dropping the oldest traces beyond `max` spans.
    fn keep(&mut self, span: SpanData, max: usize) {
        let trace = self.trace(span.span_context.trace_id());
        if trace.len() >= MAX_SPANS_PER_TRACE {
            return;
        }
        trace.push(span);
        self.spans += 1;
        self.trim(max);
    }

    /// Drops the oldest traces while there are more than `max` spans or [`MAX_TRACES`] traces.
    fn trim(&mut self, max: usize) {
        while self.spans > max || self.by_id.len() > MAX_TRACES {
            let Some((oldest, seq)) = self.order.pop_front() else {
                break;
            };
            if let Entry::Occupied(e) = self.by_id.entry(oldest)
                && e.get().seq == seq
            {
                self.spans -= e.remove().spans.len();
            }
        }
    }

    /// Takes a trace's spans out.
    fn take(&mut self, id: TraceId) -> Vec<SpanData> {
        let Some(trace) = self.by_id.remove(&id) else {
            return Vec::new();
        };
        self.spans -= trace.spans.len();
        if self.order.len() > 2 * self.by_id.len() {
            let by_id = &self.by_id;
            self.order
                .retain(|(id, seq)| by_id.get(id).is_some_and(|t| t.seq == *seq));
        }
        trace.spans
    }

    /// The spans of `id`, if kept.
    fn get(&self, id: &TraceId) -> Option<&Vec<SpanData>> {
        self.by_id.get(id).map(|t| &t.spans)
    }
}

/// The traces of one task.
#[derive(Debug, Default)]
struct TaskTraces {
    /// The trace that created it (first touched it).
    creator: Option<TraceId>,
    /// The latest others, oldest first.
    latest: VecDeque<TraceId>,
    /// The latest span that wrote it.
    last_write: Option<SpanRef>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The traces of tasks.
    kept: Traces,
    /// The traces no task named (yet).
    pending: Traces,
    /// The traces of each task (`instance/task`).
    tasks: HashMap<String, TaskTraces>,
    /// Task keys, oldest first.
    task_order: VecDeque<String>,
}

/// The ring (see the module's documentation).
#[derive(Debug, Default)]
pub struct SpanRing(Mutex<Inner>);

impl SpanRing {
    /// Keeps an ended span (its attributes and events within the view's bounds).
    pub fn keep(&self, mut span: SpanData) {
        span.attributes.truncate(MAX_ATTRIBUTES);
        span.events.events.truncate(MAX_EVENTS);
        let mut g = self.0.lock().unwrap();
        if g.kept.holds(&span.span_context.trace_id()) {
            g.kept.keep(span, MAX_SPANS);
        } else {
            g.pending.keep(span, MAX_PENDING_SPANS);
        }
    }

    /// Notes that the span `at` read (or, `wrote`, wrote) `task` of `instance`: its trace is
    /// the task's.
    pub fn touched(&self, instance: &str, task: &str, at: &SpanRef, wrote: bool) {
        let key = crate::records::task_key(instance, task);
        let trace = at.trace_id();
        let mut g = self.0.lock().unwrap();
        let inner = &mut *g;
        if !inner.kept.holds(&trace) {
            let spans = inner.pending.take(trace);
            inner.kept.trace(trace);
            for span in spans {
                inner.kept.keep(span, MAX_SPANS);
            }
            inner.kept.trim(MAX_SPANS);
        }
        if !inner.tasks.contains_key(&key) {
            if inner.task_order.len() >= MAX_TASKS
                && let Some(oldest) = inner.task_order.pop_front()
            {
                inner.tasks.remove(&oldest);
            }
            inner.task_order.push_back(key.clone());
        }
        let t = inner.tasks.entry(key).or_default();
        if wrote {
            t.last_write = Some(at.clone());
        }
        if *t.creator.get_or_insert(trace) == trace || t.latest.back() == Some(&trace) {
            return;
        }
        if t.latest.len() >= MAX_TRACES_PER_TASK {
            t.latest.pop_front();
        }
        t.latest.push_back(trace);
    }

    /// The latest span that wrote a task, if remembered.
    pub fn last_write(&self, instance: &str, task: &str) -> Option<SpanRef> {
        let key = crate::records::task_key(instance, task);
        self.0.lock().unwrap().tasks.get(&key)?.last_write.clone()
    }

    /// The traces of a task (the creating one first, hex) and their spans still kept, in start
    /// order.
    pub fn task(&self, instance: &str, task: &str) -> (Vec<String>, Vec<SpanView>) {
        let key = crate::records::task_key(instance, task);
        let g = self.0.lock().unwrap();
        let Some(t) = g.tasks.get(&key) else {
            return (Vec::new(), Vec::new());
        };
        let mut ids: Vec<TraceId> = Vec::new();
        for trace in t.creator.iter().chain(&t.latest) {
            if !ids.contains(trace) {
                ids.push(*trace);
            }
        }
        let mut spans: Vec<SpanView> = ids
            .iter()
            .filter_map(|t| g.kept.get(t))
            .flatten()
            .map(SpanView::from)
            .collect();
        drop(g);
        spans.sort_by_key(|s| s.start_us);
        (ids.iter().map(TraceId::to_string).collect(), spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{TraceFlags, TraceState};
    use std::time::Duration;

    fn span(trace: u128, id: u64, parent: u64, start: u64) -> SpanData {
        let at = UNIX_EPOCH + Duration::from_micros(start);
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(trace),
                SpanId::from(id),
                TraceFlags::SAMPLED,
                false,
                TraceState::default(),
            ),
            parent_span_id: SpanId::from(parent),
            parent_span_is_remote: false,
            span_kind: SpanKind::Internal,
            name: "s".into(),
            start_time: at,
            end_time: at + Duration::from_micros(5),
            attributes: vec![
                opentelemetry::KeyValue::new("db.operation.name", "get-task"),
                opentelemetry::KeyValue::new("user_agent.original", "x".repeat(10_000)),
            ],
            dropped_attributes_count: 0,
            events: Default::default(),
            links: Default::default(),
            status: Status::Unset,
            instrumentation_scope: Default::default(),
        }
    }

    fn at(trace: u128, span: u64) -> SpanRef {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::default(),
            false,
            TraceState::default(),
        )
    }

    #[test]
    fn a_task_shows_the_spans_of_the_traces_that_touched_it_in_start_order() {
        let ring = SpanRing::default();
        // The request's first spans end before it names its task; the rest after.
        ring.keep(span(1, 3, 1, 15));
        ring.touched("i", "t", &at(1, 1), true);
        ring.keep(span(1, 2, 1, 20));
        ring.keep(span(1, 1, 0, 10));
        ring.keep(span(7, 9, 0, 5));
        let (traces, spans) = ring.task("i", "t");
        assert_eq!(traces, ["00000000000000000000000000000001"]);
        let order: Vec<_> = spans.iter().map(|s| s.start_us).collect();
        assert_eq!(
            order,
            [10, 15, 20],
            "the other trace's span is not the task's"
        );
        assert_eq!(spans[0].parent_id, None);
        assert_eq!(spans[2].parent_id, Some(SpanId::from(1)));
        let json = serde_json::to_value(&spans[2]).unwrap();
        assert_eq!(json["parentId"], "0000000000000001");
        assert_eq!(json["spanId"].as_str().map(str::len), Some(16));
        assert_eq!(json["traceId"].as_str().map(str::len), Some(32));
        assert_eq!(
            serde_json::to_value(&spans[0]).unwrap()["parentId"],
            Value::Null
        );
        assert_eq!(spans[0].duration_us, 5);
        assert_eq!(spans[0].attributes["db.operation.name"], "get-task");
        assert_eq!(
            spans[0].attributes["user_agent.original"]
                .as_str()
                .unwrap()
                .len(),
            super::super::context::MAX_TEXT,
            "long texts are cut"
        );
        assert!(ring.task("i", "other").1.is_empty());
        // A read is shown, but a push delivery continues the latest write.
        ring.touched("i", "t", &at(2, 4), false);
        assert_eq!(ring.task("i", "t").0.len(), 2);
        assert_eq!(ring.last_write("i", "t"), Some(at(1, 1)));
    }

    #[test]
    fn taking_traces_out_leaves_the_order_bounded_and_a_returning_trace_its_place() {
        let mut t = Traces::default();
        for id in 1..=10_000u128 {
            t.keep(span(id, 1, 0, 0), MAX_PENDING_SPANS);
            assert_eq!(t.take(TraceId::from(id)).len(), 1);
        }
        assert!(
            t.order.len() <= 2,
            "stale entries are compacted: {}",
            t.order.len()
        );
        assert_eq!(t.spans, 0);
        // A trace taken out and seen again is the newest: its stale entry at the front does not
        // drop it, the traces that came in between go first.
        t.keep(span(1, 1, 0, 0), 3);
        t.keep(span(2, 1, 0, 0), 3);
        t.take(TraceId::from(1));
        t.keep(span(3, 1, 0, 0), 3);
        t.keep(span(1, 2, 0, 0), 3);
        t.keep(span(4, 1, 0, 0), 3);
        assert!(!t.holds(&TraceId::from(2)), "the oldest went");
        for id in [1, 3, 4] {
            assert!(t.holds(&TraceId::from(id)), "trace {id} stays");
        }
        assert_eq!(t.spans, 3);
    }

    #[test]
    fn the_ring_is_bounded_and_traffic_without_tasks_never_pushes_tasks_out() {
        let ring = SpanRing::default();
        ring.touched("i", "t", &at(u128::MAX - 1, 1), true);
        ring.keep(span(u128::MAX - 1, 1, 0, 0));
        for t in 0..(MAX_PENDING_SPANS as u128 * 3) {
            ring.keep(span(t + 1, 1, 0, t as u64));
        }
        let g = ring.0.lock().unwrap();
        assert_eq!(g.pending.spans, MAX_PENDING_SPANS);
        assert_eq!(g.kept.spans, 1);
        drop(g);
        assert_eq!(ring.task("i", "t").1.len(), 1, "the task's trace stays");
        // A task keeps the trace that created it and its latest others.
        for t in 0..(MAX_TRACES_PER_TASK as u128 + 3) {
            ring.touched("i", "t", &at(t + 100_000, 1), false);
        }
        let (traces, _) = ring.task("i", "t");
        assert_eq!(traces.len(), MAX_TRACES_PER_TASK + 1);
        assert_eq!(traces[0], TraceId::from(u128::MAX - 1).to_string());
        let first = 1_000_000u128;
        for t in first..first + (MAX_SPANS as u128 / 2 + 10) {
            ring.touched("i", "many", &at(t, 1), true);
            ring.keep(span(t, 1, 0, 0));
            ring.keep(span(t, 2, 1, 0));
        }
        let g = ring.0.lock().unwrap();
        assert!(
            (MAX_SPANS - 1..=MAX_SPANS).contains(&g.kept.spans),
            "{}",
            g.kept.spans
        );
        assert!(
            !g.kept.holds(&TraceId::from(first)),
            "the oldest went first"
        );
        drop(g);
        ring.touched("i", "long", &at(u128::MAX, 1), true);
        for id in 0..(MAX_SPANS_PER_TRACE as u64 + 5) {
            ring.keep(span(u128::MAX, id + 1, 0, 0));
        }
        assert_eq!(ring.task("i", "long").1.len(), MAX_SPANS_PER_TRACE);
        for t in 0..(MAX_TASKS + 1) {
            ring.touched("x", &t.to_string(), &at(5, 5), true);
        }
        assert!(
            ring.last_write("x", "0").is_none(),
            "the oldest task is forgotten"
        );
    }
}
