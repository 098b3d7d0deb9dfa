//! [`Started`]: a stream past its first content, under `read` and `total`.

use core::fmt;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use futures_core::{FusedStream, Stream};
use tokio::time::{Instant, Sleep};

use super::StreamError;
use super::carried::Carried;
use super::resumer::ResumePoint;
use crate::time::Total;
use crate::vocab::timeout_error::{Boundary, TimeoutError};

pin_project_lite::pin_project! {
    /// A stream past its first content: the items held before it, replayed
    /// once and in order, then the rest of the stream, under the fn's `read`
    /// limit and the call's `total` deadline.
    ///
    /// Nothing here is retried: a failure is an `Err` item for the caller,
    /// unless [`resume_with`](Started::resume_with) gives the stream a way
    /// back.
    /// When `read` (inactivity: every item restarts it) or `total` expires,
    /// it yields one `Err(E::from(TimeoutError))` with that
    /// [`Boundary`], drops the stream (the connection closes), and ends for
    /// good. Items that arrive ready touch neither the clock nor a timer;
    /// the first time the stream waits under a limit, one timer is
    /// allocated, and reused to the end. Dropping a `Started` drops the
    /// stream. It is `Send` and `Unpin` when the stream is.
    ///
    /// ```
    /// use core::pin::Pin;
    /// use core::task::{Context, Poll};
    /// use std::time::Duration;
    /// use futures_core::Stream;
    /// use nika_retry::stream::{self, Started};
    /// use nika_retry::{retry, timeout, Boundary, Classify, TimeoutError};
    ///
    /// #[derive(Debug, thiserror::Error, Classify)]
    /// enum Error {
    ///     #[error(transparent)]
    ///     #[category(transparent)]
    ///     Timeout(#[from] TimeoutError),
    /// }
    ///
    /// /// One token, then silence.
    /// struct Stalls(bool);
    /// impl Stream for Stalls {
    ///     type Item = Result<&'static str, Error>;
    ///     fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
    ///         if core::mem::replace(&mut self.0, true) { Poll::Pending } else { Poll::Ready(Some(Ok("Hi"))) }
    ///     }
    /// }
    ///
    /// #[retry(layer = "provider")]
    /// #[timeout(read = "120s")]
    /// async fn complete() -> Result<Started<Stalls>, Error> {
    ///     stream::started(Stalls(false)).await
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let mut events = complete().await.unwrap();
    /// assert_eq!(next(&mut events).await.unwrap().unwrap(), "Hi");
    /// let Some(Err(Error::Timeout(cut))) = next(&mut events).await else { panic!("cut by read") };
    /// assert_eq!((cut.boundary(), cut.limit()), (Boundary::Read, Duration::from_secs(120)));
    /// assert!(next(&mut events).await.is_none(), "and then it ends");
    /// # }
    ///
    /// /// What `StreamExt::next` of futures-util or tokio-stream does.
    /// async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    ///     core::future::poll_fn(|cx| Pin::new(&mut *stream).poll_next(cx)).await
    /// }
    /// ```
    pub struct Started<S: Stream> {
        // `None` once it has ended or expired.
        #[pin]
        stream: Option<S>,
        // What is left to replay before the stream is polled again; `None`
        // once replayed, so the hot path tests one niche, not a flag kept
        // in step with two fields.
        replay: Option<Replay<S::Item>>,
        // `None`: no limit, and no timer ever.
        limits: Option<Carried>,
        // Armed the first time the stream waits under a limit; boxed so that
        // `Started` stays `Unpin` when the stream is.
        timer: Option<Pin<Box<Sleep>>>,
        // An item arrived since the timer was armed.
        moved: bool,
        time_to_first_content: Duration,
        // Where its call stood when the content came, for `resume_with`;
        // never touched per item.
        point: Option<ResumePoint>,
    }
}

impl<S: Stream> Started<S> {
    pub(crate) fn new(
        stream: Option<S>,
        held: Vec<S::Item>,
        content: Option<S::Item>,
        limits: Option<Carried>,
        time_to_first_content: Duration,
    ) -> Started<S> {
        let replay = (!held.is_empty() || content.is_some()).then(|| Replay {
            held: held.into_iter(),
            content,
        });
        Started {
            stream,
            replay,
            limits,
            timer: None,
            moved: false,
            time_to_first_content,
            point: None,
        }
    }

    /// The same stream, resumable from `point` (`None`: it never resumes).
    pub(super) fn at(mut self, point: Option<ResumePoint>) -> Started<S> {
        self.point = point;
        self
    }

    /// Its resume point, taken for [`resume_with`](Started::resume_with).
    pub(super) fn take_point(&mut self) -> Option<ResumePoint> {
        self.point.take()
    }

    /// How long the first content took, counted from the start of the call
    /// of the annotated fn (its first attempt), so that the retries it took
    /// are in it. Outside an annotated fn, from the first poll of
    /// [`started`](super::started). For a stream that ended (or reached
    /// [`MAX_HELD`](super::MAX_HELD) items) without content, until then.
    ///
    /// ```
    /// use core::pin::Pin;
    /// use core::task::{Context, Poll};
    /// use std::time::Duration;
    /// use futures_core::Stream;
    /// use nika_retry::stream;
    ///
    /// /// Its first item after a second.
    /// struct Slow(Pin<Box<tokio::time::Sleep>>);
    /// impl Stream for Slow {
    ///     type Item = Result<u8, std::io::Error>;
    ///     fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
    ///         self.0.as_mut().poll(cx).map(|()| Some(Ok(1)))
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let slow = Slow(Box::pin(tokio::time::sleep(Duration::from_secs(1))));
    /// let started = stream::started(slow).await.unwrap();
    /// assert_eq!(started.time_to_first_content(), Duration::from_secs(1));
    /// # }
    /// ```
    pub fn time_to_first_content(&self) -> Duration {
        self.time_to_first_content
    }

    /// Whether a timer has been allocated.
    #[cfg(test)]
    pub(super) fn has_timer(&self) -> bool {
        self.timer.is_some()
    }
}

impl<S, T, E> Stream for Started<S>
where
    S: Stream<Item = Result<T, E>>,
    E: StreamError,
{
    type Item = Result<T, E>;

    #[inline]
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.as_mut().project();
        if this.replay.is_some() {
            return Poll::Ready(replay(this.replay));
        }
        let Some(stream) = this.stream.as_pin_mut() else {
            return Poll::Ready(None);
        };
        // The poll is handed back as it came: rebuilding it from its item
        // costs a copy through the stack on every item.
        let poll = stream.poll_next(cx);
        match poll {
            Poll::Ready(Some(_)) => *this.moved = true,
            Poll::Ready(None) => self.project().stream.set(None),
            Poll::Pending => match *this.limits {
                None => {}
                Some(limits) => return self.wait(cx, limits),
            },
        }
        poll
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let replay = self.replay.as_ref().map_or(0, Replay::len);
        let Some(stream) = &self.stream else {
            return (replay, Some(replay));
        };
        let (low, high) = stream.size_hint();
        if self.limits.is_none() {
            return (
                low.saturating_add(replay),
                high.and_then(|h| h.checked_add(replay)),
            );
        }
        // An expiry may cut the stream at any item, with one item of its own.
        (
            replay + low.min(1),
            high.and_then(|h| h.checked_add(replay + 1)),
        )
    }
}

impl<S, T, E> Started<S>
where
    S: Stream<Item = Result<T, E>>,
    E: StreamError,
{
    /// The stream waits under a limit: arms the timer (or sets it again if
    /// an item arrived since it was armed) and polls it.
    #[cold]
    fn wait(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        limits: Carried,
    ) -> Poll<Option<Result<T, E>>> {
        let mut this = self.project();
        let timer = match this.timer {
            Some(timer) => {
                if core::mem::take(this.moved) && limits.read.is_some() {
                    timer.as_mut().reset(end(&limits));
                }
                timer
            }
            None => {
                *this.moved = false;
                let end = end(&limits);
                this.timer.insert(Box::pin(tokio::time::sleep_until(end)))
            }
        };
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let at = timer.deadline();
        let error = match limits.total {
            Some(total) if total.at <= at => {
                TimeoutError::new(Boundary::Total, total.limit(), limits.layer)
            }
            _ => TimeoutError::new(
                Boundary::Read,
                limits.read.unwrap_or_default(),
                limits.layer,
            ),
        };
        // Ends for good; the connection closes now, not when the caller drops it.
        this.stream.set(None);
        *this.timer = None;
        Poll::Ready(Some(Err(E::from_timeout(error))))
    }
}

/// The items a `Started` yields before it polls its stream again.
struct Replay<I> {
    held: std::vec::IntoIter<I>,
    // The content item, after the held ones.
    content: Option<I>,
}

impl<I> Replay<I> {
    fn len(&self) -> usize {
        self.held.len() + usize::from(self.content.is_some())
    }
}

/// The next item to replay; the replay ends (and its buffer is freed) with
/// its last item.
///
/// Inlined, not `#[cold]`: a call here returns the item through memory,
/// and the item every later poll gives then takes that way too: a copy
/// through the stack on every item of the stream, not only the replayed ones.
#[inline]
fn replay<I>(slot: &mut Option<Replay<I>>) -> Option<I> {
    let left = slot.as_mut()?;
    let item = left.held.next().or_else(|| left.content.take());
    if left.len() == 0 {
        *slot = None;
    }
    item
}

/// The end of an inactivity starting now, or the total deadline if sooner.
fn end(limits: &Carried) -> Instant {
    match (limits.read.map(crate::time::from_now), limits.total) {
        (Some(read), Some(total)) => read.min(total.at),
        (Some(read), None) => read,
        (None, Some(total)) => total.at,
        // `wait` runs only under a limit.
        (None, None) => Instant::now(),
    }
}

impl<S, T, E> FusedStream for Started<S>
where
    S: Stream<Item = Result<T, E>>,
    E: StreamError,
{
    fn is_terminated(&self) -> bool {
        self.replay.is_none() && self.stream.is_none()
    }
}

impl<S: Stream> fmt::Debug for Started<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Started")
            .field("stream", &core::any::type_name::<S>())
            .field("to_replay", &self.replay.as_ref().map_or(0, Replay::len))
            .field("read", &self.limits.and_then(|l| l.read))
            .field(
                "total",
                &self.limits.and_then(|l| l.total).map(Total::limit),
            )
            .field("layer", &self.limits.map(|l| l.layer))
            .field("time_to_first_content", &self.time_to_first_content)
            .field("ended", &self.stream.is_none())
            .finish_non_exhaustive()
    }
}
