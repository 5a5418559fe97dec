//! The access line: one per A2A request, the line operators keep on. Written straight into the
//! log's queue in the log's format (text or JSON, the fields and target of a `tracing` event),
//! so it costs a formatted line rather than `tracing`'s field visitors, span lookups and escaping
//! machinery. Where the log filter decides per span (a `[span]` directive) or no log is set up,
//! it is an ordinary `tracing` event instead.

use std::cell::RefCell;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::Level;
use tracing::callsite::{Callsite, Identifier};
use tracing::metadata::Kind;
use tracing::subscriber::Interest;
use tracing_subscriber::layer::Filter;

/// One A2A request as its access line tells it.
pub struct Line<'a> {
    /// Who called.
    pub peer: SocketAddr,
    /// The inbound instance it named (empty when none).
    pub instance: &'a str,
    /// The request's path.
    pub path: &'a str,
    /// The A2A method (empty when none was read).
    pub a2a_method: &'a str,
    /// Which check refused it, or how it failed (empty when it did not).
    pub outcome: &'a str,
    /// The HTTP status (a gRPC answer's: the one its gRPC status stands for).
    pub status: u16,
    /// From its arrival to its answer's head.
    pub elapsed: Duration,
    /// The task it named or made (empty when none).
    pub task: &'a str,
}

impl Line<'_> {
    /// A refusal (401, 403, 429) or a failure (5xx): logged as a warning.
    fn refused(&self) -> bool {
        matches!(self.status, 401 | 403 | 429) || self.status >= 500
    }
}

/// The target the line is filtered and shown under, as if `tracing` emitted it in the server.
const TARGET: &str = "a2a_edge::server";

/// Where lines go and which are on, once the log is set up.
static OUT: OnceLock<Out> = OnceLock::new();

struct Out {
    writer: tracing_appender::non_blocking::NonBlocking,
    json: bool,
    ansi: bool,
    /// Whether the filter keeps the info and the warning line; `None`: it decides per span.
    info: Option<bool>,
    warn: Option<bool>,
}

/// Sends access lines to `writer` from now on, formatted as JSON or text (`ansi`: the level
/// coloured), kept or dropped as `filter` keeps events of the server at their level.
pub fn install<S>(
    writer: tracing_appender::non_blocking::NonBlocking,
    json: bool,
    ansi: bool,
    filter: &impl Filter<S>,
) {
    let decided = |meta| match filter.callsite_enabled(meta) {
        i if i.is_always() => Some(true),
        i if i.is_never() => Some(false),
        _ => None,
    };
    let _ = OUT.set(Out {
        writer,
        json,
        ansi,
        info: decided(&INFO),
        warn: decided(&WARN),
    });
}

/// The callsites the filter is asked about: an event of the server at info and at warn.
struct Site;

impl Callsite for Site {
    fn set_interest(&self, _: Interest) {}
    fn metadata(&self) -> &tracing::Metadata<'_> {
        &INFO
    }
}

static SITE: Site = Site;

const fn event(level: Level) -> tracing::Metadata<'static> {
    tracing::Metadata::new(
        "a2a request",
        TARGET,
        level,
        None,
        None,
        None,
        tracing::field::FieldSet::new(&[], Identifier(&SITE)),
        Kind::EVENT,
    )
}

static INFO: tracing::Metadata<'static> = event(Level::INFO);
static WARN: tracing::Metadata<'static> = event(Level::WARN);

/// Logs `line` of the request whose span is `span` (its trace and span ids go with it).
pub fn log(line: &Line, span: &tracing::Span) {
    let refused = line.refused();
    let out = OUT.get();
    match out.and_then(|o| if refused { o.warn } else { o.info }) {
        Some(true) => out.expect("decided").write(line, refused, span),
        Some(false) => {}
        None => traced(line, refused, span),
    }
}

/// `line` as a `tracing` event.
fn traced(line: &Line, refused: bool, span: &tracing::Span) {
    let Line {
        peer,
        instance,
        path,
        a2a_method,
        outcome,
        status,
        ..
    } = *line;
    let ms = ms(line.elapsed);
    if refused {
        tracing::warn!(parent: span, %peer, instance, %path, a2a_method, outcome, status, ms, task = line.task, "a2a request refused");
    } else {
        tracing::info!(parent: span, %peer, instance, %path, a2a_method, outcome, status, ms, task = line.task, "a2a request");
    }
}

thread_local! {
    /// The line being formatted, and the second whose `YYYY-MM-DDTHH:MM:SS.` prefix it holds.
    static SCRATCH: RefCell<(Vec<u8>, u64, [u8; 20])> = const { RefCell::new((Vec::new(), u64::MAX, [0; 20])) };
}

impl Out {
    fn write(&self, line: &Line, refused: bool, span: &tracing::Span) {
        let ids = super::trace::position(span);
        let name = span.metadata().map_or("", |m| m.name());
        SCRATCH.with_borrow_mut(|(buf, second, prefix)| {
            buf.clear();
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            if now.as_secs() != *second {
                *second = now.as_secs();
                let stamp = a2a_protocol::time::rfc3339_ms(now.as_secs() * 1000);
                prefix.copy_from_slice(&stamp.as_bytes()[..20]);
            }
            let mut stamp = [0u8; 27];
            stamp[..20].copy_from_slice(prefix);
            let micros = now.subsec_micros();
            for (i, d) in stamp[20..26].iter_mut().enumerate() {
                *d = b'0' + (micros / 10u32.pow(5 - i as u32) % 10) as u8;
            }
            stamp[26] = b'Z';
            let ids = ids.map(|s| (name, s.trace_id(), s.span_id()));
            if self.json {
                json_line(buf, &stamp, line, refused, ids);
            } else {
                text_line(buf, &stamp, line, refused, ids, self.ansi);
            }
            // A line the queue has no room for is dropped and counted by the writer.
            let _ = self.writer.clone().write(buf);
        });
    }
}

/// The request's span: its name, trace and id.
type Ids = Option<(
    &'static str,
    opentelemetry::trace::TraceId,
    opentelemetry::trace::SpanId,
)>;

/// The message of the line.
fn message(refused: bool) -> &'static str {
    if refused {
        "a2a request refused"
    } else {
        "a2a request"
    }
}

/// `elapsed` in milliseconds to the microsecond: the `ms` of the log's lines.
pub fn ms(elapsed: Duration) -> f64 {
    (elapsed.as_secs_f64() * 1e6).round() / 1e3
}

/// [`ms`] as `f64`'s `Display` writes it, without the float.
fn millis(buf: &mut Vec<u8>, elapsed: Duration) {
    let micros = elapsed.as_micros();
    let mut n = itoa::Buffer::new();
    buf.extend_from_slice(n.format(micros / 1000).as_bytes());
    let fraction = (micros % 1000) as u32;
    if fraction != 0 {
        let digits = [fraction / 100, fraction / 10 % 10, fraction % 10];
        let kept = if digits[2] != 0 {
            3
        } else if digits[1] != 0 {
            2
        } else {
            1
        };
        buf.push(b'.');
        buf.extend(digits[..kept].iter().map(|d| b'0' + *d as u8));
    }
}

/// A field's value, as each format writes it.
enum Field<'a> {
    Peer(SocketAddr),
    /// A text a caller or a component chose: quoted, escaped.
    Text(&'a str),
    /// The path: quoted and escaped in JSON, bare in text where it needs no escape.
    Path(&'a str),
    Status(u16),
    Millis(Duration),
}

/// The line's fields after its message, in order: one list for both formats.
fn fields<'a>(line: &Line<'a>) -> [(&'static str, Field<'a>); 8] {
    [
        ("peer", Field::Peer(line.peer)),
        ("instance", Field::Text(line.instance)),
        ("path", Field::Path(line.path)),
        ("a2a_method", Field::Text(line.a2a_method)),
        ("outcome", Field::Text(line.outcome)),
        ("status", Field::Status(line.status)),
        ("ms", Field::Millis(line.elapsed)),
        ("task", Field::Text(line.task)),
    ]
}

impl Field<'_> {
    /// Writes the value as JSON, or as the text format has it.
    fn write(&self, buf: &mut Vec<u8>, json: bool) {
        match *self {
            Field::Peer(peer) if json => {
                let _ = write!(buf, "\"{peer}\"");
            }
            Field::Peer(peer) => {
                let _ = write!(buf, "{peer}");
            }
            Field::Text(s) | Field::Path(s) if json => {
                let _ = serde_json::to_writer(&mut *buf, s);
            }
            Field::Text(s) => quoted(buf, s),
            Field::Path(s) => bare(buf, s),
            Field::Status(n) => buf.extend_from_slice(itoa::Buffer::new().format(n).as_bytes()),
            Field::Millis(d) => millis(buf, d),
        }
    }
}

fn json_line(buf: &mut Vec<u8>, stamp: &[u8], line: &Line, refused: bool, ids: Ids) {
    buf.extend_from_slice(b"{\"timestamp\":\"");
    buf.extend_from_slice(stamp);
    buf.extend_from_slice(if refused {
        b"\",\"level\":\"WARN\",\"fields\":{\"message\":"
    } else {
        b"\",\"level\":\"INFO\",\"fields\":{\"message\":"
    });
    Field::Text(message(refused)).write(buf, true);
    for (name, field) in fields(line) {
        buf.extend_from_slice(b",\"");
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(b"\":");
        field.write(buf, true);
    }
    buf.extend_from_slice(b"},\"target\":\"");
    buf.extend_from_slice(TARGET.as_bytes());
    buf.push(b'"');
    if let Some((name, trace, span)) = ids {
        let _ = write!(
            buf,
            ",\"span\":{{\"trace_id\":\"{trace}\",\"span_id\":\"{span}\",\"name\":\"{name}\"}}"
        );
    }
    buf.extend_from_slice(b"}\n");
}

fn text_line(buf: &mut Vec<u8>, stamp: &[u8], line: &Line, refused: bool, ids: Ids, ansi: bool) {
    buf.extend_from_slice(stamp);
    buf.extend_from_slice(match (refused, ansi) {
        (false, false) => b"  INFO ".as_slice(),
        (true, false) => b"  WARN ",
        (false, true) => b" \x1b[32m INFO\x1b[0m ",
        (true, true) => b" \x1b[33m WARN\x1b[0m ",
    });
    if let Some((name, trace, span)) = ids {
        let _ = write!(buf, "{name}{{trace_id={trace} span_id={span}}}: ");
    }
    buf.extend_from_slice(TARGET.as_bytes());
    buf.extend_from_slice(b": ");
    buf.extend_from_slice(message(refused).as_bytes());
    for (name, field) in fields(line) {
        buf.push(b' ');
        buf.extend_from_slice(name.as_bytes());
        buf.push(b'=');
        field.write(buf, false);
    }
    buf.push(b'\n');
}

/// Whether `s` is printable ASCII that needs no escape inside quotes.
fn plain(s: &str) -> bool {
    s.bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
}

/// `s` as `Display` writes it where it is plain (a path), else quoted with escapes.
fn bare(buf: &mut Vec<u8>, s: &str) {
    if plain(s) {
        buf.extend_from_slice(s.as_bytes());
    } else {
        quoted(buf, s);
    }
}

/// `s` as `Debug` writes a string: quoted, with escapes; copied as it is when nothing needs one.
fn quoted(buf: &mut Vec<u8>, s: &str) {
    if plain(s) {
        buf.push(b'"');
        buf.extend_from_slice(s.as_bytes());
        buf.push(b'"');
    } else {
        let _ = write!(buf, "{s:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(status: u16, micros: u64, task: &str) -> Line<'_> {
        Line {
            peer: "127.0.0.1:4242".parse().unwrap(),
            instance: "demo",
            path: "/a2a/demo",
            a2a_method: "SendMessage",
            outcome: "",
            status,
            elapsed: Duration::from_micros(micros),
            task,
        }
    }

    #[test]
    fn milliseconds_read_as_the_rounded_float_would() {
        for micros in [
            0,
            1,
            10,
            100,
            999,
            1000,
            1200,
            1230,
            1234,
            65_001,
            3_600_000_000,
        ] {
            let mut buf = Vec::new();
            millis(
                &mut buf,
                Duration::from_micros(micros) + Duration::from_nanos(400),
            );
            let float = ms(Duration::from_micros(micros));
            assert_eq!(String::from_utf8(buf).unwrap(), float.to_string());
        }
    }

    #[test]
    fn a_json_line_parses_with_every_field_and_its_trace() {
        let mut buf = Vec::new();
        let ids = Some((
            "a2a",
            opentelemetry::trace::TraceId::from(0x0af7651916cd43dd8448eb211c80319c_u128),
            opentelemetry::trace::SpanId::from(0xb7ad6b7169203331_u64),
        ));
        let stamp = b"2026-12-07T12:00:01.000042Z";
        json_line(&mut buf, stamp, &line(403, 1234, "t\"1\n"), true, ids);
        assert_eq!(buf.last(), Some(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(v["timestamp"], "2026-12-07T12:00:01.000042Z");
        assert_eq!(v["level"], "WARN");
        assert_eq!(v["target"], TARGET);
        let f = &v["fields"];
        assert_eq!(f["message"], "a2a request refused");
        assert_eq!(f["peer"], "127.0.0.1:4242");
        assert_eq!(f["a2a_method"], "SendMessage");
        assert_eq!(f["status"], 403);
        assert_eq!(f["ms"], 1.234);
        assert_eq!(f["task"], "t\"1\n");
        assert_eq!(v["span"]["trace_id"], "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(v["span"]["span_id"], "b7ad6b7169203331");
        assert_eq!(v["span"]["name"], "a2a");
    }

    #[test]
    fn a_text_line_escapes_what_a_caller_chose() {
        let mut buf = Vec::new();
        let stamp = b"2026-12-07T12:00:01.000042Z";
        text_line(
            &mut buf,
            stamp,
            &line(200, 5, "forged\n2026 INFO"),
            false,
            None,
            false,
        );
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(
            text,
            "2026-12-07T12:00:01.000042Z  INFO a2a_edge::server: a2a request peer=127.0.0.1:4242 instance=\"demo\" path=/a2a/demo a2a_method=\"SendMessage\" outcome=\"\" status=200 ms=0.005 task=\"forged\\n2026 INFO\"\n"
        );
        assert_eq!(text.lines().count(), 1);
        let mut path = Vec::new();
        bare(&mut path, "/a2a/demo");
        bare(&mut path, " /a2a/x\n");
        assert_eq!(path, b"/a2a/demo\" /a2a/x\\n\"");
    }

    #[test]
    fn the_filter_decides_each_level_once_or_leaves_it_to_tracing() {
        let decide = |directives: &str| {
            let f = tracing_subscriber::EnvFilter::new(directives);
            let at = |meta| {
                let i = Filter::<tracing_subscriber::Registry>::callsite_enabled(&f, meta);
                (i.is_always(), i.is_never())
            };
            (at(&INFO), at(&WARN))
        };
        assert_eq!(decide("info"), ((true, false), (true, false)));
        assert_eq!(decide("warn"), ((false, true), (true, false)));
        assert_eq!(decide("warn,a2a_edge=info"), ((true, false), (true, false)));
        assert_eq!(
            decide("a2a_edge::server=error"),
            ((false, true), (false, true))
        );
        // A span directive decides per request: the line goes through tracing then.
        assert_eq!(decide("warn,[a2a]=info").0, (false, false));
    }
}
