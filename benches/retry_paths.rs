//! The cost of `#[retry]` and `#[timeout]` against the same loop written by
//! hand, backon and tokio-retry (results in BENCHMARKS.md).
//!
//! Before criterion runs, the binary prints two tables: the size of each
//! contender's future (`size_of_val`, not awaited) and the heap allocations
//! per call, counted by the `#[global_allocator]` below. Then two criterion
//! groups, every contender side by side:
//!
//! - `success`: the attempt succeeds at once, on a current-thread runtime;
//! - `failure`: two transient failures then success (3 attempts, sleeps of
//!   2 ms then 4 ms, no jitter, for every contender) on a paused clock, which
//!   auto-advances, so the sleeps cost their timer work but no wall time;
//! - `pending`: the attempt waits once (a 1 ms timer, paused clock) and then
//!   succeeds: the path where a time limit arms its timer, `read` (which
//!   tells the attempt's own wake-ups from others') and `attempt` beside a
//!   hand-written `tokio::time::timeout`.
//!
//! `retry_upstream` is `retry` with `upstream = …` naming an open
//! upstream: the cost of passing it (one atomic load before each attempt,
//! and after a failed one, the upstream told of it).
//!
//! `minimal` is the simplest correct hand loop (a counter, a
//! growing delay, no category test); `nest` is a three-layer nest (task →
//! provider → http), each layer annotated, beside `minimal_nest`, the same
//! nest of minimal loops.
//!
//! ```sh
//! CARGO_TARGET_DIR=/work/target-bench cargo bench --bench retry_paths
//! ```

use std::future::Future;
use std::hint::black_box;
use std::sync::LazyLock;
use std::sync::atomic::Ordering;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group};
use nika_retry::upstream::Upstream;
use nika_retry::{Boundary, Classify, Layer, TimeoutError, retry, timeout};
use nika_retry_tests::ProviderError;
use tokio::runtime::Runtime;
use tokio_retry::strategy::ExponentialBackoff;

#[path = "support/bench_run.rs"]
mod bench_run;
#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::ALLOCS;

// ---------------------------------------------------------------------------
// The operations.

/// The attempt of the success path: trivially `Ok`.
async fn op(n: u32) -> Res {
    Ok(black_box(n))
}

#[path = "support/flaky.rs"]
mod flaky;
use flaky::{Res, flaky};

/// The per-attempt limit of the `#[timeout]` contenders.
const LIMIT: Duration = Duration::from_secs(30);
/// The provider layer's backoff (1 s, ×4): what the success-path hand loops use.
const PROVIDER_BACKOFF: (Duration, u32) = (Duration::from_secs(1), 4);
/// The failure path's schedule for everyone: 2 ms, then 4 ms.
const FAIL_BACKOFF: (Duration, u32) = (Duration::from_millis(2), 2);

/// The upstream of the `retry_upstream` contenders: never held (their
/// failures are 503s without a hint, which hold nothing), so what they
/// measure is the open upstream's cost. `&*UPSTREAM` adds `LazyLock`'s
/// initialised check to it, a load as cheap as the upstream's own.
static UPSTREAM: LazyLock<Upstream> = LazyLock::new(|| Upstream::new("bench/model"));

/// The loop `#[retry]` stands for, written by hand with tokio: 3 attempts,
/// retryable categories only, exponential backoff without jitter.
macro_rules! hand_loop {
    ($attempt:expr, $schedule:expr) => {{
        let (initial, multiplier) = $schedule;
        let mut attempt = 1u32;
        loop {
            match $attempt {
                Err(e) if attempt < 3 && e.category().is_retryable() => {
                    tokio::time::sleep(initial * multiplier.pow(attempt - 1)).await;
                    attempt += 1;
                }
                result => return result,
            }
        }
    }};
}

/// `$attempt` under `tokio::time::timeout(LIMIT, …)`, expiry mapped to the error.
macro_rules! tokio_timeout {
    ($attempt:expr) => {
        match tokio::time::timeout(LIMIT, $attempt).await {
            Ok(result) => result,
            Err(_elapsed) => Err(ProviderError::Timeout(TimeoutError::new(
                Boundary::Attempt,
                LIMIT,
                Layer::Provider,
            ))),
        }
    };
}

// ---------------------------------------------------------------------------
// Success-path contenders: `fn(u32) -> impl Future<Output = Res>`.

async fn plain_ok(n: u32) -> Res {
    op(n).await
}

#[retry(layer = "provider")]
async fn retry_ok(n: u32) -> Res {
    op(n).await
}

#[retry(layer = "provider", upstream = &*UPSTREAM)]
async fn retry_upstream_ok(n: u32) -> Res {
    op(n).await
}

async fn hand_ok(n: u32) -> Res {
    hand_loop!(op(n).await, PROVIDER_BACKOFF)
}

fn backon_ok(n: u32) -> impl Future<Output = Res> {
    (move || op(n)).retry(ExponentialBuilder::default())
}

fn tokio_retry_ok(n: u32) -> impl Future<Output = Res> {
    tokio_retry::Retry::start(ExponentialBackoff::from_millis(2).take(2), move || op(n))
}

#[retry(layer = "provider")]
#[timeout(attempt = "30s")]
async fn retry_timeout_ok(n: u32) -> Res {
    op(n).await
}

async fn hand_timeout_ok(n: u32) -> Res {
    hand_loop!(tokio_timeout!(op(n)), PROVIDER_BACKOFF)
}

/// The minimal hand loop: no category test, no backoff
/// computation, only a counter and a delay that grows.
macro_rules! minimal_loop {
    ($attempt:expr, $schedule:expr) => {{
        let (mut delay, multiplier): (Duration, u32) = $schedule;
        let mut attempt = 1u32;
        loop {
            match $attempt {
                Ok(v) => return Ok(v),
                Err(_) if attempt < 3 => {
                    tokio::time::sleep(delay).await;
                    delay *= multiplier;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }};
}

async fn minimal_ok(n: u32) -> Res {
    minimal_loop!(op(n).await, PROVIDER_BACKOFF)
}

async fn minimal_timeout_ok(n: u32) -> Res {
    minimal_loop!(tokio_timeout!(op(n)), PROVIDER_BACKOFF)
}

// A three-layer nest (task → provider → http), each layer annotated, and
// the same nest of minimal loops by hand: reported in the size table.

#[retry(layer = "http")]
async fn nest_http(n: u32) -> Res {
    op(n).await
}

#[retry(layer = "provider")]
async fn nest_provider(n: u32) -> Res {
    nest_http(n).await
}

#[retry(layer = "task")]
async fn nest_ok(n: u32) -> Res {
    nest_provider(n).await
}

#[retry(layer = "http")]
#[timeout(attempt = "30s")]
async fn nest_timeout_http(n: u32) -> Res {
    op(n).await
}

#[retry(layer = "provider")]
#[timeout(attempt = "30s")]
async fn nest_timeout_provider(n: u32) -> Res {
    nest_timeout_http(n).await
}

#[retry(layer = "task")]
#[timeout(attempt = "30s")]
async fn nest_timeout_ok(n: u32) -> Res {
    nest_timeout_provider(n).await
}

async fn minimal_nest_http(n: u32) -> Res {
    minimal_loop!(op(n).await, PROVIDER_BACKOFF)
}

async fn minimal_nest_provider(n: u32) -> Res {
    minimal_loop!(minimal_nest_http(n).await, PROVIDER_BACKOFF)
}

async fn minimal_nest_ok(n: u32) -> Res {
    minimal_loop!(minimal_nest_provider(n).await, PROVIDER_BACKOFF)
}

async fn minimal_timeout_nest_http(n: u32) -> Res {
    minimal_loop!(tokio_timeout!(op(n)), PROVIDER_BACKOFF)
}

async fn minimal_timeout_nest_provider(n: u32) -> Res {
    minimal_loop!(
        tokio_timeout!(minimal_timeout_nest_http(n)),
        PROVIDER_BACKOFF
    )
}

async fn minimal_timeout_nest_ok(n: u32) -> Res {
    minimal_loop!(
        tokio_timeout!(minimal_timeout_nest_provider(n)),
        PROVIDER_BACKOFF
    )
}

// ---------------------------------------------------------------------------
// Failure-path contenders: the same, around `flaky`, with the 2 ms / 4 ms schedule.

async fn plain_fail(n: u32) -> Res {
    // No retry: returns the first error. Shown for the size and allocation tables only.
    flaky(n).await
}

#[retry(layer = "provider", backoff = "2ms", multiplier = 2.0, jitter = 0.0)]
async fn retry_fail(n: u32) -> Res {
    flaky(n).await
}

#[retry(
    layer = "provider",
    backoff = "2ms",
    multiplier = 2.0,
    jitter = 0.0,
    upstream = &*UPSTREAM
)]
async fn retry_upstream_fail(n: u32) -> Res {
    flaky(n).await
}

async fn hand_fail(n: u32) -> Res {
    hand_loop!(flaky(n).await, FAIL_BACKOFF)
}

fn backon_fail(n: u32) -> impl Future<Output = Res> {
    let backoff = ExponentialBuilder::default()
        .with_min_delay(FAIL_BACKOFF.0)
        .with_factor(2.0)
        .with_max_times(2);
    (move || flaky(n)).retry(backoff)
}

fn tokio_retry_fail(n: u32) -> impl Future<Output = Res> {
    tokio_retry::Retry::start(ExponentialBackoff::from_millis(2).take(2), move || flaky(n))
}

#[retry(layer = "provider", backoff = "2ms", multiplier = 2.0, jitter = 0.0)]
#[timeout(attempt = "30s")]
async fn retry_timeout_fail(n: u32) -> Res {
    flaky(n).await
}

async fn hand_timeout_fail(n: u32) -> Res {
    hand_loop!(tokio_timeout!(flaky(n)), FAIL_BACKOFF)
}

async fn minimal_fail(n: u32) -> Res {
    minimal_loop!(flaky(n).await, FAIL_BACKOFF)
}

async fn minimal_timeout_fail(n: u32) -> Res {
    minimal_loop!(tokio_timeout!(flaky(n)), FAIL_BACKOFF)
}

// ---------------------------------------------------------------------------
// Pending-path contenders: the attempt waits once, then succeeds.

/// The attempt of the pending path: waits on a 1 ms timer, then `Ok`.
async fn op_pending(n: u32) -> Res {
    tokio::time::sleep(Duration::from_millis(1)).await;
    Ok(black_box(n))
}

async fn plain_pending(n: u32) -> Res {
    op_pending(n).await
}

#[retry(layer = "provider")]
#[timeout(read = "30s")]
async fn retry_read_pending(n: u32) -> Res {
    op_pending(n).await
}

#[retry(layer = "provider")]
#[timeout(attempt = "30s")]
async fn retry_attempt_pending(n: u32) -> Res {
    op_pending(n).await
}

#[timeout(layer = "provider", read = "30s")]
async fn read_alone_pending(n: u32) -> Res {
    op_pending(n).await
}

async fn hand_timeout_pending(n: u32) -> Res {
    hand_loop!(tokio_timeout!(op_pending(n)), PROVIDER_BACKOFF)
}

/// Calls `$cb!(name, contender)` for each pending-path contender.
macro_rules! pending_contenders {
    ($cb:ident) => {
        $cb!("plain", plain_pending);
        $cb!("retry_read", retry_read_pending);
        $cb!("retry_attempt", retry_attempt_pending);
        $cb!("read_alone", read_alone_pending);
        $cb!("hand_timeout", hand_timeout_pending);
    };
}

/// Calls `$cb!(name, contender)` for each success-path contender.
macro_rules! success_contenders {
    ($cb:ident) => {
        $cb!("plain", plain_ok);
        $cb!("retry", retry_ok);
        $cb!("retry_upstream", retry_upstream_ok);
        $cb!("hand_loop", hand_ok);
        $cb!("backon", backon_ok);
        $cb!("tokio_retry", tokio_retry_ok);
        $cb!("retry_timeout", retry_timeout_ok);
        $cb!("hand_timeout", hand_timeout_ok);
        $cb!("minimal", minimal_ok);
        $cb!("minimal_timeout", minimal_timeout_ok);
        $cb!("nest", nest_ok);
        $cb!("minimal_nest", minimal_nest_ok);
        $cb!("nest_timeout", nest_timeout_ok);
        $cb!("minimal_timeout_nest", minimal_timeout_nest_ok);
    };
}

/// Calls `$cb!(name, contender)` for each failure-path contender that retries.
macro_rules! failure_contenders {
    ($cb:ident) => {
        $cb!("retry", retry_fail);
        $cb!("retry_upstream", retry_upstream_fail);
        $cb!("hand_loop", hand_fail);
        $cb!("backon", backon_fail);
        $cb!("tokio_retry", tokio_retry_fail);
        $cb!("retry_timeout", retry_timeout_fail);
        $cb!("hand_timeout", hand_timeout_fail);
        $cb!("minimal", minimal_fail);
        $cb!("minimal_timeout", minimal_timeout_fail);
    };
}

// ---------------------------------------------------------------------------
// Runtimes.

/// The success path's runtime: current thread, real clock.
fn live_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

/// The failure path's runtime: current thread, paused clock that auto-advances.
fn paused_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

// ---------------------------------------------------------------------------
// Tables printed before criterion runs.

const WARM_UP_CALLS: u32 = 1_000;
const COUNTED_CALLS: u32 = 10_000;

/// Heap allocations per call of `f`, after a warm-up, checking every call succeeds.
fn allocs_per_call<F, Fut>(rt: &Runtime, name: &str, f: F) -> f64
where
    F: Fn(u32) -> Fut,
    Fut: Future<Output = Res>,
{
    rt.block_on(async {
        for i in 0..WARM_UP_CALLS {
            let out = f(black_box(i)).await;
            assert_eq!(out, Ok(i), "{name}: warm-up call {i}");
        }
        let before = ALLOCS.load(Ordering::SeqCst);
        for i in 0..COUNTED_CALLS {
            let out = f(black_box(i)).await;
            if out.is_err() {
                panic!("{name}: call {i} failed");
            }
        }
        let after = ALLOCS.load(Ordering::SeqCst);
        (after - before) as f64 / f64::from(COUNTED_CALLS)
    })
}

fn print_tables() {
    let live = live_runtime();
    let paused = paused_runtime();

    println!("\n## Future sizes (bytes, `size_of_val` of the unawaited future)\n");
    println!("| contender | success path | failure path |");
    println!("|---|---:|---:|");
    let mut sizes: Vec<(&str, usize, Option<usize>)> = Vec::new();
    macro_rules! size_ok {
        ($name:expr, $f:ident) => {
            sizes.push(($name, std::mem::size_of_val(&$f(1)), None));
        };
    }
    success_contenders!(size_ok);
    sizes[0].2 = Some(std::mem::size_of_val(&plain_fail(1)));
    macro_rules! size_fail {
        ($name:expr, $f:ident) => {
            let size = std::mem::size_of_val(&$f(1));
            if let Some(row) = sizes.iter_mut().find(|row| row.0 == $name) {
                row.2 = Some(size);
            }
        };
    }
    failure_contenders!(size_fail);
    for (name, ok, fail) in &sizes {
        let fail = fail.map_or_else(|| "—".to_owned(), |s| s.to_string());
        println!("| {name} | {ok} | {fail} |");
    }
    println!(
        "\n(`op`'s own future: {} bytes; `flaky`'s: {} bytes; `tokio::time::Sleep`: {} bytes)",
        std::mem::size_of_val(&op(1)),
        std::mem::size_of_val(&flaky(1)),
        std::mem::size_of::<tokio::time::Sleep>(),
    );

    println!("\n## Heap allocations ({COUNTED_CALLS} calls after {WARM_UP_CALLS} warm-up calls)\n");
    println!("| contender | success: per call | failure: per call | failure: per attempt |");
    println!("|---|---:|---:|---:|");
    let mut allocs: Vec<(&str, f64, Option<f64>)> = Vec::new();
    macro_rules! allocs_ok {
        ($name:expr, $f:ident) => {
            allocs.push(($name, allocs_per_call(&live, $name, $f), None));
        };
    }
    success_contenders!(allocs_ok);
    macro_rules! allocs_fail {
        ($name:expr, $f:ident) => {
            let per_call = allocs_per_call(&paused, $name, $f);
            if let Some(row) = allocs.iter_mut().find(|row| row.0 == $name) {
                row.2 = Some(per_call);
            }
        };
    }
    failure_contenders!(allocs_fail);
    for (name, ok, fail) in &allocs {
        let (call, attempt) = fail.map_or_else(
            || ("—".to_owned(), "—".to_owned()),
            |a| (format!("{a:.3}"), format!("{:.3}", a / 3.0)),
        );
        println!("| {name} | {ok:.3} | {call} | {attempt} |");
    }

    println!("\n## Pending path (the attempt waits once on a 1 ms timer)\n");
    println!("| contender | future (bytes) | allocations per call |");
    println!("|---|---:|---:|");
    macro_rules! pending_row {
        ($name:expr, $f:ident) => {
            let size = std::mem::size_of_val(&$f(1));
            println!(
                "| {} | {size} | {:.3} |",
                $name,
                allocs_per_call(&paused, $name, $f)
            );
        };
    }
    pending_contenders!(pending_row);
    println!();
}

// ---------------------------------------------------------------------------
// Criterion groups.

fn configure(group: &mut BenchmarkGroup<'_, WallTime>) {
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
}

fn success_path(c: &mut Criterion) {
    let rt = live_runtime();
    let mut group = c.benchmark_group("success");
    configure(&mut group);
    macro_rules! bench {
        ($name:expr, $f:ident) => {
            group.bench_function($name, |b| b.to_async(&rt).iter(|| $f(black_box(1))));
        };
    }
    success_contenders!(bench);
    group.finish();
}

fn failure_path(c: &mut Criterion) {
    let rt = paused_runtime();
    let mut group = c.benchmark_group("failure");
    configure(&mut group);
    macro_rules! bench {
        ($name:expr, $f:ident) => {
            group.bench_function($name, |b| b.to_async(&rt).iter(|| $f(black_box(1))));
        };
    }
    failure_contenders!(bench);
    group.finish();
}

fn pending_path(c: &mut Criterion) {
    let rt = paused_runtime();
    let mut group = c.benchmark_group("pending");
    configure(&mut group);
    macro_rules! bench {
        ($name:expr, $f:ident) => {
            group.bench_function($name, |b| b.to_async(&rt).iter(|| $f(black_box(1))));
        };
    }
    pending_contenders!(bench);
    group.finish();
}

criterion_group!(benches, success_path, failure_path, pending_path);

/// The CPU time this thread has run, in ns (`/proc/thread-self/schedstat`):
/// unlike the wall clock, it does not count the time other processes hold
/// the CPU, so it stays meaningful on a loaded machine.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("/proc/thread-self/schedstat unreadable"))
}

/// The CPU time per call of `f`, over `calls` calls after a tenth as many.
fn cpu_per_call<F, Fut>(rt: &Runtime, calls: u32, f: F) -> f64
where
    F: Fn(u32) -> Fut,
    Fut: Future<Output = Res>,
{
    rt.block_on(async {
        for _ in 0..calls / 10 {
            black_box(f(black_box(1)).await).ok();
        }
        let start = thread_cpu_ns();
        for _ in 0..calls {
            black_box(f(black_box(1)).await).ok();
        }
        (thread_cpu_ns() - start) as f64 / f64::from(calls)
    })
}

/// `RETRY_PATHS_CPU=calls`: instead of criterion, the CPU time per call of
/// each contender, over `calls` calls of the success path and a twentieth
/// as many of the failure path, after a warm-up, one line each: for a
/// machine too loaded for wall-clock times. The kernel updates a thread's
/// CPU time at scheduler ticks (a few ms), so take `calls` of 10 million or
/// more for the success path.
fn cpu_times(calls: u32) {
    let live = live_runtime();
    let paused = paused_runtime();
    macro_rules! row_success {
        ($name:expr, $f:ident) => {
            let ns = cpu_per_call(&live, calls, $f);
            println!("cpu success {} {ns:.2} ns", $name);
        };
    }
    success_contenders!(row_success);
    macro_rules! row_failure {
        ($name:expr, $f:ident) => {
            let ns = cpu_per_call(&paused, calls / 20, $f);
            println!("cpu failure {} {ns:.2} ns", $name);
        };
    }
    failure_contenders!(row_failure);
}

/// `BENCH_RUN=group/name:calls` (`success/retry:100000`): only
/// `calls` calls of that one contender, in one `block_on`, and nothing
/// else, for `benches/instructions.sh`, which runs it under cachegrind
/// with `calls` and with 0: the difference over `calls` is the contender's
/// instructions per call, a count that no other process can disturb.
fn run_one(contender: &str, calls: u32) {
    let (live, paused) = (live_runtime(), paused_runtime());
    let mut found = false;
    macro_rules! run {
        ($rt:expr, $group:literal, $name:expr, $f:ident) => {
            if contender == concat!($group, "/", $name) {
                found = true;
                $rt.block_on(async {
                    for _ in 0..calls {
                        black_box($f(black_box(1)).await).ok();
                    }
                });
            }
        };
    }
    macro_rules! run_success {
        ($name:expr, $f:ident) => {
            run!(live, "success", $name, $f);
        };
    }
    macro_rules! run_failure {
        ($name:expr, $f:ident) => {
            run!(paused, "failure", $name, $f);
        };
    }
    macro_rules! run_pending {
        ($name:expr, $f:ident) => {
            run!(paused, "pending", $name, $f);
        };
    }
    success_contenders!(run_success);
    failure_contenders!(run_failure);
    pending_contenders!(run_pending);
    assert!(found, "BENCH_RUN: no contender {contender}");
}

fn main() {
    if let Some((contender, calls)) = bench_run::requested() {
        run_one(&contender, calls);
        return;
    }
    if let Some(calls) = std::env::var("RETRY_PATHS_CPU")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        cpu_times(calls);
        return;
    }
    print_tables();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
