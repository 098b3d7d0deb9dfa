//! [`Resuming`]: a started stream that continues after a cut, under the
//! policy of the call that opened it ([`Started::resume_with`]).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, ready};
use core::time::Duration;

use futures_core::{FusedStream, Stream};

use super::resumer::{Resumer, resume};
use super::{Resume, Started, StreamError};
use crate::vocab::classify::Classify;

/// A resume in flight: its attempts, then the stream it opened (or the
/// last error), with the resumer given back.
type InFlight<R, E, F> = Pin<Box<dyn Future<Output = (Result<Started<R>, E>, Resumer<F>)> + Send>>;

/// A [`Started`] stream that resumes: an `Err` item that the call's layer
/// would retry is not the caller's; the closure opens the rest, and its
/// items follow on. Made by [`Started::resume_with`], which says when it
/// resumes and what a resume spends.
///
/// It yields the items of the stream, then of each resume, in order. When
/// the call has nothing left (its attempts, its budget, its `total`), or
/// the error is not one its layer retries, that error is the caller's last
/// item, and the stream ends. Dropping it drops the stream in use, or the
/// resume in flight (its sleep, its request): nothing more is sent.
///
/// ```
/// # use nika_retry::stream::{Resume, Resuming, Started};
/// # fn _f<S, R, F, E>(s: Resuming<S, R, F, E>) where S: futures_core::Stream, R: futures_core::Stream {
/// let _ttfc = s.time_to_first_content();
/// # }
/// ```
pub struct Resuming<S: Stream, R: Stream, F, E> {
    /// The stream as the call started it, until its first resume.
    first: Option<Started<S>>,
    /// The stream the last resume opened.
    rest: Option<Started<R>>,
    /// `None`: it never resumes (outside a `#[retry]` fn, or a call that is
    /// not idempotent), or a resume is in flight with it.
    resumer: Option<Resumer<F>>,
    /// A resume in flight: one allocation per resume, none per item.
    in_flight: Option<InFlight<R, E, F>>,
    /// The items given to the caller.
    delivered: u64,
    time_to_first_content: Duration,
    ended: bool,
}

// No field is pinned: the streams are `Unpin` (polled through `Pin::new`),
// the resume in flight is boxed, the closure is moved, never polled.
impl<S: Stream, R: Stream, F, E> Unpin for Resuming<S, R, F, E> {}

impl<S, T, E> Started<S>
where
    S: Stream<Item = Result<T, E>> + Unpin,
    E: StreamError,
{
    /// This stream, resumed by `f` after a cut: an `Err` item that the fn's
    /// layer would retry, after content, is not handed to the caller;
    /// `f(Resume)` opens the rest, and its items follow on.
    ///
    /// The resume is the same call as the fn that started the stream:
    ///
    /// - **Which failures.** What the fn's layer retries (its `Classify`:
    ///   transient, rate limited at the provider layer, a `read` stall),
    ///   never a `total` expiry, never a call that is not idempotent
    ///   (`idempotent = false`, or nested in one): for those the error is
    ///   the caller's item, as without `resume_with`.
    /// - **What it spends.** Each resume is an attempt of the call: it
    ///   spends one of its attempts and of the budget of the calls around
    ///   it, sleeps its layer's backoff (or a server's hint), passes its
    ///   upstream (a hold or pacing makes it wait, and counts it), carries
    ///   its `read`, its `total` and its idempotency key
    ///   ([`current_attempt`](crate::current_attempt) inside `f` says the
    ///   attempt and the key). The config is the fn's attribute or the task
    ///   scope in force; a `config = …` expression is not evaluated again.
    /// - **Before its content.** `f` awaits [`started`](super::started) (or
    ///   [`started_when`](super::started_when)) on the new stream: what it
    ///   holds before its content is replayed by the same rule, and a
    ///   failure before that content fails the resume's attempt, which is
    ///   retried as any attempt.
    /// - **Events.** Each resume is a [`RetryEvent`](crate::events::RetryEvent)
    ///   with [`Outcome::Resuming`](crate::events::Outcome::Resuming) and
    ///   `resumed_after` (the items delivered so far).
    /// - **When nothing is left**, the last error is the caller's item, then
    ///   the end. [`time_to_first_content`](Resuming::time_to_first_content)
    ///   is the first content's, unchanged by resumes.
    ///
    /// `f` sends the request itself, not through the annotated fn (the
    /// resume is already an attempt of that fn's call), and carries what
    /// the provider needs to continue: a cursor ([`Resume::delivered`], or
    /// the last event number the caller saw) or the text so far.
    ///
    /// ```
    /// use core::pin::Pin;
    /// use core::task::{Context, Poll};
    /// use futures_core::Stream;
    /// use nika_retry::stream::{self, Resume, Started};
    /// use nika_retry::{retry, Classify, TimeoutError};
    ///
    /// #[derive(Debug, thiserror::Error, Classify)]
    /// enum Error {
    ///     #[error("connection reset")]
    ///     #[category(transient)]
    ///     Reset,
    ///     #[error(transparent)]
    ///     #[category(transparent)]
    ///     Timeout(#[from] TimeoutError),
    /// }
    ///
    /// /// Events `from..to`, then a reset if `to` is short of 6.
    /// struct Events { next: u32, to: u32 }
    /// impl Stream for Events {
    ///     type Item = Result<u32, Error>;
    ///     fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
    ///         let n = self.next;
    ///         self.next += 1;
    ///         Poll::Ready(match n {
    ///             n if n < self.to => Some(Ok(n)),
    ///             n if n == self.to && n < 6 => Some(Err(Error::Reset)),
    ///             _ => None,
    ///         })
    ///     }
    /// }
    ///
    /// /// The server: events from `from`, cut after the third of the first request.
    /// async fn send(from: u32) -> Result<Events, Error> {
    ///     Ok(Events { next: from, to: if from == 0 { 3 } else { 6 } })
    /// }
    ///
    /// #[retry(layer = "provider", backoff = "10ms")]
    /// async fn complete() -> Result<Started<Events>, Error> {
    ///     stream::started(send(0).await?).await
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let events = complete().await.unwrap().resume_with(|resume: Resume| async move {
    ///     // The cursor: one event per item, numbered from 0.
    ///     let from = resume.delivered() as u32;
    ///     stream::started(send(from).await?).await
    /// });
    /// let mut events = core::pin::pin!(events);
    /// let mut seen = Vec::new();
    /// while let Some(n) = core::future::poll_fn(|cx| events.as_mut().poll_next(cx)).await {
    ///     seen.push(n.unwrap());
    /// }
    /// assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
    /// # }
    /// ```
    pub fn resume_with<F, Fut, R>(mut self, f: F) -> Resuming<S, R, F, E>
    where
        F: FnMut(Resume) -> Fut + Send + 'static,
        Fut: Future<Output = Result<Started<R>, E>> + Send + 'static,
        R: Stream<Item = Result<T, E>> + Unpin + Send + 'static,
        T: Send + 'static,
        E: Classify + Send + 'static,
    {
        let resumer = self.take_point().map(|point| Resumer::new(&point, f));
        Resuming {
            time_to_first_content: self.time_to_first_content(),
            first: Some(self),
            rest: None,
            resumer,
            in_flight: None,
            delivered: 0,
            ended: false,
        }
    }
}

impl<S: Stream, R: Stream, F, E> Resuming<S, R, F, E> {
    /// How long the first content took, from the start of the call
    /// ([`Started::time_to_first_content`]): a resume does not change it.
    pub fn time_to_first_content(&self) -> Duration {
        self.time_to_first_content
    }

    /// The items given to the caller so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }
}

impl<S, R, T, E, F, Fut> Stream for Resuming<S, R, F, E>
where
    S: Stream<Item = Result<T, E>> + Unpin,
    R: Stream<Item = Result<T, E>> + Unpin + Send + 'static,
    F: FnMut(Resume) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Started<R>, E>> + Send + 'static,
    T: Send + 'static,
    E: Classify + StreamError + Send + 'static,
{
    type Item = Result<T, E>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(in_flight) = &mut this.in_flight {
                let (opened, resumer) = ready!(in_flight.as_mut().poll(cx));
                this.in_flight = None;
                match opened {
                    Ok(rest) => {
                        this.rest = Some(rest);
                        this.resumer = Some(resumer);
                    }
                    Err(last) => {
                        this.ended = true;
                        this.delivered += 1;
                        return Poll::Ready(Some(Err(last)));
                    }
                }
            }
            if this.ended {
                return Poll::Ready(None);
            }
            let item = match (&mut this.rest, &mut this.first) {
                (Some(rest), _) => ready!(Pin::new(rest).poll_next(cx)),
                (None, Some(first)) => ready!(Pin::new(first).poll_next(cx)),
                (None, None) => None,
            };
            match item {
                Some(Err(cut)) if this.resumer.is_some() => {
                    // The broken stream goes now: its connection closes.
                    (this.first, this.rest) = (None, None);
                    if let Some(resumer) = this.resumer.take() {
                        this.in_flight = Some(Box::pin(resume(resumer, cut, this.delivered)));
                    }
                }
                Some(item) => {
                    this.delivered += 1;
                    return Poll::Ready(Some(item));
                }
                None => {
                    this.ended = true;
                    (this.first, this.rest) = (None, None);
                    return Poll::Ready(None);
                }
            }
        }
    }
}

impl<S, R, T, E, F, Fut> FusedStream for Resuming<S, R, F, E>
where
    S: Stream<Item = Result<T, E>> + Unpin,
    R: Stream<Item = Result<T, E>> + Unpin + Send + 'static,
    F: FnMut(Resume) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Started<R>, E>> + Send + 'static,
    T: Send + 'static,
    E: Classify + StreamError + Send + 'static,
{
    fn is_terminated(&self) -> bool {
        self.ended
    }
}

impl<S: Stream, R: Stream, F, E> fmt::Debug for Resuming<S, R, F, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resuming")
            .field("first", &self.first)
            .field("rest", &self.rest)
            .field("resumes", &self.resumer.is_some())
            .field("resuming", &self.in_flight.is_some())
            .field("delivered", &self.delivered)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}
