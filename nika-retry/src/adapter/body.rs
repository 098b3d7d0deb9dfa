//! A response body after its headers: how an adapter reads it ([`ReadBody`])
//! and what the caller gets ([`TimedBody`]), held to the attempt's `read`
//! and the call's `total` past the layer's return, as a
//! [`Started`](crate::stream::Started) stream is.

use core::fmt;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use bytes::Buf;
use futures_core::{FusedStream, Stream};
use http_body::{Body, Frame, SizeHint};

use crate::stream::{Started, StreamError, carried_in_force, carrying, replaying, started_when};

/// How an adapter reads a response's body, inside the attempt or after it.
///
/// - [`ReadBody::LIMITS`] (the default): the body is the caller's once the
///   headers are in, held to the attempt's `read` (inactivity since its last
///   frame) and the call's `total`; on expiry it yields one error (the
///   caller's error type, from a [`TimeoutError`](crate::TimeoutError)),
///   then ends. Nothing in the body is retried.
/// - [`ReadBody::WHOLE`]: the body is read to its end inside the attempt (a
///   non-streamed completion): a body cut, or stalled past `read`, fails the
///   attempt, which is retried as any other; the caller gets the body whole.
/// - [`ReadBody::FIRST_CONTENT`] / [`ReadBody::first_content_when`]: a
///   streamed body (server-sent events) is held inside the attempt until
///   its first content, as [`stream::started_when`](crate::stream::started_when)
///   holds a stream in an annotated fn: a cut or a stall before it fails the
///   attempt (retried), after it the body is the caller's under `read` and
///   `total`, and `gen_ai.response.time_to_first_chunk` is recorded on the
///   attempt's span. A response of 400 or more is not held (its body is
///   read as with `LIMITS`).
///
/// For the `tower` layer it is a layer of its own, placed right below the
/// [`RetryLayer`](crate::tower::RetryLayer) (where the attempt is in
/// force); the `reqwest_middleware` middleware takes it as
/// [`Retry::read_body`](crate::reqwest_middleware::Retry::read_body).
///
/// ```
/// use nika_retry::tower::ReadBody;
///
/// // A server-sent event that is a token, not a `: ping` comment.
/// let streamed = ReadBody::first_content_when(|data: &[u8]| data.starts_with(b"data:"));
/// assert_eq!(format!("{streamed:?}"), "ReadBody::FirstContentWhen(..)");
/// assert_eq!(format!("{:?}", ReadBody::default()), "ReadBody::LIMITS");
/// ```
#[derive(Clone, Default)]
pub struct ReadBody {
    mode: Mode,
}

/// What [`ReadBody`] does.
#[derive(Clone, Default)]
enum Mode {
    #[default]
    Limits,
    Whole,
    /// `None`: any data frame that is not empty is content.
    FirstContent(Option<IsContent>),
}

/// Which data frames are content ([`ReadBody::first_content_when`]).
type IsContent = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

impl ReadBody {
    /// The body is the caller's once the headers are in, held to `read`
    /// (inactivity since its last frame) and `total`.
    pub const LIMITS: ReadBody = ReadBody { mode: Mode::Limits };

    /// The body is read whole inside the attempt: a cut or a stall fails
    /// the attempt, which is retried.
    pub const WHOLE: ReadBody = ReadBody { mode: Mode::Whole };

    /// The body is held inside the attempt until its first data frame that
    /// is not empty, then is the caller's under `read` and `total`.
    pub const FIRST_CONTENT: ReadBody = ReadBody {
        mode: Mode::FirstContent(None),
    };

    /// [`FIRST_CONTENT`](ReadBody::FIRST_CONTENT), where `is_content` says
    /// which data frames are content (the others, a `: ping` or a usage
    /// event, are held and handed to the caller before it). It sees each
    /// frame's bytes as they came: a server that splits an event across
    /// frames needs a predicate that says so.
    pub fn first_content_when(
        is_content: impl Fn(&[u8]) -> bool + Send + Sync + 'static,
    ) -> ReadBody {
        ReadBody {
            mode: Mode::FirstContent(Some(Arc::new(is_content))),
        }
    }

    /// Whether this mode reads anything inside the attempt, or the limits
    /// it carries would hold the body (`read` or `total` set).
    #[cfg(feature = "reqwest-middleware")]
    pub(crate) fn acts(&self, limited: bool) -> bool {
        !matches!(self.mode, Mode::Limits) || limited
    }

    /// `body`, read as this mode says, inside the attempt that received the
    /// headers (its limits are those in force): `success` (a status below
    /// 400) is what a streamed body is held for.
    pub(crate) async fn read<B, E>(&self, body: B, success: bool) -> Result<TimedBody<B, E>, E>
    where
        B: Body,
        E: FromBodyError<B::Error> + StreamError,
    {
        // What the body says of its length (`content-length`), for a body
        // handed on unread; a body read whole is exactly what was read.
        let mut size_hint = Some(body.size_hint());
        let mut frames = Frames {
            body: Box::pin(body),
            error: E::from_body_error,
        };
        let (started, time_to_first_content) = match &self.mode {
            Mode::Whole => {
                let mut items = Vec::new();
                let mut length = 0;
                while let Some(item) =
                    core::future::poll_fn(|cx| Pin::new(&mut frames).poll_next(cx)).await
                {
                    let frame = item?;
                    length += frame.data_ref().map_or(0, |data| data.remaining() as u64);
                    items.push(Ok(frame));
                }
                size_hint = Some(SizeHint::with_exact(length));
                (replaying(items), None)
            }
            Mode::FirstContent(is_content) if success => {
                let is_content = |frame: &Frame<B::Data>| {
                    frame.data_ref().is_some_and(|data| match is_content {
                        Some(is_content) => is_content(data.chunk()),
                        None => data.has_remaining(),
                    })
                };
                let started = started_when(frames, is_content).await?;
                // Partly read: what is left is not known.
                size_hint = None;
                let took = started.time_to_first_content();
                (started, Some(took))
            }
            _ => (carrying(frames, carried_in_force().await), None),
        };
        Ok(TimedBody {
            started,
            time_to_first_content,
            size_hint,
        })
    }
}

impl fmt::Debug for ReadBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match &self.mode {
            Mode::Limits => "ReadBody::LIMITS",
            Mode::Whole => "ReadBody::WHOLE",
            Mode::FirstContent(None) => "ReadBody::FIRST_CONTENT",
            Mode::FirstContent(Some(_)) => "ReadBody::FirstContentWhen(..)",
        })
    }
}

/// The caller's error type holds the body's: every `E: From<BE>`. A
/// failure of the body read inside the attempt is classified as the
/// caller's error, and one after it is the caller's item. Implemented for
/// each such type; not to be implemented by hand.
///
/// ```
/// use nika_retry::tower::FromBodyError;
///
/// #[derive(Debug, thiserror::Error)]
/// enum Fault {
///     #[error(transparent)]
///     Body(#[from] std::io::Error),
/// }
///
/// fn holds<E: FromBodyError<std::io::Error>>() {}
/// holds::<Fault>();
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}`, the inner service's error, cannot hold the response body's error `{BE}`: `ReadBody` needs `{Self}: From<{BE}>`",
    label = "the inner service's error needs `From<{BE}>`",
    note = "add a variant such as `#[error(transparent)] #[category(transient)] Body(#[from] hyper::Error)` to your error type: a body cut inside the attempt is retried as that error, one after it is the caller's"
)]
pub trait FromBodyError<BE> {
    /// The body's error, as the caller's.
    fn from_body_error(error: BE) -> Self;
}

#[diagnostic::do_not_recommend]
impl<E: From<BE>, BE> FromBodyError<BE> for E {
    fn from_body_error(error: BE) -> Self {
        E::from(error)
    }
}

/// A body's frames as a stream of the caller's results.
struct Frames<B: Body, E> {
    body: Pin<Box<B>>,
    /// The body's error as the caller's ([`FromBodyError`], asked for where
    /// the body is read: the type needs no bound).
    error: fn(B::Error) -> E,
}

impl<B: Body, E> Stream for Frames<B, E> {
    type Item = Result<Frame<B::Data>, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.body
            .as_mut()
            .poll_frame(cx)
            .map(|frame| frame.map(|frame| frame.map_err(self.error)))
    }
}

/// A response body as an adapter hands it back ([`ReadBody`]): the frames
/// read inside the attempt, then (if it was not read whole) the rest, under
/// the attempt's `read` (inactivity since the last frame) and the call's
/// `total`. On expiry it yields one error, `E::from(TimeoutError)`, and
/// ends; the inner body is dropped then (the connection closes). Its
/// errors are the caller's `E` (the inner service's error, or one it is
/// converted into).
///
/// ```
/// use http_body_util::BodyExt;
/// use nika_retry::tower::{ReadBody, TimedBody};
/// use nika_retry::TimeoutError;
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// #[derive(Debug, thiserror::Error)]
/// enum Fault {
///     #[error(transparent)]
///     Timeout(#[from] TimeoutError),
///     #[error(transparent)]
///     Never(#[from] std::convert::Infallible),
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let server = tower::service_fn(|_: http::Request<()>| async {
///     Ok::<_, Fault>(http::Response::new(String::from("hello")))
/// });
/// let mut client = ServiceBuilder::new().layer(ReadBody::WHOLE).service(server);
/// let response = client.ready().await.unwrap().call(http::Request::new(())).await.unwrap();
/// let body: TimedBody<String, Fault> = response.into_body();
/// assert_eq!(body.time_to_first_content(), None);
/// assert_eq!(body.collect().await.unwrap().to_bytes(), "hello");
/// # }
/// ```
pub struct TimedBody<B: Body, E> {
    started: Started<Frames<B, E>>,
    time_to_first_content: Option<Duration>,
    /// The body's length as known before its first frame is polled (then
    /// `None`: `size_hint` is what is left, which the replay does not track).
    size_hint: Option<SizeHint>,
}

impl<B: Body, E> TimedBody<B, E> {
    /// How long the first content took, from the start of the call (its
    /// first attempt): with [`ReadBody::FIRST_CONTENT`] only.
    // The middleware hands the body back inside a `reqwest::Body`.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub fn time_to_first_content(&self) -> Option<Duration> {
        self.time_to_first_content
    }
}

impl<B, E> Body for TimedBody<B, E>
where
    B: Body,
    E: StreamError,
{
    type Data = B::Data;
    type Error = E;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, E>>> {
        let this = self.get_mut();
        this.size_hint = None;
        Pin::new(&mut this.started).poll_next(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.started.is_terminated()
    }

    fn size_hint(&self) -> SizeHint {
        self.size_hint.unwrap_or_default()
    }
}

impl<B: Body, E> fmt::Debug for TimedBody<B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimedBody")
            .field("body", &core::any::type_name::<B>())
            .field("time_to_first_content", &self.time_to_first_content)
            .finish_non_exhaustive()
    }
}
