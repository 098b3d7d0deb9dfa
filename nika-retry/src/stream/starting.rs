//! [`Starting`]: the future that awaits a stream's first content.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use futures_core::Stream;
use tokio::time::Instant;

use super::carried::Carried;
use super::resumer::ResumePoint;
use super::{MAX_HELD, Started};
use crate::ambient::{self, FrameInForce, SiteOf};
use crate::metrics::FirstChunk;

/// The future [`started`](super::started) and
/// [`started_when`](super::started_when) return: it polls the stream until
/// its first content, holding the `Ok` items before it, and gives a
/// [`Started`], or the first `Err` item.
///
/// The held items live in a `Vec` allocated at the first one (none for
/// [`started`](super::started), whose first `Ok` item is the content), and
/// at most [`MAX_HELD`] are held. It reads the limits in force, and the
/// clock, on its first poll, and the clock again when content arrives.
///
/// ```
/// use core::pin::Pin;
/// use core::task::{Context, Poll};
/// use futures_core::Stream;
/// use nika_retry::stream::{self, Started, Starting};
///
/// struct Once(Option<u8>);
/// impl Stream for Once {
///     type Item = Result<u8, std::io::Error>;
///     fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
///         Poll::Ready(self.0.take().map(Ok))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let starting: Starting<Once, fn(&u8) -> bool> = stream::started(Once(Some(1)));
/// let started: Started<Once> = starting.await.unwrap();
/// # let _ = started;
/// # }
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Starting<S: Stream, P> {
    /// `None` once the output is given.
    stream: Option<S>,
    is_content: P,
    held: Vec<S::Item>,
    /// The limits to carry, read on the first poll.
    limits: Option<Option<Carried>>,
    /// Where time to first content counts from.
    start: Option<Instant>,
    /// The fn it is awaited in, for its metrics (nothing without feature
    /// `opentelemetry`).
    first_chunk: FirstChunk,
    /// The `#[retry]` fn it is awaited in, for a resume.
    site: Option<SiteOf>,
}

impl<S: Stream, P> Starting<S, P> {
    pub(super) fn new(stream: S, is_content: P) -> Starting<S, P> {
        Starting {
            stream: Some(stream),
            is_content,
            held: Vec::new(),
            limits: None,
            start: None,
            first_chunk: FirstChunk::outside(),
            site: None,
        }
    }
}

// No field is pinned: the stream is `Unpin` (polled through `Pin::new`),
// the rest is plain data.
impl<S: Stream, P> Unpin for Starting<S, P> {}

// No `E: StreamError` here: `started` asks for it, and one unmet bound
// gives one error, its `on_unimplemented` message, not a second at `.await`.
impl<S, T, E, P> Future for Starting<S, P>
where
    S: Stream<Item = Result<T, E>> + Unpin,
    P: FnMut(&T) -> bool,
{
    type Output = Result<Started<S>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.limits.is_none() {
            let (limits, start) = match ambient::stream_frame() {
                FrameInForce::Outside => (None, None),
                FrameInForce::Frame(frame) => {
                    this.first_chunk = FirstChunk::of(frame.layer, frame.of);
                    this.site = frame.site;
                    (Carried::of(frame), frame.start)
                }
                // The innermost call puts its frame in force on its next
                // poll, which this wake-up asks for at once.
                FrameInForce::NotYet => {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            };
            this.limits = Some(limits);
            this.start = Some(start.unwrap_or_else(Instant::now));
        }
        let Some(stream) = this.stream.as_mut() else {
            panic!("`Starting` polled after it completed");
        };
        loop {
            match Pin::new(&mut *stream).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(item))) => {
                    if (this.is_content)(&item) || this.held.len() + 1 >= MAX_HELD {
                        return Poll::Ready(Ok(this.finish(Some(Ok(item)))));
                    }
                    this.held.push(Ok(item));
                }
                Poll::Ready(Some(Err(error))) => {
                    // The attempt fails: what it held is not the caller's.
                    this.stream = None;
                    this.held = Vec::new();
                    return Poll::Ready(Err(error));
                }
                Poll::Ready(None) => {
                    this.stream = None;
                    return Poll::Ready(Ok(this.finish(None)));
                }
            }
        }
    }
}

impl<S: Stream, P> Starting<S, P> {
    /// The stream as started, with `content` (if any) after the held items.
    fn finish(&mut self, content: Option<S::Item>) -> Started<S> {
        let start = self.start.unwrap_or_else(Instant::now);
        let time_to_first_content = start.elapsed();
        // OpenTelemetry's name, in seconds, on the span in force (the
        // attempt's, under the `tower` layer): recorded only where a span
        // declares it.
        #[cfg(feature = "tracing")]
        if content.is_some() {
            tracing::Span::current().record(
                "gen_ai.response.time_to_first_chunk",
                time_to_first_content.as_secs_f64(),
            );
        }
        // And as a metric, `gen_ai.client.operation.time_to_first_chunk`.
        if content.is_some() {
            self.first_chunk.came(time_to_first_content);
        }
        let limits = self.limits.flatten();
        let started = Started::new(
            self.stream.take(),
            core::mem::take(&mut self.held),
            content,
            limits,
            time_to_first_content,
        );
        // Where its call stands, for a resume: read now, inside the attempt.
        match self.site {
            Some(site) => started.at(ResumePoint::in_force(site, self.start, limits)),
            None => started,
        }
    }
}

impl<S: Stream, P> fmt::Debug for Starting<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Starting")
            .field("stream", &core::any::type_name::<S>())
            .field("held", &self.held.len())
            .field("done", &self.stream.is_none())
            .finish_non_exhaustive()
    }
}
