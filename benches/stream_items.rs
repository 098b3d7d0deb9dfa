//! The per-item cost of a started stream (results in
//! BENCHMARKS.md, "Streamed responses"): 1000 items that are all ready at
//! once, drained in one poll, through
//!
//! - `raw`: the stream itself;
//! - `boxed`: the stream as `Pin<Box<dyn Stream>>`, one indirect call per
//!   item: the yardstick for what an adapter may cost;
//! - `started`: `nika_retry::stream::started` outside an annotated fn (no limit);
//! - `started_read`: `started` in a `#[retry] #[timeout(read = "120s")]` fn,
//!   so that the `Started` carries a read limit;
//! - `tokio_stream_timeout`: `tokio_stream::StreamExt::timeout(120 s)`, the
//!   peer adapter for a per-item limit;
//! - `sse_raw` / `sse_started`: what a provider's stream is made of, 1000
//!   server-sent events (one chunk each, ready) parsed by
//!   `eventsource-stream`, as `verb::Provider::stream` does, bare and
//!   through `started`: the cost of `Started` beside an item's real work.
//!
//! Each iteration builds the stream (and, for `started*`, awaits its first
//! item), so the per-call set-up is in the figure, spread over 1000 items.
//!
//! ```sh
//! cargo bench --bench stream_items -- --warm-up-time 1 --measurement-time 3
//! ```

use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group};
use eventsource_stream::{Event, Eventsource};
use futures_core::Stream;
use futures_util::StreamExt as _;
use nika_retry::stream::{self, Started};
use nika_retry::{Classify, TimeoutError, retry, timeout};

#[path = "support/bench_run.rs"]
mod bench_run;

/// Items per iteration.
const ITEMS: u32 = 1000;
/// The read limit of the limited contenders: never reached.
const READ: Duration = Duration::from_secs(120);

#[derive(Debug, Classify)]
#[category(transparent)]
struct Error(TimeoutError);

impl From<TimeoutError> for Error {
    fn from(e: TimeoutError) -> Error {
        Error(e)
    }
}

/// `0..end`, every item ready at once.
struct Ready {
    next: u32,
    end: u32,
}

impl Stream for Ready {
    type Item = Result<u32, Error>;
    #[inline]
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let n = self.next;
        self.next += 1;
        Poll::Ready((n < self.end).then_some(Ok(black_box(n))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.end.saturating_sub(self.next) as usize;
        (left, Some(left))
    }
}

fn ready() -> Ready {
    Ready {
        next: 0,
        end: ITEMS,
    }
}

/// `ready()` behind a vtable the optimiser cannot see through.
fn boxed() -> Pin<Box<dyn Stream<Item = Result<u32, Error>>>> {
    black_box(Box::pin(ready()))
}

/// Polls `stream` until it ends, in one poll when every item is ready;
/// returns how many items it yielded.
async fn drain<S: Stream>(stream: S) -> u32 {
    let mut stream = std::pin::pin!(stream);
    let mut n = 0;
    core::future::poll_fn(|cx| {
        loop {
            match stream.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => {
                    black_box(item);
                    n += 1;
                }
                Poll::Ready(None) => return Poll::Ready(n),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await
}

#[retry(layer = "provider")]
#[timeout(read = "120s")]
async fn open() -> Result<Started<Ready>, Error> {
    stream::started(ready()).await
}

/// One server-sent event per chunk, as an LLM provider streams its tokens.
fn sse_chunks() -> &'static [String] {
    static CHUNKS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CHUNKS.get_or_init(|| {
        (0..ITEMS)
            .map(|n| format!("data: {{\"token\":\"t{n}\"}}\n\n"))
            .collect()
    })
}

/// The chunks, every one ready, parsed into events.
fn sse() -> impl Stream<Item = Result<Event, Error>> + Unpin {
    let chunks =
        futures_util::stream::iter(sse_chunks().iter().map(|c| Ok::<_, Error>(c.as_bytes())));
    chunks.eventsource().map(|event| {
        event.map_err(|_| {
            Error(TimeoutError::new(
                nika_retry::Boundary::Read,
                READ,
                nika_retry::Layer::Provider,
            ))
        })
    })
}

fn per_item(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut group = c.benchmark_group("stream_items");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
        .throughput(Throughput::Elements(u64::from(ITEMS)));
    group.bench_function("raw", |b| b.to_async(&rt).iter(|| drain(ready())));
    group.bench_function("boxed", |b| b.to_async(&rt).iter(|| drain(boxed())));
    group.bench_function("started", |b| {
        b.to_async(&rt).iter(|| async {
            let started = stream::started(ready()).await.expect("no error");
            drain(started).await
        })
    });
    group.bench_function("started_read", |b| {
        b.to_async(&rt).iter(|| async {
            let started = open().await.expect("no error");
            drain(started).await
        })
    });
    group.bench_function("tokio_stream_timeout", |b| {
        b.to_async(&rt).iter(|| async {
            let timed = tokio_stream::StreamExt::timeout(ready(), READ);
            drain(timed).await
        })
    });
    group.bench_function("sse_raw", |b| b.to_async(&rt).iter(|| drain(sse())));
    group.bench_function("sse_started", |b| {
        b.to_async(&rt).iter(|| async {
            let started = stream::started(sse()).await.expect("no error");
            drain(started).await
        })
    });
    group.finish();
}

/// What each contender yields, checked before measuring: the same items.
fn check() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        assert_eq!(drain(ready()).await, ITEMS);
        assert_eq!(drain(boxed()).await, ITEMS);
        let started = stream::started(ready()).await.expect("no error");
        assert_eq!(drain(started).await, ITEMS);
        let started = open().await.expect("no error");
        assert!(format!("{started:?}").contains("read: Some(120s)"));
        assert_eq!(drain(started).await, ITEMS);
        let timed = tokio_stream::StreamExt::timeout(ready(), READ);
        assert_eq!(drain(timed).await, ITEMS);
        assert_eq!(drain(sse()).await, ITEMS);
        let started = stream::started(sse()).await.expect("no error");
        assert_eq!(drain(started).await, ITEMS);
    });
}

criterion_group!(benches, per_item);

/// `BENCH_RUN=stream_items/name:n`: only `n` iterations of that contender,
/// in one `block_on`, and nothing else, for `benches/instructions.sh`.
fn run_one(contender: &str, n: u32) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        for _ in 0..n {
            let items = match contender {
                "stream_items/raw" => drain(ready()).await,
                "stream_items/boxed" => drain(boxed()).await,
                "stream_items/started" => drain(stream::started(ready()).await.expect("ok")).await,
                "stream_items/started_read" => drain(open().await.expect("ok")).await,
                "stream_items/tokio_stream_timeout" => {
                    drain(tokio_stream::StreamExt::timeout(ready(), READ)).await
                }
                "stream_items/sse_raw" => drain(sse()).await,
                "stream_items/sse_started" => {
                    drain(stream::started(sse()).await.expect("ok")).await
                }
                _ => panic!("BENCH_RUN: no contender {contender}"),
            };
            assert_eq!(items, ITEMS);
        }
    });
}

fn main() {
    if let Some((contender, n)) = bench_run::requested() {
        run_one(&contender, n);
        return;
    }
    check();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
