//! Request bodies, read within their limits of size and time.

use bytes::Bytes;
use http::{Request, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;

/// Reads the body up to `limit` bytes: 413 beyond (by `Content-Length`, or while reading,
/// never buffering more), 408 when it arrives slower than the runtime settings allow, 400 if
/// unreadable; the status and what to fix. The bytes are copied into one buffer as they come, so
/// memory follows the bytes received, not the packets they came in.
pub async fn read_body(
    req: Request<Incoming>,
    limit: u64,
    settings: &crate::config::RuntimeSettings,
) -> Result<(http::request::Parts, Bytes), (u16, String)> {
    let too_large = || {
        (
            413,
            format!("request body is larger than the limit of {limit} bytes"),
        )
    };
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(too_large());
    }
    let (parts, mut body) = req.into_parts();
    let mut buf = bytes::BytesMut::with_capacity(declared.unwrap_or(0).min(64 << 10) as usize);
    let started = tokio::time::Instant::now();
    loop {
        let deadline = started + settings.body_allowance(buf.len() as u64);
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => {
                let rate = settings.min_body_bytes_per_sec;
                return Err((
                    408,
                    format!(
                        "the request body arrived too slowly ({} bytes in {:.1} s; send at least {rate} bytes/s)",
                        buf.len(),
                        started.elapsed().as_secs_f64()
                    ),
                ));
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err((400, format!("cannot read the request body: {e}"))),
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    if (buf.len() + data.len()) as u64 > limit {
                        return Err(too_large());
                    }
                    buf.extend_from_slice(&data);
                }
            }
        }
    }
    Ok((parts, buf.freeze()))
}
