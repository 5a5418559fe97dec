//! Server-sent event streams, read event by event.

use std::time::Duration;

use serde_json::Value;

use crate::jsonrpc::stream_request;

/// One SSE event: its `id:` and its data as JSON.
pub type Event = (Option<u64>, Value);

/// An SSE response read event by event.
pub struct Events {
    response: reqwest::Response,
    buf: String,
    /// Comment-only events (keep-alives) read so far.
    pub comments: usize,
}

impl Events {
    /// Reads `response` as an event stream.
    pub fn of(response: reqwest::Response) -> Events {
        Events {
            response,
            buf: String::new(),
            comments: 0,
        }
    }

    /// Calls the streaming `method` at `url` (see [`stream_request`]); whatever it answers.
    pub async fn open(
        client: &reqwest::Client,
        url: &str,
        method: &str,
        params: Value,
        last_event_id: Option<u64>,
    ) -> Events {
        let request = stream_request(client, url, method, params, last_event_id);
        Events::of(request.send().await.unwrap())
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.response.status().as_u16()
    }

    /// The next event (comments skipped); none at the end of the stream.
    pub async fn next(&mut self) -> Option<Event> {
        let (_, id, data) = self.next_block().await?;
        Some((id, data))
    }

    /// The data of the next event named `kind` (`event: kind`), others skipped; panics when none
    /// comes within 10 s or the stream ends.
    pub async fn next_named(&mut self, kind: &str) -> Value {
        let named = async {
            loop {
                match self.next_block().await.expect("the stream stays open") {
                    (Some(name), _, data) if name == kind => return data,
                    _ => {}
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), named)
            .await
            .unwrap_or_else(|_| panic!("no {kind} event within 10 s"))
    }

    /// The next event with data: its `event:` name, `id:` and data as JSON.
    async fn next_block(&mut self) -> Option<(Option<String>, Option<u64>, Value)> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..end + 2).collect();
                let (mut name, mut id, mut data) = (None, None, None::<String>);
                for line in raw.lines() {
                    let Some((field, value)) = line.split_once(':') else {
                        continue;
                    };
                    let value = value.strip_prefix(' ').unwrap_or(value);
                    match field {
                        "event" => name = Some(value.to_owned()),
                        "id" => id = value.trim().parse().ok(),
                        "data" => match &mut data {
                            Some(d) => {
                                d.push('\n');
                                d.push_str(value);
                            }
                            None => data = Some(value.to_owned()),
                        },
                        _ => {}
                    }
                }
                match data {
                    Some(d) => return Some((name, id, serde_json::from_str(&d).unwrap())),
                    None => self.comments += usize::from(raw.starts_with(':')),
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("stream stalled")
                .ok()??;
            self.buf.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// The next event with its data's `result` alone (a JSON-RPC stream's StreamResponse) of a
    /// stream that started (200); none at the end.
    pub async fn next_result(&mut self) -> Option<Event> {
        assert_eq!(self.status(), 200, "the stream did not start");
        let (id, data) = self.next().await?;
        Some((id, data["result"].clone()))
    }

    /// The body as plain JSON (an error answered before any stream started).
    pub async fn json(self) -> Value {
        assert_eq!(
            self.response.headers()["content-type"],
            "application/json",
            "expected a plain JSON answer"
        );
        self.response.json().await.unwrap()
    }

    /// Every remaining event.
    pub async fn all(mut self) -> Vec<Event> {
        self.drain().await
    }

    /// Every remaining event, keeping the stream's counters readable.
    pub async fn drain(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }

    /// Every remaining event as [`Events::next_result`] reads it.
    pub async fn results(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        while let Some(e) = self.next_result().await {
            out.push(e);
        }
        out
    }
}

/// The StreamResponse member of an event (`task`, `statusUpdate`, …).
pub fn kind(e: &Event) -> &str {
    e.1["result"]
        .as_object()
        .and_then(|o| o.keys().next())
        .map_or("error", |k| k.as_str())
}

/// The numbered events, as (id, data).
pub fn numbered(events: &[Event]) -> Vec<(u64, Value)> {
    events
        .iter()
        .filter_map(|(id, v)| Some(((*id)?, v.clone())))
        .collect()
}

/// The task state a StreamResponse carries (a task snapshot or a status update).
pub fn state(response: &Value) -> &str {
    response["task"]["status"]["state"]
        .as_str()
        .or(response["statusUpdate"]["status"]["state"].as_str())
        .unwrap_or("")
}
