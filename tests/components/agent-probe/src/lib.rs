//! A test-only agent: the turn's text names what it does.
//!
//! - `spin`: computes forever (the CPU limit stops it);
//! - `hoard`: allocates until the memory limit stops it;
//! - `file`, `socket <addr>`, `env`: tries to read `/etc/passwd`, connect to `addr`, read the
//!   environment, and says what it got;
//! - `http <url>`: GETs the URL through `wasi:http`, says the status or the error;
//! - `ask`: asks for input, noting the task in its key-value bucket; the next text on that task
//!   completes with `hello <text>`;
//! - `progress`: a WORKING status, a two-chunk artifact, then text;
//! - `wait`: waits 30 s on a clock (cancel stops it);
//! - `llm <text>`: asks the granted model, its answer streamed to the caller;
//! - `post <url> <body>`: POSTs the JSON body, says the status or the error;
//! - `read <url>`: GETs the URL and reads its whole body, says how many bytes;
//! - `declared <url> <length> <body>`: POSTs `body` under a `content-length` of `length`;
//! - `naps <n> <ms>`: waits `n` times `ms` on a clock; `puts <n>`: `n` key-value writes;
//! - `outcome <failed|input|auth|unavailable> <bytes>`: that outcome, its text `bytes` long;
//! - `artifact <parts>`: an artifact of those parts (JSON), says `ok` or the refusal;
//! - `big <mib>`: an artifact of `mib` MiB of text, in 256 KiB chunks;
//! - `panic <text>`: panics with the text; `fail <text>`: fails with the text;
//! - `log <text>`: logs the text (newlines and all);
//! - anything else: `echo: <text>`.

use a2a_agent::{Agent, Outcome, Turn, progress, say};

struct Probe;

/// The bucket of the tasks that were asked for a name.
fn asked() -> Result<a2a_agent::keyvalue::Bucket, String> {
    a2a_agent::keyvalue::open("asked").map_err(|e| format!("{e:?}"))
}

fn done(said: Result<(), String>) -> Outcome {
    match said {
        Ok(()) => Outcome::Completed,
        Err(e) => Outcome::Failed(e),
    }
}

/// GETs `url`, or POSTs `body` as JSON (under the `content-length` given, if any); the status
/// (with the body's length when `read`), or the error.
fn request(url: &str, body: Option<&str>, length: Option<&str>, read: bool) -> String {
    use wasip2::http::outgoing_handler::handle;
    use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
    let Some((scheme, rest)) = url.split_once("://") else {
        return "not a URL".into();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let headers = Fields::new();
    if body.is_some() {
        let _ = headers.append("content-type", b"application/json");
    }
    if let Some(length) = length {
        let _ = headers.append("content-length", length.as_bytes());
    }
    let request = OutgoingRequest::new(headers);
    if body.is_some() {
        let _ = request.set_method(&Method::Post);
    }
    let outgoing = request.body().expect("the body, once");
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let _ = request.set_scheme(Some(&scheme));
    let _ = request.set_authority(Some(authority));
    let _ = request.set_path_with_query(Some(if path.is_empty() { "/" } else { path }));
    let future = match handle(request, None) {
        Err(e) => return format!("refused: {e:?}"),
        Ok(future) => future,
    };
    // A write the host fails is noted and the request carried on, as a careless (or hostile)
    // guest would: whatever it wrote must still not leave.
    let mut failed = String::new();
    if let Some(body) = body {
        let stream = outgoing.write().expect("the stream, once");
        if let Err(e) = stream.blocking_write_and_flush(body.as_bytes()) {
            failed = format!("writing the body failed: {e:?}; ");
        }
        drop(stream);
    }
    let _ = OutgoingBody::finish(outgoing, None);
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(e))) => return format!("{failed}refused: {e:?}"),
        other => return format!("{failed}no response: {other:?}"),
    };
    let status = response.status();
    if !read {
        return format!("{failed}status {status}");
    }
    let body = response.consume().expect("the body, once");
    let stream = body.stream().expect("the stream, once");
    let mut n = 0;
    while let Ok(chunk) = stream.blocking_read(64 << 10) {
        n += chunk.len();
    }
    format!("status {status}, read {n} bytes")
}

/// `n` bytes of `x`.
fn filler(n: usize) -> String {
    "x".repeat(n)
}

/// Asks the model `prompt`, streaming its answer; a refusal fails the turn naming it.
fn ask_model(prompt: &str) -> Outcome {
    use a2a_agent::llm::{Message, Request, Role, complete};
    let request = Request {
        messages: vec![Message {
            role: Role::User,
            content: prompt.to_owned(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }],
        tools: Vec::new(),
        max_tokens: None,
        temperature: None,
        stream_answer: true,
    };
    match complete(&request) {
        Ok(c) if c.finish_reason == "stop" => Outcome::Completed,
        Ok(c) => Outcome::Failed(format!("the model stopped: {}", c.finish_reason)),
        Err(e) => Outcome::Failed(format!("{e:?}")),
    }
}

impl Agent for Probe {
    fn run(turn: Turn) -> Outcome {
        let text = turn.text.trim();
        match text {
            "spin" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "hoard" => {
                let mut kept: Vec<Vec<u8>> = Vec::new();
                loop {
                    kept.push(vec![1; 1 << 20]);
                    std::hint::black_box(&kept);
                }
            }
            "file" => done(say(&match std::fs::read_to_string("/etc/passwd") {
                Ok(s) => format!("read {} bytes", s.len()),
                Err(e) => format!("file error: {e}"),
            })),
            t if t.starts_with("socket ") => {
                done(say(&match std::net::TcpStream::connect(&t[7..]) {
                    Ok(_) => "connected".to_owned(),
                    Err(e) => format!("socket error: {e}"),
                }))
            }
            "env" => done(say(&format!("{} variables", std::env::vars().count()))),
            "ask" => match asked()
                .and_then(|b| b.set(&turn.task_id, b"asked").map_err(|e| format!("{e:?}")))
            {
                Ok(()) => Outcome::InputRequired("what is your name?".into()),
                Err(e) => Outcome::Failed(e),
            },
            "progress" => {
                let steps = || -> Result<(), String> {
                    progress::status("thinking")?;
                    progress::artifact("r", Some("report"), r#"[{"text":"part one, "}]"#, false)?;
                    progress::artifact("r", None, r#"[{"text":"part two"}]"#, true)?;
                    say("done")
                };
                done(steps())
            }
            "wait" => {
                wasip2::clocks::monotonic_clock::subscribe_duration(30_000_000_000).block();
                done(say("waited"))
            }
            t if t.starts_with("http ") => done(say(&request(&t[5..], None, None, false))),
            t if t.starts_with("read ") => done(say(&request(&t[5..], None, None, true))),
            t if t.starts_with("declared ") => {
                let mut args = t[9..].splitn(3, ' ');
                let (url, length, body) = (args.next(), args.next(), args.next());
                let said = request(url.unwrap_or(""), body, length, false);
                done(say(&said))
            }
            t if t.starts_with("post ") => {
                let (url, body) = t[5..].split_once(' ').unwrap_or((&t[5..], "{}"));
                done(say(&request(url, Some(body), None, false)))
            }
            t if t.starts_with("naps ") => {
                let mut words = t[5..].split(' ').map(|w| w.parse::<u64>().unwrap_or(1));
                let (n, ms) = (words.next().unwrap_or(1), words.next().unwrap_or(1));
                for _ in 0..n {
                    wasip2::clocks::monotonic_clock::subscribe_duration(ms * 1_000_000).block();
                }
                done(say("napped"))
            }
            t if t.starts_with("puts ") => {
                let n: u32 = t[5..].parse().unwrap_or(1);
                let written = asked().and_then(|b| {
                    (0..n).try_for_each(|i| {
                        b.set(&format!("k{}", i % 64), b"v")
                            .map_err(|e| format!("{e:?}"))
                    })
                });
                done(written.and_then(|()| say("put")))
            }
            t if t.starts_with("outcome ") => {
                let (kind, n) = t[8..].split_once(' ').unwrap_or((&t[8..], "1"));
                let text = filler(n.parse().unwrap_or(1));
                match kind {
                    "input" => Outcome::InputRequired(text),
                    "auth" => Outcome::AuthRequired(text),
                    "unavailable" => Outcome::Unavailable(text),
                    _ => Outcome::Failed(text),
                }
            }
            t if t.starts_with("artifact ") => {
                let answer = match progress::artifact("a", None, &t[9..], true) {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => e,
                };
                done(say(&answer))
            }
            t if t.starts_with("big ") => {
                let chunk = format!(r#"[{{"text":"{}"}}]"#, filler(256 << 10));
                let chunks = t[4..].parse::<usize>().unwrap_or(1) * 4;
                done(
                    (0..chunks)
                        .try_for_each(|i| progress::artifact("big", None, &chunk, i + 1 == chunks)),
                )
            }
            t if t.starts_with("panic ") => panic!("{}", &t[6..]),
            t if t.starts_with("fail ") => Outcome::Failed(t[5..].to_owned()),
            t if t.starts_with("log ") => {
                a2a_agent::log(&t[4..]);
                done(say("logged"))
            }
            t if t.starts_with("llm ") => ask_model(&t[4..]),
            // A continued task (after `ask`) answers by name.
            t if asked().is_ok_and(|b| b.exists(&turn.task_id).unwrap_or(false)) => {
                done(say(&format!("hello {t}")))
            }
            t => done(say(&format!("echo: {t}"))),
        }
    }
}

a2a_agent::export_agent!(Probe);
