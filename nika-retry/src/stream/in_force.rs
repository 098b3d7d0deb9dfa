//! A [`Started`] built without awaiting content: for the adapters' response
//! bodies (`adapter::body`), which take the limits in force in the attempt
//! that received the headers and carry them past the layer's return.

use core::future::poll_fn;
use core::task::Poll;
use core::time::Duration;

use futures_core::Stream;

use super::Started;
use super::carried::Carried;
use crate::ambient::{self, FrameInForce};

/// The limits a stream opened now would carry: the `read` of the innermost
/// call's attempt and that call's `total`, as [`Starting`](super::Starting)
/// reads them on its first poll (a call that has not put its frame in force
/// does from its next poll, which this asks for at once).
pub(crate) async fn carried_in_force() -> Option<Carried> {
    poll_fn(|cx| match ambient::stream_frame() {
        FrameInForce::Outside => Poll::Ready(None),
        FrameInForce::Frame(frame) => Poll::Ready(Carried::of(frame)),
        FrameInForce::NotYet => {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// `stream`, not yet polled, under `limits` from its first item on.
pub(crate) fn carrying<S: Stream>(stream: S, limits: Option<Carried>) -> Started<S> {
    Started::new(Some(stream), Vec::new(), None, limits, Duration::ZERO)
}

/// A stream already read to its end: `items`, then the end. No limit (it
/// never waits).
pub(crate) fn replaying<S: Stream>(items: Vec<S::Item>) -> Started<S> {
    Started::new(None, items, None, None, Duration::ZERO)
}
