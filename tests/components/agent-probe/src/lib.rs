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

/// GETs `url`; the status, or the error.
fn get(url: &str) -> String {
    use wasip2::http::outgoing_handler::handle;
    use wasip2::http::types::{Fields, OutgoingRequest, Scheme};
    let Some((scheme, rest)) = url.split_once("://") else {
        return "not a URL".into();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let request = OutgoingRequest::new(Fields::new());
    let scheme = if scheme == "https" {
        Scheme::Https
    } else {
        Scheme::Http
    };
    let _ = request.set_scheme(Some(&scheme));
    let _ = request.set_authority(Some(authority));
    let _ = request.set_path_with_query(Some(if path.is_empty() { "/" } else { path }));
    match handle(request, None) {
        Err(e) => format!("refused: {e:?}"),
        Ok(future) => {
            future.subscribe().block();
            match future.get() {
                Some(Ok(Ok(response))) => format!("status {}", response.status()),
                Some(Ok(Err(e))) => format!("refused: {e:?}"),
                other => format!("no response: {other:?}"),
            }
        }
    }
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
            t if t.starts_with("http ") => done(say(&get(&t[5..]))),
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
