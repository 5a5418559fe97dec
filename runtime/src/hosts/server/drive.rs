//! An invocation driven by the response it answers: polled on the connection's own task, so a
//! request answered at once costs no task spawn and no hand-off between threads. Whatever is left
//! of it when the response is dropped (the answer went out before the task settled, a stream
//! ended, the client went away) goes on in a task of its own.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

use crate::responses::Body;

/// A running invocation: how it ended, or that it panicked.
pub type Invocation = Pin<Box<dyn Future<Output = Ended> + Send>>;

/// How an invocation ended.
pub type Ended = std::thread::Result<wasmtime::Result<()>>;

struct Driven {
    body: Body,
    invocation: Option<Invocation>,
}

/// `body`, which drives `invocation` while it is read and hands the rest on when dropped.
pub fn drive(body: Body, invocation: Invocation) -> Body {
    Driven {
        body,
        invocation: Some(invocation),
    }
    .boxed_unsync()
}

/// Lets what is left of an invocation run on by itself.
pub fn detach(invocation: Invocation) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(invocation);
    }
}

impl HttpBody for Driven {
    type Data = Bytes;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(invocation) = &mut this.invocation
            && invocation.as_mut().poll(cx).is_ready()
        {
            this.invocation = None;
        }
        Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Driven {
    fn drop(&mut self) {
        if let Some(invocation) = self.invocation.take() {
            detach(invocation);
        }
    }
}
