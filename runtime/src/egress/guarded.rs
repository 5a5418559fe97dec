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
    let request = match declared_length(request.headers()) {
        Some(n) => request.map(|body| {
            Declared {
                inner: body,
                left: n,
            }
            .boxed_unsync()
        }),
        None => request,
    };
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

/// The `Content-Length` a guest's request declares (wasmtime-wasi-http has refused a malformed
/// one before the request reaches a hook).
fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

/// A guest's request body held to the `Content-Length` it declared: a byte past it, or an end
/// before it, fails the request before those bytes leave (wasmtime-wasi-http 48.0.8 fails such a
/// write in the guest but still hands the bytes on: GHSA-w2v8-7333-jx5p).
struct Declared {
    inner: WasiBody,
    left: u64,
}

impl HttpBody for Declared {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &frame {
            Some(Ok(f)) => {
                let n = f.data_ref().map_or(0, |d| d.len() as u64);
                if n > self.left {
                    return Poll::Ready(Some(Err(Error::HttpRequestBodySize(Some(n)))));
                }
                self.left -= n;
            }
            None if self.left > 0 => {
                return Poll::Ready(Some(Err(Error::HttpRequestBodySize(None))));
            }
            _ => {}
        }
        Poll::Ready(frame)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    /// `chunks` as a guest's body declared `declared` bytes long: what reaches the wire, or why not.
    async fn sent(chunks: &[&'static str], declared: u64) -> Result<Vec<u8>, Error> {
        let frames = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::from_static(c.as_bytes()))));
        let inner =
            StreamBody::new(futures_util::stream::iter(frames.collect::<Vec<_>>())).boxed_unsync();
        let mut body = Declared {
            inner,
            left: declared,
        };
        let mut out = Vec::new();
        while let Some(frame) = body.frame().await {
            out.extend_from_slice(frame?.data_ref().unwrap());
        }
        Ok(out)
    }

    #[tokio::test]
    async fn a_body_goes_out_only_as_long_as_it_declared() {
        assert_eq!(sent(&["0123", "4567"], 8).await.unwrap(), b"01234567");
        let past = sent(&["0123", "4567", "89"], 8).await;
        assert!(
            matches!(past, Err(Error::HttpRequestBodySize(Some(2)))),
            "{past:?}"
        );
        let short = sent(&["0123"], 8).await;
        assert!(
            matches!(short, Err(Error::HttpRequestBodySize(None))),
            "{short:?}"
        );
    }
}
