//! The fault scripts every contender of `tests/peers.rs` meets, the bodies
//! it sends, and what the server saw: one place, so that the rows of
//! docs/comparisons.md's side-by-side table compare the same thing.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use nika_retry_tests::fault::{Fault, FaultServer};

/// The server's hint, in seconds: the `Retry-After` of a 503 and of the
/// 429s of the limit window, and how long that window lasts.
pub const HINT: u64 = 2;

/// How many calls share the limit window of [`limit_window`].
pub const SIBLINGS: usize = 5;

/// A 503 asking for [`HINT`] seconds, then `200 OK`.
pub fn retry_after() -> Vec<Fault> {
    vec![Fault::UnavailableFor(HINT), Fault::ok("ok")]
}

/// A rate limit opened by the first request: for [`HINT`] seconds every
/// request is a 429 with `Retry-After: HINT`, then every one is a 200.
pub fn limit_window() -> Vec<Fault> {
    vec![Fault::LimitWindow {
        window: Duration::from_secs(HINT),
        retry_after: HINT,
    }]
}

/// A 503 without a hint, then `200 OK`: a failure the retry would fix.
pub fn unavailable_then_ok() -> Vec<Fault> {
    vec![Fault::Status(503), Fault::ok("ok")]
}

/// 503 on every request: what nested retries multiply.
pub fn always_unavailable() -> Vec<Fault> {
    vec![Fault::Status(503)]
}

/// How long after the first request the second arrived.
pub fn gap(server: &FaultServer) -> Duration {
    let hits = server.hits();
    assert!(hits.len() >= 2, "{} requests, not a retry", hits.len());
    hits[1].at - hits[0].at
}

/// Whether the server has answered the first request.
pub fn first_answered(server: &FaultServer) -> bool {
    server
        .hits()
        .first()
        .is_some_and(|hit| hit.answered.is_some())
}

/// [`SIBLINGS`] calls made by `call`: the first alone, the others once
/// `ready()` says its answer is in (on the paused clock, whatever the
/// machine's load), so none of them can overtake the first's 429.
pub async fn siblings<F, Fut, T>(ready: impl Fn() -> bool, call: F) -> Vec<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = T>,
{
    nika_retry_tests::behind_first::behind_first(SIBLINGS, ready, call).await
}

/// The bytes a request sends.
pub const PAYLOAD: &str = "payload";

/// A body that cannot be replayed: a stream, read once as it is sent.
pub fn byte_stream() -> futures_util::stream::Iter<std::vec::IntoIter<Result<Bytes, Infallible>>> {
    futures_util::stream::iter(vec![Ok(Bytes::from_static(PAYLOAD.as_bytes()))])
}

/// [`byte_stream`] as a hyper body.
pub type Streamed =
    StreamBody<futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>>;

/// A hyper body that cannot be replayed.
pub fn streamed() -> Streamed {
    let frame = Frame::data(Bytes::from_static(PAYLOAD.as_bytes()));
    StreamBody::new(futures_util::stream::iter(vec![Ok(frame)]))
}

/// The lines a `tracing` subscriber printed whose target is a retry
/// library's (this crate's, reqwest-retry's, tower's retry), not the
/// clients' own (hyper-util's connection lines, in an attempt's span).
pub fn retry_lines(text: &str) -> Vec<&str> {
    const TARGETS: [&str; 3] = [" nika_retry: ", " reqwest_retry::", " tower::retry"];
    text.lines()
        .filter(|line| TARGETS.iter().any(|target| line.contains(target)))
        .collect()
}
