//! `GET /a2a/api/events`: the activity feed as a server-sent event stream, for the panel. It
//! opens with `hello`, then carries `task` (a task written, with its state) and `change` (a
//! control action that succeeded) as they happen, `metrics` (the metrics snapshot) every two
//! seconds, and `lagged` when the watcher fell behind and should read the state again.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::json;

use super::{reads, refusal};
use crate::app::App;
use crate::feed::{MAX_WATCHERS, Next, Watcher};
use crate::responses::Body;

/// How often the metrics snapshot is sent.
const METRICS_EVERY: Duration = Duration::from_secs(2);

/// One SSE event.
fn event(kind: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {kind}\ndata: {data}\n\n"))
}

/// Answers the feed: 429 when [`MAX_WATCHERS`] watch already.
pub fn events(app: &Arc<App>) -> Response<Body> {
    let Some(watcher) = app.services().activity.feed().watch() else {
        return refusal(
            429,
            &format!("{MAX_WATCHERS} panels watch the events already; close one and retry"),
        );
    };
    let hello = json!({ "version": env!("CARGO_PKG_VERSION") }).to_string();
    let first = [
        Bytes::from_static(b"retry: 2000\n\n"),
        event("hello", &hello),
    ]
    .concat();
    let first = Bytes::from(first);
    let mut tick = tokio::time::interval(METRICS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = (watcher, tick, app.clone());
    let rest = futures_util::stream::unfold(state, |(mut w, mut tick, app)| async move {
        let next = next(&mut w, &mut tick, &app).await?;
        Some((next, (w, tick, app)))
    });
    let frames = futures_util::stream::once(async { first })
        .chain(rest)
        .map(|b| Ok(Frame::data(b)));
    Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, "text/event-stream")
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(StreamBody::new(frames).boxed_unsync())
        .expect("static response parts are valid")
}

/// The next event of one watcher; `None` ends the stream.
async fn next(w: &mut Watcher, tick: &mut tokio::time::Interval, app: &Arc<App>) -> Option<Bytes> {
    tokio::select! {
        got = w.next() => Some(match got? {
            Next::Event(e) => event(e.kind, &e.data),
            Next::Lagged(n) => event("lagged", &json!({ "missed": n }).to_string()),
        }),
        _ = tick.tick() => Some(event("metrics", &reads::metrics_json(app).await.to_string())),
    }
}
