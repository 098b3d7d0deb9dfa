//! `#[timeout]` alone on the shapes real crates write, for fns returning a
//! `Started` (their frame in force from the first poll, `Once::streamed`;
//! `tests/stream_frame.rs` has the alias that hides it): a coercing
//! return, a `mut` argument, `#[instrument]` below, `#[async_trait]`, a
//! renamed import, `self: Arc<Self>` and a generic. Each stream takes the
//! fn's `read` limit, and a stall after its content is cut by it.
//! `#[instrument]` above is refused
//! (`tests/ui/fail/instrument_above_timeout.rs`).

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use nika_retry::stream::{Started, started};
use nika_retry::{Boundary, Classify, TimeoutError, timeout as deadline};
use tracing::instrument;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// `n` items ready at once, then nothing ever (a stalled connection).
struct Stalls(u32);

impl Stream for Stalls {
    type Item = Result<u32, Error>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        if self.0 == 0 {
            return Poll::Pending;
        }
        self.0 -= 1;
        Poll::Ready(Some(Ok(self.0)))
    }
}

type Boxed = Box<dyn Stream<Item = Result<u32, Error>> + Send + Unpin>;

/// A coercing return: the body's `Started<Box<Stalls>>` is not the type
/// named, so it goes through `Box<dyn …>` as the fn's output.
#[deadline(layer = "provider", read = "2s")]
async fn coercing() -> Result<Started<Boxed>, Error> {
    let stream: Boxed = Box::new(Stalls(1));
    started(stream).await
}

/// A `mut` argument changed before the stream starts.
#[deadline(layer = "provider", read = "2s")]
async fn mut_argument(mut items: u32) -> Result<Started<Stalls>, Error> {
    items += 1;
    started(Stalls(items)).await
}

/// `#[instrument]` below: the span is the body's.
#[deadline(layer = "provider", read = "2s")]
#[instrument]
async fn instrument_below() -> Result<Started<Stalls>, Error> {
    started(Stalls(1)).await
}

/// A generic stream, named only through the parameter.
#[deadline(layer = "provider", read = "2s")]
async fn generic<S>(stream: S) -> Result<Started<S>, Error>
where
    S: Stream<Item = Result<u32, Error>> + Unpin,
{
    started(stream).await
}

struct Client;

impl Client {
    #[deadline(layer = "provider", read = "2s")]
    async fn shared(self: Arc<Self>) -> Result<Started<Stalls>, Error> {
        let _kept = &self;
        started(Stalls(1)).await
    }
}

#[async_trait::async_trait]
trait Streams {
    async fn stream(&self) -> Result<Started<Stalls>, Error>;
}

#[async_trait::async_trait]
impl Streams for Client {
    #[deadline(layer = "provider", read = "2s")]
    async fn stream(&self) -> Result<Started<Stalls>, Error> {
        started(Stalls(1)).await
    }
}

/// What `StreamExt::next` does.
async fn next<S: Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

/// Drains the content, then waits on the stall: the fn's `read` cuts it
/// 2 s later with one timeout, then the stream ends.
async fn cut_by_read<S>(mut stream: Started<S>, content: usize)
where
    S: Stream<Item = Result<u32, Error>> + Unpin,
{
    for _ in 0..content {
        next(&mut stream).await.unwrap().unwrap();
    }
    let stalled = tokio::time::Instant::now();
    let Some(Err(Error::Timeout(cut))) = next(&mut stream).await else {
        panic!("a stall past `read` ends with its timeout");
    };
    assert_eq!(
        (cut.boundary(), stalled.elapsed()),
        (Boundary::Read, Duration::from_secs(2))
    );
    assert!(next(&mut stream).await.is_none(), "then the end");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_shape_carries_its_read_limit_onto_the_stream() {
    cut_by_read(coercing().await.unwrap(), 1).await;
    cut_by_read(mut_argument(1).await.unwrap(), 2).await;
    cut_by_read(instrument_below().await.unwrap(), 1).await;
    cut_by_read(generic(Stalls(3)).await.unwrap(), 3).await;
    cut_by_read(Arc::new(Client).shared().await.unwrap(), 1).await;
    cut_by_read(Client.stream().await.unwrap(), 1).await;
}
