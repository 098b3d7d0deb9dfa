//! Streamed responses under the policy of the fn that opened them:
//! retried only before the first content, `read` and `total` followed
//! past the fn's return.
//!
//! An LLM provider answers with a stream (server-sent events over a chunked
//! body), and the fn that sends the request returns once the headers are in.
//! In the body of that fn, [`started`] (or [`started_when`]) awaits the
//! stream's first content:
//!
//! - **before it**, everything belongs to the attempt: an `Err` item fails
//!   the attempt (classified, retried in the same budget, with the same
//!   events, as any attempt), and the attempt's `read` and `attempt` limits
//!   and the call's `total` apply. What came before the content (a metadata
//!   chunk, say) is held; a failed attempt's held items are dropped.
//! - **after it**, the fn returns a [`Started`] stream: it yields the held
//!   items once, in order, then the rest. Nothing after the first content is
//!   ever retried (the caller has seen output). It carries the fn's `read`
//!   limit (inactivity between items: every item restarts it) and the call's
//!   `total` deadline: on expiry it yields one `Err(E::from(TimeoutError))`
//!   with that [`Boundary`](crate::Boundary), then ends. A stream that keeps
//!   delivering is never cut by `read`.
//! - [`Started::time_to_first_content`] counts from the start of the call,
//!   the first attempt, so a retry does not hide the latency it cost.
//! - [`Started::resume_with`] opts in to a way back after content: a cut
//!   or a stall the fn's layer would retry calls a closure that opens the
//!   rest (by cursor, or by the text so far), as the next attempt of the
//!   same call ([`Resuming`]).
//!
//! ```
//! use std::time::Duration;
//! use futures_core::Stream;
//! use nika_retry::stream::{self, Started};
//! use nika_retry::{retry, timeout, Classify, TimeoutError};
//!
//! #[derive(Debug, thiserror::Error, Classify)]
//! pub enum ProviderError {
//!     /// The server dropped the body: worth another attempt before any content.
//!     #[error("connection reset")]
//!     #[category(transient)]
//!     Reset,
//!     #[error(transparent)]
//!     #[category(transparent)]
//!     Timeout(#[from] TimeoutError),
//! }
//!
//! /// One server-sent event of the response.
//! #[derive(Debug, PartialEq)]
//! pub enum Event {
//!     Usage(u32),
//!     Token(String),
//! }
//!
//! /// Sends the request; returns once the first token is in (the usage
//! /// chunk before it is held and replayed). A stall before the first token
//! /// is retried; after it, `read` cuts a stall of 120 s and the stream ends.
//! #[retry(layer = "provider")]
//! #[timeout(read = "120s")]
//! async fn complete(
//!     prompt: &str,
//! ) -> Result<Started<impl Stream<Item = Result<Event, ProviderError>> + Unpin>, ProviderError> {
//!     let events = send(prompt).await?;
//!     stream::started_when(events, |event: &Event| matches!(event, Event::Token(_))).await
//! }
//! # fn send(
//! #     prompt: &str,
//! # ) -> impl core::future::Future<
//! #     Output = Result<impl Stream<Item = Result<Event, ProviderError>> + Unpin, ProviderError>,
//! # > {
//! #     let events = vec![Ok(Event::Usage(7)), Ok(Event::Token(prompt.to_owned()))];
//! #     core::future::ready(Ok(Items(events.into_iter())))
//! # }
//! # struct Items(std::vec::IntoIter<Result<Event, ProviderError>>);
//! # impl Stream for Items {
//! #     type Item = Result<Event, ProviderError>;
//! #     fn poll_next(
//! #         mut self: core::pin::Pin<&mut Self>,
//! #         _: &mut core::task::Context<'_>,
//! #     ) -> core::task::Poll<Option<Self::Item>> {
//! #         core::task::Poll::Ready(self.0.next())
//! #     }
//! # }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! # use core::future::poll_fn;
//! # use core::pin::Pin;
//! let mut events = complete("hi").await.unwrap();
//! let next = poll_fn(|cx| Pin::new(&mut events).poll_next(cx));
//! assert_eq!(next.await.unwrap().unwrap(), Event::Usage(7));
//! # }
//! ```
//!
//! `started` takes a stream that is `Unpin` (as reqwest's `bytes_stream`
//! is); a stream that is not (one written with `async-stream`, say) goes in
//! as `Box::pin(stream)`.
//!
//! Await `started` in the body of the annotated fn: the limits it carries are
//! those in force where it is first polled. Outside an annotated fn (or in a
//! task spawned from one) it only waits for the first content, and the
//! [`Started`] it gives applies no limit.

mod carried;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
mod in_force;
mod resume;
#[cfg(test)]
mod resume_tests;
mod resumer;
mod resuming;
mod started;
mod starting;
#[cfg(test)]
mod tests;

use crate::vocab::timeout_error::TimeoutError;
#[cfg(any(feature = "tower", feature = "reqwest-middleware"))]
pub(crate) use in_force::{carried_in_force, carrying, replaying};
pub use resume::Resume;
pub use resuming::Resuming;
pub use started::Started;
pub use starting::Starting;

/// The most items held before the first content: past it the stream counts
/// as started, so that a predicate that never says "content" cannot hold a
/// whole response in memory.
///
/// The item that reaches the bound is the last one held: from then on the
/// stream is the caller's, as after content, and is never retried.
///
/// ```
/// assert_eq!(nika_retry::stream::MAX_HELD, 64);
/// ```
pub const MAX_HELD: usize = 64;

/// The error type of a stream given to [`started`]: it must hold a
/// [`TimeoutError`], the item a [`Started`] yields when `read` or `total`
/// expires. Every `E: From<TimeoutError>` is one.
///
/// ```
/// use nika_retry::stream::StreamError;
/// use nika_retry::{Boundary, Layer, TimeoutError};
///
/// let expired = TimeoutError::new(Boundary::Read, std::time::Duration::from_secs(120), Layer::Provider);
/// let err = <std::io::Error as StreamError>::from_timeout(expired);
/// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold a timeout: `nika_retry::stream::started` needs the stream's error type to implement `From<nika_retry::TimeoutError>`",
    label = "this stream's error type needs `From<nika_retry::TimeoutError>`",
    note = "`Started` yields `Err(E::from(TimeoutError))` when `read` or `total` expires after the first content",
    note = "for your own error type, add a variant such as `#[error(transparent)] #[category(transparent)] Timeout(#[from] nika_retry::TimeoutError)`; for a type from another crate (`reqwest::Error`), map the stream's errors into your own type first"
)]
pub trait StreamError {
    /// The error for an expired limit.
    fn from_timeout(error: TimeoutError) -> Self;
}

impl<E: From<TimeoutError>> StreamError for E {
    #[inline]
    fn from_timeout(error: TimeoutError) -> Self {
        E::from(error)
    }
}

/// Awaits the first `Ok` item of `stream`, then gives the stream back as a
/// [`Started`] that yields that item first, under the limits of the
/// annotated fn it is awaited in.
///
/// An `Err` item before it is the output (`?` then fails the attempt, which
/// the loop retries as any other); a stream that ends with no item gives a
/// [`Started`] that ends at once.
///
/// ```
/// use core::pin::Pin;
/// use core::task::{Context, Poll};
/// use futures_core::Stream;
/// use nika_retry::{retry, stream, Classify, TimeoutError};
///
/// #[derive(Debug, Classify)]
/// #[category(default = transient)]
/// enum Error { Timeout(TimeoutError) }
/// impl From<TimeoutError> for Error { fn from(e: TimeoutError) -> Error { Error::Timeout(e) } }
///
/// /// Fails its first attempt before any content, then delivers.
/// struct Flaky(u32);
/// impl Stream for Flaky {
///     type Item = Result<&'static str, Error>;
///     fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
///         self.0 += 1;
///         Poll::Ready(Some(Ok("token")))
///     }
/// }
///
/// #[retry(layer = "provider", backoff = "1ms")]
/// async fn open(n: &mut u32) -> Result<stream::Started<Flaky>, Error> {
///     *n += 1;
///     if *n == 1 {
///         // The server accepted, then dropped the body: nothing shown yet.
///         let cut = TimeoutError::new(nika_retry::Boundary::Read, Default::default(), nika_retry::Layer::Provider);
///         return Err(Error::Timeout(cut));
///     }
///     stream::started(Flaky(0)).await
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut attempts = 0;
/// let events = open(&mut attempts).await.unwrap();
/// assert_eq!(attempts, 2);
/// # let _ = events;
/// # }
/// ```
pub fn started<S, T, E>(stream: S) -> Starting<S, fn(&T) -> bool>
where
    S: futures_core::Stream<Item = Result<T, E>> + Unpin,
    E: StreamError,
{
    fn any_item<T>(_: &T) -> bool {
        true
    }
    Starting::new(stream, any_item::<T>)
}

/// [`started`], where `is_content` says which `Ok` items are content: the
/// others (a usage or metadata chunk) are held and replayed, never a reason
/// to stop retrying.
///
/// A predicate that never says "content" makes the stream behave as one
/// that ended, or reached [`MAX_HELD`], without content: the held items
/// are replayed once, then the rest of the stream, if any.
///
/// ```
/// use core::pin::Pin;
/// use core::task::{Context, Poll};
/// use futures_core::Stream;
/// use nika_retry::{stream, TimeoutError};
///
/// struct Events(std::vec::IntoIter<&'static str>);
/// impl Stream for Events {
///     type Item = Result<&'static str, std::io::Error>;
///     fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
///         Poll::Ready(self.0.next().map(Ok))
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let events = Events(vec![": ping", "usage", "Hello", "world"].into_iter());
/// let mut events = stream::started_when(events, |e: &&str| !e.starts_with(':') && *e != "usage")
///     .await
///     .unwrap();
/// let mut seen = Vec::new();
/// while let Some(event) = core::future::poll_fn(|cx| Pin::new(&mut events).poll_next(cx)).await {
///     seen.push(event.unwrap());
/// }
/// assert_eq!(seen, [": ping", "usage", "Hello", "world"]);
/// # }
/// ```
pub fn started_when<S, T, E, P>(stream: S, is_content: P) -> Starting<S, P>
where
    S: futures_core::Stream<Item = Result<T, E>> + Unpin,
    E: StreamError,
    P: FnMut(&T) -> bool,
{
    Starting::new(stream, is_content)
}
