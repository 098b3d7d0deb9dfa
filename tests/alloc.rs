//! "No allocation per call and per attempt" (README, BENCHMARKS.md), pinned
//! by a counting `#[global_allocator]`. It counts every thread, so this
//! binary holds a single test, and nothing prints while it counts.

#[path = "../benches/support/counting_alloc.rs"]
mod counting_alloc;

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use counting_alloc::ALLOCS;
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::{Classify, TimeoutError, retry, timeout};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("busy")]
    #[category(transient)]
    Busy,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

type Res = Result<u32, Error>;

/// Attempts made by the failing fns, over all calls.
static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

/// Of every three attempts, the first two fail.
fn flaky(n: u32) -> Res {
    if ATTEMPTS.fetch_add(1, Ordering::Relaxed) % 3 < 2 {
        Err(Error::Busy)
    } else {
        Ok(black_box(n))
    }
}

#[retry(layer = "provider")]
async fn succeeds(n: u32) -> Res {
    Ok(black_box(n))
}

#[retry(layer = "provider")]
#[timeout(attempt = "30s", total = "5m")]
async fn succeeds_timed(n: u32) -> Res {
    Ok(black_box(n))
}

#[retry(layer = "provider", backoff = "2ms", jitter = 0.0)]
async fn recovers(n: u32) -> Res {
    flaky(n)
}

#[retry(layer = "provider", backoff = "2ms")]
#[timeout(attempt = "30s", total = "5m")]
async fn recovers_timed(n: u32) -> Res {
    tokio::task::yield_now().await;
    flaky(n)
}

/// An observer that allocates nothing itself.
#[derive(Default)]
struct Count(AtomicU32);

impl RetryObserver for Count {
    fn on_event(&self, _: &RetryEvent) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

const WARM_UP: u32 = 100;
const CALLS: u32 = 1_000;

/// Heap allocations made by `CALLS` calls of `f`, after a warm-up; every call must succeed.
fn allocations<F, Fut>(rt: &tokio::runtime::Runtime, f: F) -> usize
where
    F: Fn(u32) -> Fut,
    Fut: Future<Output = Res>,
{
    rt.block_on(async {
        for i in 0..WARM_UP {
            assert_eq!(f(i).await.ok(), Some(i));
        }
        let before = ALLOCS.load(Ordering::SeqCst);
        for i in 0..CALLS {
            assert!(f(i).await.is_ok());
        }
        ALLOCS.load(Ordering::SeqCst) - before
    })
}

fn runtime(paused: bool) -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_time();
    if paused {
        builder.start_paused(true);
    }
    builder.build().unwrap()
}

#[test]
fn no_allocation_per_call_nor_per_attempt() {
    let live = runtime(false);
    // The counter is live: building a runtime allocates.
    assert!(ALLOCS.load(Ordering::SeqCst) > 0);

    let success = [
        ("#[retry]", allocations(&live, succeeds)),
        ("#[retry] #[timeout]", allocations(&live, succeeds_timed)),
    ];
    assert_eq!(success.map(|(_, n)| n), [0, 0], "success path: {success:?}");

    // Three attempts a call, two backoff sleeps, on a paused clock.
    let paused = runtime(true);
    let attempts_before = ATTEMPTS.load(Ordering::SeqCst);
    let count = Arc::new(Count::default());
    let failure = [
        ("#[retry]", allocations(&paused, recovers)),
        ("#[retry] #[timeout]", allocations(&paused, recovers_timed)),
        // Events built and delivered to an observer of each call.
        (
            "observed",
            allocations(&paused, |n| observe(count.clone(), recovers(n))),
        ),
    ];
    assert_eq!(
        ATTEMPTS.load(Ordering::SeqCst) - attempts_before,
        3 * 3 * (WARM_UP + CALLS),
        "every call made three attempts"
    );
    // Two retries and one recovery reported per observed call.
    assert_eq!(count.0.load(Ordering::SeqCst), 3 * (WARM_UP + CALLS));
    assert_eq!(
        failure.map(|(_, n)| n),
        [0, 0, 0],
        "failure path: {failure:?}"
    );
}
