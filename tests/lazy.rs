//! What the retry loop does not do until it must (README, BENCHMARKS.md):
//! a per-attempt timer is not even registered when the attempt is ready on
//! its first poll, and events are not even built when nobody listens.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use nika_retry::__private::events_built;
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{retry, timeout};
use nika_retry_tests::Error;

#[retry(layer = "provider")]
#[timeout(attempt = "30s", total = "5m")]
async fn ready_attempt() -> Result<u32, Error> {
    Ok(1)
}

#[retry(layer = "http")]
#[timeout(connect = "1s", read = "2s", total = "5m")]
async fn ready_request() -> Result<u32, Error> {
    Ok(2)
}

#[retry(layer = "task")]
#[timeout(attempt = "30s")]
async fn pending_once() -> Result<u32, Error> {
    tokio::task::yield_now().await;
    Ok(3)
}

/// One poll with a waker that does nothing, outside any tokio runtime.
fn poll_once<F: Future>(fut: F) -> Poll<F::Output> {
    pin!(fut).poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn a_ready_attempt_registers_no_timer() {
    // There is no runtime here, so no timer can be registered: creating a
    // tokio `Sleep` would panic. Every limit is still in force.
    assert_eq!(poll_once(ready_attempt()), Poll::Ready(Ok(1)));
    assert_eq!(poll_once(ready_request()), Poll::Ready(Ok(2)));
    let task = TaskPolicy::new().with_timeout(Duration::from_secs(1));
    assert_eq!(poll_once(scope(task, ready_attempt())), Poll::Ready(Ok(1)));
}

#[test]
fn an_attempt_pending_on_its_first_poll_registers_its_timer() {
    // The probe above can fail: the same limit on an attempt that is not
    // ready at once arms the timer, which needs a runtime.
    let armed = catch_unwind(AssertUnwindSafe(|| poll_once(pending_once())));
    let payload = armed.expect_err("the timer was not armed");
    // Tokio's refusal to create a timer outside a runtime, not any panic.
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or_default();
    assert!(
        message.contains("there is no reactor running")
            && message.contains("must be called from the context of a Tokio 1.x runtime"),
        "{message:?}"
    );
}

/// Of every three attempts, the first two fail.
static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

#[retry(layer = "provider", backoff = "1ms")]
async fn recovers() -> Result<u32, Error> {
    if ATTEMPTS.fetch_add(1, Ordering::SeqCst) % 3 < 2 {
        Err(Error::Busy)
    } else {
        Ok(4)
    }
}

#[derive(Default)]
struct Count(AtomicU32);

impl RetryObserver for Count {
    fn on_event(&self, _: &RetryEvent) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Events the retry loop built during `fut` (counted on this thread: the
/// runtime is current-thread).
async fn built_during<F: Future>(fut: F) -> u64 {
    let before = events_built();
    fut.await;
    events_built() - before
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn events_are_built_only_for_someone_listening() {
    // Two retries and a recovery: three decisions a call.
    assert_eq!(built_during(recovers()).await, 0, "nobody listens");

    let count = Arc::new(Count::default());
    assert_eq!(built_during(observe(count.clone(), recovers())).await, 3);
    assert_eq!(count.0.load(Ordering::SeqCst), 3);

    // A subscriber that filters the target out does not listen either.
    let quiet = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::ERROR)
        .with_writer(std::io::sink)
        .finish();
    let guard = tracing::subscriber::set_default(quiet);
    assert_eq!(built_during(recovers()).await, 0, "filtered out");
    drop(guard);

    // At WARN it hears the retries, not the recovery (DEBUG).
    let warn = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::sink)
        .finish();
    let guard = tracing::subscriber::set_default(warn);
    assert_eq!(built_during(recovers()).await, 2, "retries at WARN");
    drop(guard);
}
