//! "No allocation per call and per attempt" (docs/comparisons.md, BENCHMARKS.md), pinned
//! by a counting `#[global_allocator]`: alone, nested provider over http,
//! inside a task scope, and through an open upstream; and its documented exceptions: a `read` limit, once an
//! attempt has gone pending, allocates the attempt's own waker once per call,
//! which the call's later attempts reuse, and a `Started` stream under `read`
//! boxes its timer once, however many items it waits for; the `tower`
//! layer boxes its response future once per request, and allocates nothing
//! per attempt. It counts the
//! allocations of the thread that runs the calls only: the test harness's
//! own thread may allocate at any moment on a loaded machine.
//!
//! Every call here records its metrics (feature `opentelemetry`, on in the
//! workspace's tests) through the OpenTelemetry SDK, installed before the
//! first call: the figures above hold with them.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::Stream;
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::stream::{Started, started};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::upstream::{Quota, Upstream};
use nika_retry::{Layer, RetryConfig, current_attempt, retry, timeout};
#[cfg(feature = "opentelemetry")]
use nika_retry_tests::metrics;
use nika_retry_tests::{Error, ProviderError};

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

// `read` too: its waker of its own is only made once an attempt goes pending.
#[retry(layer = "provider")]
#[timeout(read = "10s", attempt = "30s", total = "5m")]
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

/// The upstream of the fns that pass one: open (nothing here holds it).
static UPSTREAM: LazyLock<Upstream> = LazyLock::new(|| Upstream::new("alloc/model"));

#[retry(layer = "provider", upstream = &*UPSTREAM)]
async fn succeeds_upstream(n: u32) -> Result<u32, ProviderError> {
    Ok(black_box(n))
}

/// An upstream that paces (a declared quota it never runs short of): each
/// admission reserves in its buckets, lock-free, and does not wait.
static PACED: LazyLock<Upstream> = LazyLock::new(|| {
    let quota = Quota::per(Duration::from_secs(1))
        .requests(u32::MAX)
        .tokens(u32::MAX);
    Upstream::new("alloc/paced").with_quota(quota)
});

#[retry(layer = "provider", upstream = &*PACED, cost = n % 100)]
async fn succeeds_paced(n: u32) -> Result<u32, ProviderError> {
    Ok(black_box(n))
}

/// An upstream whose scout brought no word of the limits: its calls go
/// through the cold start's ramp, each taking a free slot without a wait.
static RAMPING: LazyLock<Upstream> = LazyLock::new(|| Upstream::new("alloc/ramping"));

#[retry(layer = "provider", upstream = &*RAMPING)]
async fn succeeds_ramping(n: u32) -> Result<u32, ProviderError> {
    Ok(black_box(n))
}

/// Its failures are 503s without a hint (an empty message: no allocation
/// of their own), which the upstream is told of and which hold nothing.
#[retry(layer = "provider", backoff = "2ms", jitter = 0.0, upstream = &*UPSTREAM)]
async fn recovers_upstream(n: u32) -> Result<u32, ProviderError> {
    flaky(n).map_err(|_| ProviderError::Api {
        status: 503,
        message: String::new(),
        retry_after: None,
    })
}

/// The normal nest: an http call (with the layer's time limits) in a
/// provider call's attempt.
#[retry(layer = "http", backoff = "2ms", jitter = 0.0)]
#[timeout(connect = "10s", read = "120s")]
async fn http_succeeds(n: u32) -> Res {
    Ok(black_box(n))
}

#[retry(layer = "provider")]
async fn provider_over_http(n: u32) -> Res {
    http_succeeds(n).await
}

#[retry(layer = "http", backoff = "2ms", jitter = 0.0)]
#[timeout(connect = "10s", read = "120s")]
async fn http_recovers(n: u32) -> Res {
    flaky(n)
}

#[retry(layer = "provider")]
async fn provider_over_recovering_http(n: u32) -> Res {
    http_recovers(n).await
}

/// A task's policy: its `retry:` for the provider layer, and a `timeout:`.
fn task_policy() -> TaskPolicy {
    let retry = RetryConfig::for_layer(Layer::Provider)
        .with_initial_backoff(Duration::from_millis(2))
        .unwrap();
    TaskPolicy::new()
        .with_retry(retry)
        .with_timeout(Duration::from_secs(300))
}

/// Items of a streamed response.
const ITEMS: u32 = 16;

/// `ITEMS` items, the first at once and, with `gaps`, every later one
/// after a pending poll (a gap in the stream, which wakes itself).
struct Gaps {
    gaps: bool,
    left: u32,
    waited: bool,
}

impl Stream for Gaps {
    type Item = Result<u32, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        if self.gaps && self.left < ITEMS && !self.waited {
            self.waited = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.waited = false;
        self.left -= 1;
        Poll::Ready(Some(Ok(self.left)))
    }
}

/// Opens a stream whose first item is ready.
#[retry(layer = "provider")]
#[timeout(read = "10s")]
async fn opens(gaps: bool) -> Result<Started<Gaps>, Error> {
    started(Gaps {
        gaps,
        left: ITEMS,
        waited: false,
    })
    .await
}

/// One call of [`opens`], its stream read to the end.
async fn streams(n: u32, gaps: bool) -> Res {
    let mut stream = opens(gaps).await?;
    let mut items = 0;
    while let Some(item) = std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await {
        item?;
        items += 1;
    }
    assert_eq!(items, ITEMS);
    Ok(n)
}

/// The data pointer of the waker the current poll was given: for a waker
/// made from an `Arc` (the attempt's own, with `read`), `Arc::as_ptr`.
async fn waker_data() -> usize {
    std::future::poll_fn(|cx| Poll::Ready(cx.waker().data() as usize)).await
}

/// The waker of the task that runs the current call, outside its attempts.
static TASK_WAKER: AtomicUsize = AtomicUsize::new(0);
/// The waker the current call's first attempt was polled with.
static FIRST_WAKER: AtomicUsize = AtomicUsize::new(0);
/// Later attempts polled with their call's first waker, and with another.
static SAME_WAKER: AtomicU32 = AtomicU32::new(0);
static OTHER_WAKER: AtomicU32 = AtomicU32::new(0);
/// Attempts polled with the task's waker rather than one of their own.
static TASK_WAKER_SEEN: AtomicU32 = AtomicU32::new(0);

/// Goes pending once (so `read` gives the attempt a waker of its own), notes
/// the waker it is then polled with, and fails its first two attempts.
#[retry(layer = "provider", backoff = "2ms")]
#[timeout(read = "10s")]
async fn recovers_read(n: u32) -> Res {
    tokio::task::yield_now().await;
    let waker = waker_data().await;
    let attempt = current_attempt().map_or(0, |a| a.attempt);
    if waker == TASK_WAKER.load(Ordering::Relaxed) {
        TASK_WAKER_SEEN.fetch_add(1, Ordering::Relaxed);
    }
    if attempt == 1 {
        FIRST_WAKER.store(waker, Ordering::Relaxed);
    } else if waker == FIRST_WAKER.load(Ordering::Relaxed) {
        SAME_WAKER.fetch_add(1, Ordering::Relaxed);
    } else {
        OTHER_WAKER.fetch_add(1, Ordering::Relaxed);
    }
    if attempt < 3 {
        Err(Error::Busy)
    } else {
        Ok(black_box(n))
    }
}

/// An observer that allocates nothing itself.
#[derive(Default)]
struct Count(AtomicU32);

impl RetryObserver for Count {
    fn on_event(&self, _: &RetryEvent) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts the allocations of the thread that allocates.
struct Counting;

std::thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the allocator also runs while a thread's locals are torn down.
    let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
}

/// Allocations made by this thread so far.
fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the counter has no effect on the memory handed out, and a
// const-initialised thread-local `Cell` neither allocates nor has a destructor.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract of `GlobalAlloc::alloc`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract of `GlobalAlloc::alloc_zeroed`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded contract of `GlobalAlloc::realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract of `GlobalAlloc::dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const WARM_UP: u32 = 100;
const CALLS: u32 = 1_000;

/// Heap allocations made by `CALLS` calls of `f`, after a warm-up; every call must succeed.
fn allocations<F, Fut, E>(rt: &tokio::runtime::Runtime, f: F) -> usize
where
    F: Fn(u32) -> Fut,
    Fut: Future<Output = Result<u32, E>>,
{
    rt.block_on(async {
        for i in 0..WARM_UP {
            assert_eq!(f(i).await.ok(), Some(i));
        }
        let before = allocs();
        for i in 0..CALLS {
            assert!(f(i).await.is_ok());
        }
        allocs() - before
    })
}

fn runtime(paused: bool) -> tokio::runtime::Runtime {
    // Every test builds its runtime first: the SDK is in before any call.
    #[cfg(feature = "opentelemetry")]
    nika_retry_tests::metrics::install();
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
    assert!(allocs() > 0);

    let success = [
        ("#[retry]", allocations(&live, succeeds)),
        ("#[retry] #[timeout]", allocations(&live, succeeds_timed)),
        ("provider over http", allocations(&live, provider_over_http)),
        (
            "in a task scope",
            allocations(&live, |n| scope(task_policy(), succeeds_timed(n))),
        ),
        (
            "through an open upstream",
            allocations(&live, succeeds_upstream),
        ),
        ("paced, without a wait", allocations(&live, succeeds_paced)),
    ];
    assert_eq!(success.map(|(_, n)| n), [0; 6], "success path: {success:?}");
    #[cfg(feature = "opentelemetry")]
    {
        use nika_retry::metrics::{CALL_DURATION, OPERATION, OUTCOME};
        // Recorded, each call: the SDK counted them all.
        let calls = u64::from(WARM_UP + CALLS);
        for (operation, n) in [
            ("alloc::succeeds", calls),
            ("alloc::succeeds_upstream", calls),
        ] {
            let at = [
                metrics::kv(OPERATION, operation),
                metrics::kv(OUTCOME, "success"),
            ];
            let recorded = metrics::point(CALL_DURATION, &at).map(|p| p.count);
            assert_eq!(recorded, Some(n), "{operation}");
        }
    }
    let requests = PACED.limits().requests.unwrap();
    assert_eq!(requests.in_flight, 0, "each admission's cost given back");

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
        // The inner loop retries; the outer one's attempt succeeds.
        (
            "provider over http",
            allocations(&paused, provider_over_recovering_http),
        ),
        (
            "in a task scope",
            allocations(&paused, |n| scope(task_policy(), recovers_timed(n))),
        ),
        // Each failure told to the upstream (under its lock): nothing held.
        (
            "through an open upstream",
            allocations(&paused, recovers_upstream),
        ),
    ];
    assert_eq!(
        ATTEMPTS.load(Ordering::SeqCst) - attempts_before,
        3 * failure.len() as u32 * (WARM_UP + CALLS),
        "every call made three attempts"
    );
    // Two retries and one recovery reported per observed call.
    assert_eq!(count.0.load(Ordering::SeqCst), 3 * (WARM_UP + CALLS));
    assert_eq!(failure.map(|(_, n)| n), [0; 6], "failure path: {failure:?}");
    #[cfg(feature = "opentelemetry")]
    {
        use nika_retry::metrics::{CALL_ATTEMPTS, OPERATION, OUTCOME, RETRY_DELAY};
        // Each recovered call recorded its attempts and its time between them.
        let at = [
            metrics::kv(OPERATION, "alloc::recovers"),
            metrics::kv(OUTCOME, "recovered"),
        ];
        let attempts = metrics::point(CALL_ATTEMPTS, &at).unwrap();
        // Observed or not: twice as many calls as the warm-up and the measure.
        let calls = u64::from(2 * (WARM_UP + CALLS));
        assert_eq!((attempts.count, attempts.sum), (calls, 3.0 * calls as f64));
        assert_eq!(
            metrics::point(RETRY_DELAY, &at).map(|p| p.count),
            Some(calls)
        );
    }
    assert_eq!(UPSTREAM.held_for(), None, "the upstream stayed open");
}

#[test]
fn a_slot_of_the_cold_starts_ramp_taken_without_a_wait_allocates_nothing() {
    let live = runtime(false);
    live.block_on(async {
        succeeds_ramping(0).await.unwrap();
        assert_eq!(RAMPING.limits().ramp, Some(2), "the scout said nothing");
        let before = allocs();
        for n in 0..40 {
            succeeds_ramping(n).await.unwrap();
        }
        assert_eq!(allocs() - before, 0);
        assert_eq!(
            RAMPING.limits().ramp,
            Some(42),
            "each success opened a slot"
        );
    });
}

#[test]
fn a_read_limit_allocates_once_per_call_and_its_later_attempts_reuse_it() {
    // Three attempts a call, each pending once, two backoff sleeps.
    let paused = runtime(true);
    let per_call = allocations(&paused, |n| async move {
        TASK_WAKER.store(waker_data().await, Ordering::Relaxed);
        recovers_read(n).await
    });
    assert_eq!(per_call, CALLS as usize, "one allocation per call");
    let calls = WARM_UP + CALLS;
    // The attempts ran under a waker of their own, and each call's second
    // and third attempts under the one its first attempt was given (the
    // same `Arc`), so the one allocation is the call's, not an attempt's.
    assert_eq!(TASK_WAKER_SEEN.load(Ordering::Relaxed), 0);
    assert_eq!(
        (
            SAME_WAKER.load(Ordering::Relaxed),
            OTHER_WAKER.load(Ordering::Relaxed)
        ),
        (2 * calls, 0)
    );
}

#[test]
fn a_started_stream_under_read_boxes_its_timer_once_for_all_its_gaps() {
    let paused = runtime(true);
    // With gaps, every call's stream waits `ITEMS - 1` times, each wait after
    // an item: the timer is boxed at the first and set again at the others.
    let without_gaps = allocations(&paused, |n| streams(n, false));
    let with_gaps = allocations(&paused, |n| streams(n, true));
    // Without gaps, nothing: the fn returns a `Started`, so its limits are
    // in force from the first poll and the attempt, ready at once, never
    // needs the waker of `read`. With gaps: one timer, not one per gap.
    let calls = CALLS as usize;
    assert_eq!((without_gaps, with_gaps), (0, calls));
}

/// Items `from..ITEMS`, ready, with an `Err` (a cut) at `cut` if given.
struct Cuts {
    next: u32,
    cut: Option<u32>,
}

impl Stream for Cuts {
    type Item = Result<u32, Error>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let n = self.next;
        self.next += 1;
        Poll::Ready(match self.cut {
            Some(cut) if n == cut => Some(Err(Error::Busy)),
            _ => (n < ITEMS).then_some(Ok(n)),
        })
    }
}

/// Opens a stream cut halfway through.
#[retry(layer = "provider", backoff = "2ms", jitter = 0.0)]
#[timeout(read = "10s")]
async fn opens_cut() -> Result<Started<Cuts>, Error> {
    let cut = Some(ITEMS / 2);
    started(Cuts { next: 0, cut }).await
}

/// One call of [`opens_cut`], resumed, read to the end.
async fn resumes(n: u32) -> Res {
    let mut stream = opens_cut()
        .await?
        .resume_with(|resume: nika_retry::stream::Resume| {
            let next = u32::try_from(resume.delivered()).unwrap_or(ITEMS);
            started(Cuts { next, cut: None })
        });
    let mut items = 0;
    while let Some(item) = std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await {
        assert_eq!(item?, items);
        items += 1;
    }
    assert_eq!(items, ITEMS);
    Ok(n)
}

#[test]
fn a_stream_that_resumes_allocates_once_per_resume_and_nothing_per_item() {
    let paused = runtime(true);
    // The resume in flight is boxed; the items before and after it, and
    // the resume's attempt, allocate nothing.
    assert_eq!(allocations(&paused, resumes), CALLS as usize);
}

/// Attempts the `tower` layer's inner service got (its own count: the
/// tests run at once).
static TOWER_ATTEMPTS: AtomicU32 = AtomicU32::new(0);

/// The inner service of the `tower` layer's tests: answers each request
/// at once, `fails` of every three with a 503 (no allocation either way).
#[derive(Clone, Copy)]
struct Answers {
    fails: bool,
}

impl tower::Service<u32> for Answers {
    type Response = u32;
    type Error = ProviderError;
    type Future = std::future::Ready<Result<u32, ProviderError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ProviderError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, n: u32) -> Self::Future {
        let fail = self.fails && TOWER_ATTEMPTS.fetch_add(1, Ordering::Relaxed) % 3 < 2;
        std::future::ready(if fail {
            Err(ProviderError::Api {
                status: 503,
                message: String::new(),
                retry_after: None,
            })
        } else {
            Ok(black_box(n))
        })
    }
}

#[test]
fn the_tower_layer_boxes_its_future_once_per_request_and_allocates_nothing_per_attempt() {
    use nika_retry::tower::{Cloned, RetryLayer};
    use tower::Layer as _;

    let config = RetryConfig::for_layer(Layer::Provider)
        .with_initial_backoff(Duration::from_millis(2))
        .unwrap();
    let layer = RetryLayer::new(Layer::Provider)
        .config(config)
        .protocol(Cloned);
    let send = |service: &nika_retry::tower::RetryService<Answers, Cloned>, n| {
        let mut service = service.clone();
        async move { service.ready().await?.call(n).await }
    };
    let live = runtime(false);
    let succeeds = layer.layer(Answers { fails: false });
    let success = allocations(&live, |n| send(&succeeds, n));
    // Three attempts a request, two backoff sleeps, on a paused clock.
    let paused = runtime(true);
    let recovers = layer.layer(Answers { fails: true });
    let failure = allocations(&paused, |n| send(&recovers, n));
    assert_eq!(
        TOWER_ATTEMPTS.load(Ordering::SeqCst),
        3 * (WARM_UP + CALLS),
        "every request made three attempts"
    );
    // The response future's box, once per request (its type is an
    // `async` block's, which `Service::Future` cannot name); a `u32` request's
    // replay allocates nothing.
    let calls = CALLS as usize;
    assert_eq!((success, failure), (calls, calls));
}
