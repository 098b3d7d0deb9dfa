//! A fn whose return type names `Started` has its stream frame in force
//! from its first poll: a stream ready at once is started in that poll,
//! with the fn's limits, instead of asking for the frame and waiting for
//! the next poll (a scheduler turn per call). A fn that hides the type
//! behind an alias takes the turn, with the same result.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use nika_retry::stream::{Started, started};
use nika_retry::{Boundary, Classify, TimeoutError, retry, timeout};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// Three items, each ready at once.
fn ready() -> impl futures_core::Stream<Item = Result<u32, Error>> + Unpin {
    struct Ready(u32);
    impl futures_core::Stream for Ready {
        type Item = Result<u32, Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Self::Item>> {
            self.0 += 1;
            Poll::Ready((self.0 <= 3).then_some(Ok(self.0)))
        }
    }
    Ready(0)
}

type Ready = Started<Box<dyn futures_core::Stream<Item = Result<u32, Error>> + Unpin>>;

#[retry(layer = "provider")]
#[timeout(read = "5s")]
async fn named() -> Result<Started<impl futures_core::Stream<Item = Result<u32, Error>>>, Error> {
    started(ready()).await
}

/// The same, its return type behind an alias.
type Hidden = Result<Ready, Error>;

#[retry(layer = "provider")]
#[timeout(read = "5s")]
async fn aliased() -> Hidden {
    let stream: Box<dyn futures_core::Stream<Item = Result<u32, Error>> + Unpin> =
        Box::new(ready());
    started(stream).await
}

/// `#[timeout]` alone, its return type naming `Started`.
#[timeout(layer = "provider", read = "4s")]
async fn named_alone()
-> Result<Started<impl futures_core::Stream<Item = Result<u32, Error>>>, Error> {
    started(ready()).await
}

/// `#[timeout]` alone behind the alias.
#[timeout(layer = "provider", read = "4s")]
async fn aliased_alone() -> Hidden {
    let stream: Box<dyn futures_core::Stream<Item = Result<u32, Error>> + Unpin> =
        Box::new(ready());
    started(stream).await
}

/// How many polls `fut` takes, with a waker that does nothing (a self-wake
/// is then one more poll here, as it is one more scheduler turn in tokio).
fn polls<F: Future>(fut: F) -> (u32, F::Output) {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    let mut n = 1;
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return (n, out);
        }
        n += 1;
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fn_returning_started_starts_its_stream_in_its_first_poll() {
    let (n, out) = polls(named());
    assert_eq!(n, 1, "no poll spent asking for the frame");
    // Started under the fn's `read`: a stall after the content is cut by it.
    let started = out.unwrap();
    assert!(
        format!("{started:?}").contains("read: Some(5s)"),
        "{started:?}"
    );

    let (n, out) = polls(aliased());
    assert_eq!(
        n, 2,
        "behind an alias, the stream asks for the frame and waits a poll"
    );
    assert!(format!("{:?}", out.unwrap()).contains("read: Some(5s)"));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_timeout_alone_puts_its_frame_in_force_as_a_call_does() {
    // Named: in force from the first poll. Behind an alias: only once the
    // stream asked (a poll later); either way the stream takes its `read`.
    let (n, out) = polls(named_alone());
    assert_eq!(n, 1, "no poll spent asking for the frame");
    assert!(format!("{:?}", out.unwrap()).contains("read: Some(4s)"));
    let (n, out) = polls(aliased_alone());
    assert_eq!(n, 2, "behind an alias, the stream asks and waits a poll");
    assert!(format!("{:?}", out.unwrap()).contains("read: Some(4s)"));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_frame_in_force_from_the_first_poll_still_bounds_a_stall() {
    use futures_core::Stream;
    /// One item, then nothing ever.
    struct Stalls(bool);
    impl Stream for Stalls {
        type Item = Result<u32, Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Self::Item>> {
            if std::mem::replace(&mut self.0, true) {
                Poll::Pending
            } else {
                Poll::Ready(Some(Ok(1)))
            }
        }
    }
    #[retry(layer = "provider")]
    #[timeout(read = "2s")]
    async fn stalling() -> Result<Started<Stalls>, Error> {
        started(Stalls(false)).await
    }
    let mut items = stalling().await.unwrap();
    let start = tokio::time::Instant::now();
    assert_eq!(next(&mut items).await.unwrap().unwrap(), 1);
    let cut = next(&mut items).await.unwrap().unwrap_err();
    let Error::Timeout(cut) = cut;
    assert_eq!(
        (cut.boundary(), start.elapsed()),
        (Boundary::Read, Duration::from_secs(2))
    );
}

/// What `StreamExt::next` does.
async fn next<S: futures_core::Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}
