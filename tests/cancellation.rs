//! Cancellation and panics: dropping a call's future stops all further
//! attempts, whether it is dropped inside a backoff sleep or inside an
//! attempt, and a panicking body is not retried (RELIABILITY.md,
//! "Cancellation and panics"). Paused clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::{retry, timeout};
use nika_retry_tests::ProviderError;
use tokio::time::sleep;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Counts its attempts; each one stalls for an hour.
#[retry(layer = "provider", jitter = 0.0)]
#[timeout(attempt = "2s")]
async fn stalls(n: &AtomicU32) -> Result<(), ProviderError> {
    n.fetch_add(1, Ordering::SeqCst);
    sleep(secs(3600)).await;
    Ok(())
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
    let n = AtomicU32::new(0);
    // Dropped 1 s into the first attempt, before its 2 s limit.
    let cancelled = tokio::time::timeout(secs(1), stalls(&n)).await;
    assert!(cancelled.is_err());
    sleep(secs(3600)).await;
    assert_eq!(n.load(Ordering::SeqCst), 1);
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
