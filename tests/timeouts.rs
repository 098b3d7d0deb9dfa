//! `#[timeout]` with `#[retry]`: per-attempt limits, the total deadline, both
//! attribute orders, expression limits, cancellation and panics.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::{Boundary, Classify, ErrorCategory, Layer, TimeoutError, retry, timeout};
use nika_retry_tests::ProviderError;
use tokio::time::{Instant, sleep};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Sleeps `stall` on the attempts listed as slow, else answers at once.
struct Slow {
    attempts: AtomicU32,
    slow_attempts: u32,
    stall: Duration,
}

impl Slow {
    fn new(slow_attempts: u32, stall: Duration) -> Slow {
        Slow {
            attempts: AtomicU32::new(0),
            slow_attempts,
            stall,
        }
    }

    async fn attempt(&self) -> Result<u32, ProviderError> {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.slow_attempts {
            sleep(self.stall).await;
        }
        Ok(n)
    }

    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }
}

#[retry(layer = "provider", jitter = 0.0)]
#[timeout(attempt = "2s")]
async fn retry_above(slow: &Slow) -> Result<u32, ProviderError> {
    slow.attempt().await
}

#[timeout(attempt = "2s")]
#[retry(layer = "provider", jitter = 0.0)]
async fn timeout_above(slow: &Slow) -> Result<u32, ProviderError> {
    slow.attempt().await
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_times_out_and_is_retried_in_either_order() {
    for order in ["retry above", "timeout above"] {
        let slow = Slow::new(1, secs(3600));
        let start = Instant::now();
        let result = match order {
            "retry above" => retry_above(&slow).await,
            _ => timeout_above(&slow).await,
        };
        assert_eq!(result, Ok(2), "{order}");
        // 2 s timeout, 1 s backoff, then an instant success.
        assert_eq!(start.elapsed(), secs(3), "{order}");
    }
}

#[tokio::test(start_paused = true)]
async fn every_attempt_timing_out_surfaces_the_timeout_error() {
    let slow = Slow::new(u32::MAX, secs(3600));
    let start = Instant::now();
    let err = retry_above(&slow).await.unwrap_err();
    let ProviderError::Timeout(timeout) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        timeout,
        &TimeoutError::new(Boundary::Attempt, secs(2), Layer::Provider)
    );
    assert_eq!(err.category(), ErrorCategory::Transient);
    assert_eq!(slow.attempts(), 3);
    // Three 2 s attempts, 1 s and 4 s apart.
    assert_eq!(start.elapsed(), secs(11));
}

#[retry(layer = "provider", jitter = 0.0)]
#[timeout(total = "4s")]
async fn with_total(slow: &Slow) -> Result<u32, ProviderError> {
    slow.attempt().await
}

#[tokio::test(start_paused = true)]
async fn total_cuts_a_running_attempt_and_is_not_retried() {
    let slow = Slow::new(u32::MAX, secs(3600));
    let start = Instant::now();
    let err = with_total(&slow).await.unwrap_err();
    assert_eq!(
        err,
        ProviderError::Timeout(TimeoutError::new(Boundary::Total, secs(4), Layer::Provider))
    );
    assert_eq!(err.category(), ErrorCategory::Permanent);
    assert_eq!((slow.attempts(), start.elapsed()), (1, secs(4)));
}

#[retry(layer = "provider", jitter = 0.0)]
#[timeout(total = "4500ms")]
async fn failing_with_total(n: &AtomicU32) -> Result<u32, ProviderError> {
    n.fetch_add(1, Ordering::SeqCst);
    Err(ProviderError::status(503))
}

#[tokio::test(start_paused = true)]
async fn no_sleep_is_started_that_would_pass_the_total_deadline() {
    let n = AtomicU32::new(0);
    let start = Instant::now();
    let err = failing_with_total(&n).await.unwrap_err();
    // Slept 1 s after the first attempt; the 4 s sleep would end at 5 s > 4.5 s,
    // so the call returns the last error at 1 s instead of sleeping.
    assert_eq!(err, ProviderError::status(503));
    assert_eq!((n.load(Ordering::SeqCst), start.elapsed()), (2, secs(1)));
}

#[retry(layer = "task")]
#[timeout(attempt = limit, total = total)]
async fn with_expr_limits(
    slow: &Slow,
    limit: Option<Duration>,
    total: Duration,
) -> Result<u32, ProviderError> {
    slow.attempt().await
}

#[tokio::test(start_paused = true)]
async fn expression_limits_apply_and_none_means_no_limit() {
    let slow = Slow::new(1, secs(100));
    let start = Instant::now();
    assert_eq!(with_expr_limits(&slow, None, secs(1000)).await, Ok(1));
    assert_eq!(start.elapsed(), secs(100));

    let slow = Slow::new(1, secs(100));
    let err = with_expr_limits(&slow, Some(secs(5)), secs(1000))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ProviderError::Timeout(TimeoutError::new(Boundary::Attempt, secs(5), Layer::Task))
    );

    let slow = Slow::new(1, secs(100));
    let err = with_expr_limits(&slow, Some(secs(50)), secs(7))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ProviderError::Timeout(TimeoutError::new(Boundary::Total, secs(7), Layer::Task))
    );
}

#[derive(Debug, thiserror::Error, Classify)]
enum HttpError {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[retry(layer = "http", jitter = 0.0)]
#[timeout]
async fn bare_http_timeout(connect_stall: Duration, read_stall: Duration) -> Result<(), HttpError> {
    nika_retry::connect(sleep(connect_stall)).await?;
    sleep(read_stall).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn bare_timeout_on_http_means_connect_10s_and_read_120s() {
    let start = Instant::now();
    let err = bare_http_timeout(secs(11), Duration::ZERO)
        .await
        .unwrap_err();
    let HttpError::Timeout(t) = err;
    assert_eq!(
        t,
        TimeoutError::new(Boundary::Connect, secs(10), Layer::Http)
    );
    // Three attempts of 10 s each, 250 ms and 1 s apart.
    assert_eq!(start.elapsed(), Duration::from_millis(31_250));

    let start = Instant::now();
    let err = bare_http_timeout(secs(9), secs(200)).await.unwrap_err();
    let HttpError::Timeout(t) = err;
    assert_eq!(t, TimeoutError::new(Boundary::Read, secs(120), Layer::Http));
    // `read` is inactivity: each attempt's last progress is its connect, at
    // 9 s; cut 120 s later. Three attempts of 129 s, 250 ms and 1 s apart.
    assert_eq!(start.elapsed(), Duration::from_millis(388_250));

    let start = Instant::now();
    assert!(bare_http_timeout(secs(9), secs(110)).await.is_ok());
    assert_eq!(start.elapsed(), secs(119));
}

#[retry(layer = "provider", jitter = 0.0)]
async fn counted_failure(n: &AtomicU32) -> Result<(), ProviderError> {
    n.fetch_add(1, Ordering::SeqCst);
    Err(ProviderError::status(503))
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_in_a_backoff_stops_all_further_attempts() {
    let n = AtomicU32::new(0);
    // The first attempt fails at once, then the 1 s backoff begins.
    let cancelled = tokio::time::timeout(Duration::from_millis(500), counted_failure(&n)).await;
    assert!(cancelled.is_err());
    sleep(secs(3600)).await;
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_future_inside_an_attempt_stops_it() {
    let slow = Slow::new(u32::MAX, secs(3600));
    let cancelled = tokio::time::timeout(secs(1), retry_above(&slow)).await;
    assert!(cancelled.is_err());
    sleep(secs(3600)).await;
    assert_eq!(slow.attempts(), 1);
}

#[retry(layer = "provider")]
async fn panics(n: &AtomicU32) -> Result<(), ProviderError> {
    n.fetch_add(1, Ordering::SeqCst);
    panic!("a bug, not a transient failure");
}

#[tokio::test(start_paused = true)]
async fn a_panic_is_not_retried() {
    static N: AtomicU32 = AtomicU32::new(0);
    let joined = tokio::spawn(panics(&N)).await;
    assert!(joined.unwrap_err().is_panic());
    assert_eq!(N.load(Ordering::SeqCst), 1);
}
