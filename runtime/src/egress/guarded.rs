//! A guest's request sent past the guard: resolved and checked against its [`Reach`], sent to
//! exactly the checked address through the [`Exit`], its response body capped in size and in
//! the time between bytes.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame};
use wasmtime_wasi_http::p2::bindings::http::types::ErrorCode;
use wasmtime_wasi_http::{Error, WasiBody};

use super::{Exit, Reach, Sent};

/// Sends `request` to where `reach` allows, within `timeout` (connect, first byte, and between
/// bytes), reading at most `cap` bytes of the response body.
pub async fn send(
    request: http::Request<WasiBody>,
    reach: &Reach,
    exit: &Exit,
    timeout: Duration,
    cap: u64,
) -> Result<Sent, Error> {
    let addrs = super::resolve(request.uri(), reach, timeout).await?;
    let (response, io) = exit.send(request, addrs, timeout).await?;
    let response = response.map(|body| {
        Capped {
            inner: body,
            left: cap,
            cap,
            idle: timeout,
            timer: Box::pin(tokio::time::sleep(timeout)),
        }
        .boxed_unsync()
    });
    Ok((response, io))
}

/// The shorter of `limit` and the timeouts a guest asked for: a guest may shorten them, never
/// lengthen them.
pub fn timeout(options: Option<wasmtime_wasi_http::RequestOptions>, limit: Duration) -> Duration {
    options
        .and_then(|o| {
            o.connect_timeout
                .into_iter()
                .chain(o.first_byte_timeout)
                .min()
        })
        .map_or(limit, |d| d.min(limit))
}

/// A response body that fails once it exceeds its cap, or when no byte came for `idle`.
struct Capped {
    inner: WasiBody,
    left: u64,
    cap: u64,
    idle: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl HttpBody for Capped {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                std::task::ready!(self.timer.as_mut().poll(cx));
                return Poll::Ready(Some(Err(Error::ConnectionReadTimeout)));
            }
        };
        let deadline = tokio::time::Instant::now() + self.idle;
        self.timer.as_mut().reset(deadline);
        if let Some(Ok(f)) = &frame
            && let Some(data) = f.data_ref()
        {
            let n = data.len() as u64;
            if n > self.left {
                let cap = self.cap;
                return Poll::Ready(Some(Err(ErrorCode::HttpResponseBodySize(Some(cap)).into())));
            }
            self.left -= n;
        }
        Poll::Ready(frame)
    }
}
