//! What the metrics of feature `opentelemetry` cost per call, beside what
//! the events cost (results in BENCHMARKS.md, "Metrics"), on a paused,
//! auto-advancing clock:
//!
//! - `success`: a `#[retry]` fn whose first attempt succeeds;
//! - `recovers`: two transient failures then success (3 attempts, 2
//!   backoff sleeps);
//! - `recovers_observed`: the same, each call under `events::observe` with
//!   an observer that counts its 3 events: what the events cost.
//!
//! One binary, run three ways: which meter the calls record through is
//! the process's, chosen once.
//!
//! ```sh
//! cargo bench --bench metrics --no-default-features   # feature off: the baseline
//! cargo bench --bench metrics                         # on, the global provider a no-op
//! NIKA_METRICS=sdk cargo bench --bench metrics        # on, the SDK (in-memory exporter)
//! ```
//!
//! Before criterion runs, the binary prints the allocations per call of each
//! (every thread's: the SDK's reader thread exports once a minute).
//! Instructions per call, which a loaded machine does not move (needs
//! valgrind; `NIKA_METRICS=sdk` for the SDK, the binary built each way):
//!
//! ```sh
//! BENCH=metrics bash benches/instructions.sh target/release/deps/metrics-<hash> \
//!     success/retry failure/retry failure/observed
//! ```

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::retry;
use tokio::runtime::Runtime;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::ALLOCS;

#[path = "support/bench_run.rs"]
mod bench_run;

#[path = "support/flaky.rs"]
mod flaky;
use flaky::{Res, flaky};

#[retry(layer = "provider")]
async fn success(n: u32) -> Res {
    Ok(black_box(n))
}

#[retry(layer = "provider", backoff = "2ms", multiplier = 2.0, jitter = 0.0)]
async fn recovers(n: u32) -> Res {
    flaky(n).await
}

/// An observer that counts the events it receives.
#[derive(Default)]
struct Counter(AtomicUsize);

impl RetryObserver for Counter {
    fn on_event(&self, event: &RetryEvent) {
        black_box(event);
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the calls record through, as the run was asked.
fn meter() -> &'static str {
    #[cfg(feature = "opentelemetry")]
    {
        if std::env::var("NIKA_METRICS").as_deref() == Ok("sdk") {
            // The SDK's provider, given before the first call records.
            nika_retry_tests::metrics::install();
            return "sdk";
        }
        "noop"
    }
    #[cfg(not(feature = "opentelemetry"))]
    "off"
}

fn paused_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

const WARM_UP_CALLS: u32 = 1_000;
const COUNTED_CALLS: u32 = 10_000;

/// Allocations per call of `call`, after a warm-up.
fn allocs_per_call<F, Fut>(rt: &Runtime, call: F) -> f64
where
    F: Fn() -> Fut,
    Fut: Future<Output = Res>,
{
    rt.block_on(async {
        for _ in 0..WARM_UP_CALLS {
            assert!(call().await.is_ok());
        }
        let before = ALLOCS.load(Ordering::SeqCst);
        for _ in 0..COUNTED_CALLS {
            assert!(call().await.is_ok());
        }
        (ALLOCS.load(Ordering::SeqCst) - before) as f64 / f64::from(COUNTED_CALLS)
    })
}

fn print_allocations(meter: &str) {
    let rt = paused_runtime();
    let counter = Arc::new(Counter::default());
    println!(
        "\n## Metrics ({meter}): heap allocations per call ({COUNTED_CALLS} calls after {WARM_UP_CALLS})\n"
    );
    println!("| variant | allocations per call |");
    println!("|---|---:|");
    let success = allocs_per_call(&rt, || success(black_box(1)));
    println!("| success | {success:.3} |");
    let recovers_ = allocs_per_call(&rt, || recovers(black_box(1)));
    println!("| recovers | {recovers_:.3} |");
    let observed = allocs_per_call(&rt, || observe(counter.clone(), recovers(black_box(1))));
    println!("| recovers_observed | {observed:.3} |\n");
}

fn metrics(c: &mut Criterion) {
    let meter = meter();
    print_allocations(meter);
    let rt = paused_runtime();
    let counter = Arc::new(Counter::default());
    let mut group = c.benchmark_group(format!("metrics_{meter}"));
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    group.bench_function("success", |b| {
        b.to_async(&rt).iter(|| success(black_box(1)));
    });
    group.bench_function("recovers", |b| {
        b.to_async(&rt).iter(|| recovers(black_box(1)));
    });
    group.bench_function("recovers_observed", |b| {
        b.to_async(&rt)
            .iter(|| observe(counter.clone(), recovers(black_box(1))));
    });
    group.finish();
}

criterion_group!(benches, metrics);

/// `BENCH_RUN=group/name:calls`: only `calls` calls of that contender
/// (`success/retry`, `failure/retry`, `failure/observed`), for
/// `benches/instructions.sh`.
fn run_one(contender: &str, calls: u32) {
    meter();
    let rt = paused_runtime();
    let counter = Arc::new(Counter::default());
    rt.block_on(async {
        for _ in 0..calls {
            let result = match contender {
                "success/retry" => success(black_box(1)).await,
                "failure/retry" => recovers(black_box(1)).await,
                "failure/observed" => observe(counter.clone(), recovers(black_box(1))).await,
                other => panic!("BENCH_RUN: no contender {other}"),
            };
            black_box(result).ok();
        }
    });
}

fn main() {
    if let Some((contender, calls)) = bench_run::requested() {
        run_one(&contender, calls);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
