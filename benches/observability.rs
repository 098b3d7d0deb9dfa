//! What the events of `#[retry]` cost on the failure path (two transient
//! failures then success: 2 events `retrying` and 1 `recovered` per call),
//! on a paused, auto-advancing clock (results in BENCHMARKS.md):
//!
//! - `bare`: no tracing subscriber, no observer;
//! - `subscriber_filtered`: a `tracing_subscriber::fmt` subscriber at ERROR,
//!   so the WARN/DEBUG events of target `nika_retry` are filtered out;
//! - `subscriber_enabled`: the same subscriber at TRACE, writing every event
//!   to `io::sink` (formatting included): for scale;
//! - `observer_per_call`: each call wrapped in `events::observe(counter, …)`;
//! - `observer_around_loop`: one `events::observe` around the whole measured
//!   loop, so only the per-event dispatch is measured.
//!
//! Before criterion runs, the binary prints the allocations per call of each.
//!
//! ```sh
//! CARGO_TARGET_DIR=/work/target-bench cargo bench --bench observability
//! ```

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::retry;
use tokio::runtime::Runtime;

#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::ALLOCS;

#[path = "support/flaky.rs"]
mod flaky;
use flaky::{Res, flaky};

#[retry(layer = "provider", backoff = "2ms", multiplier = 2.0, jitter = 0.0)]
async fn retry_fail(n: u32) -> Res {
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

fn paused_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

/// A fmt subscriber at `level` that writes to `io::sink`.
fn subscriber(level: tracing::Level) -> impl tracing::Subscriber + Send + Sync + 'static {
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::sink)
        .finish()
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

fn print_allocations() {
    let rt = paused_runtime();
    let counter = Arc::new(Counter::default());
    println!(
        "\n## Observability: heap allocations per call ({COUNTED_CALLS} calls after {WARM_UP_CALLS}), 3 attempts and 3 events per call\n"
    );
    println!("| variant | allocations per call |");
    println!("|---|---:|");
    let bare = allocs_per_call(&rt, || retry_fail(black_box(1)));
    println!("| bare | {bare:.3} |");
    let filtered = tracing::subscriber::with_default(subscriber(tracing::Level::ERROR), || {
        allocs_per_call(&rt, || retry_fail(black_box(1)))
    });
    println!("| subscriber_filtered | {filtered:.3} |");
    let enabled = tracing::subscriber::with_default(subscriber(tracing::Level::TRACE), || {
        allocs_per_call(&rt, || retry_fail(black_box(1)))
    });
    println!("| subscriber_enabled | {enabled:.3} |");
    let per_call = allocs_per_call(&rt, || observe(counter.clone(), retry_fail(black_box(1))));
    println!("| observer_per_call | {per_call:.3} |");
    let around = rt.block_on(observe(counter.clone(), async {
        for _ in 0..WARM_UP_CALLS {
            assert!(retry_fail(black_box(1)).await.is_ok());
        }
        let before = ALLOCS.load(Ordering::SeqCst);
        for _ in 0..COUNTED_CALLS {
            assert!(retry_fail(black_box(1)).await.is_ok());
        }
        (ALLOCS.load(Ordering::SeqCst) - before) as f64 / f64::from(COUNTED_CALLS)
    }));
    println!("| observer_around_loop | {around:.3} |");
    let events = counter.0.load(Ordering::Relaxed);
    let observed_calls = 2 * (WARM_UP_CALLS + COUNTED_CALLS) as usize;
    println!("\n(the observer saw {events} events in {observed_calls} observed calls)\n");
    assert_eq!(events, 3 * observed_calls, "3 events per observed call");
}

fn observability(c: &mut Criterion) {
    let rt = paused_runtime();
    let counter = Arc::new(Counter::default());
    let mut group = c.benchmark_group("observability");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);

    group.bench_function("bare", |b| {
        b.to_async(&rt).iter(|| retry_fail(black_box(1)));
    });
    group.bench_function("subscriber_filtered", |b| {
        let _guard = tracing::subscriber::set_default(subscriber(tracing::Level::ERROR));
        b.to_async(&rt).iter(|| retry_fail(black_box(1)));
    });
    group.bench_function("subscriber_enabled", |b| {
        let _guard = tracing::subscriber::set_default(subscriber(tracing::Level::TRACE));
        b.to_async(&rt).iter(|| retry_fail(black_box(1)));
    });
    group.bench_function("observer_per_call", |b| {
        b.to_async(&rt)
            .iter(|| observe(counter.clone(), retry_fail(black_box(1))));
    });
    group.bench_function("observer_around_loop", |b| {
        b.to_async(&rt).iter_custom(|iters| {
            observe(counter.clone(), async move {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(retry_fail(black_box(1)).await.ok());
                }
                start.elapsed()
            })
        });
    });
    group.finish();
}

criterion_group!(benches, observability);

fn main() {
    print_allocations();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
