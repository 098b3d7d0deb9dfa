//! The size of an annotated fn's future: every layer's future is embedded
//! in the one above it (task → provider → http), for every concurrent
//! call, so growth here is paid fleet-wide (figures and what
//! each byte pays for in BENCHMARKS.md). Bounds, not exact sizes, so that
//! a compiler's better layout does not fail them.

use std::mem::size_of_val;
use std::time::Duration;

use nika_retry::upstream::{Held, Upstream};
use nika_retry::{Classify, TimeoutError, retry, timeout};

#[derive(Debug, Classify)]
#[category(transient)]
struct Busy;

impl From<TimeoutError> for Busy {
    fn from(_: TimeoutError) -> Busy {
        Busy
    }
}

impl From<Held> for Busy {
    fn from(_: Held) -> Busy {
        Busy
    }
}

/// What feature `opentelemetry` adds to a call (on in the workspace's
/// tests): its time with no attempt in flight, 8 bytes (the retry delay it
/// records; its start is the call's own). Without the feature, nothing:
/// `cargo test -p nika-retry-tests --no-default-features --test future_sizes`
/// holds the bounds without it.
const METRICS: usize = if cfg!(feature = "opentelemetry") {
    8
} else {
    0
};

/// An attempt whose future is as small as a future gets.
async fn op(n: u32) -> Result<u32, Busy> {
    Ok(n)
}

#[retry(layer = "provider")]
async fn retried(n: u32) -> Result<u32, Busy> {
    op(n).await
}

#[retry(layer = "provider")]
#[timeout(attempt = "30s")]
async fn retried_timed(n: u32) -> Result<u32, Busy> {
    op(n).await
}

#[retry(layer = "provider", upstream = upstream)]
async fn retried_upstream(upstream: &Upstream, n: u32) -> Result<u32, Busy> {
    op(n).await
}

/// The simplest correct loop by hand: a counter and a growing delay.
async fn by_hand(n: u32) -> Result<u32, Busy> {
    let mut delay = Duration::from_secs(1);
    let mut attempt = 1;
    loop {
        match op(n).await {
            Err(_) if attempt < 3 => {
                tokio::time::sleep(delay).await;
                delay *= 4;
                attempt += 1;
            }
            result => return result,
        }
    }
}

#[test]
fn a_retry_loop_stays_within_its_bound() {
    // The backoff's `tokio::time::Sleep` (112 bytes) is most of either;
    // the call's state (its site, attempt, budget, bucket, key, start and
    // first failure) is 80 bytes of ours.
    let (ours, hand) = (size_of_val(&retried(1)), size_of_val(&by_hand(1)));
    assert!(
        ours <= 208 + METRICS,
        "#[retry]: {ours} bytes (by hand: {hand})"
    );
    assert!(
        ours <= hand + 80 + METRICS,
        "#[retry]: {ours} bytes, by hand: {hand}"
    );
}

#[test]
fn a_timeout_beside_the_retry_stays_within_its_bound() {
    // The attempt's timer (a second `Sleep`, never alive beside the
    // backoff's), what the limits share across attempts and each attempt's
    // own bookkeeping: 344 bytes in all.
    let ours = size_of_val(&retried_timed(1));
    assert!(ours <= 344 + METRICS, "#[retry] + #[timeout]: {ours} bytes");
}

#[test]
fn an_upstream_adds_its_turn_and_not_its_wait() {
    // The turn (the upstream, whether it is the probe, how long it waited,
    // the call's cost, what its attempt charged the pacer and the bucket's
    // generation it reserved in), the argument that names the upstream
    // (8 bytes), and the attempt's handle in force for `upstream::current()`
    // (`WithUpstream`, beside the attempt's future, not beside the sleep):
    // 288 bytes. 264 in 0.1.0; pacing and `current()` had taken it to 336,
    // the pass's future (192 bytes, larger than the sleep) living across
    // its `await`: the admission that needs no wait is now made before it,
    // and only the boxed wait's handle crosses it. The wait's state (its
    // `Notified`, `Sleep` and the store's futures, 448 bytes) is boxed, made
    // only by a call that meets a hold or waits for its pacer: unboxed, this
    // would be over 700.
    let upstream = Upstream::new("sizes");
    let (ours, plain) = (
        size_of_val(&retried_upstream(&upstream, 1)),
        size_of_val(&retried(1)),
    );
    // With metrics, 16 bytes more rather than 8: the pass at the upstream
    // keeps the call across its wait, to record a call that ends `Held`.
    assert!(
        ours <= 288 + 2 * METRICS,
        "#[retry(upstream = …)]: {ours} bytes"
    );
    assert!(
        ours <= plain + 80 + METRICS,
        "{ours} bytes, without the upstream: {plain}"
    );
}
