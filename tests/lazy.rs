//! What the retry loop does not do until it must (docs/comparisons.md, BENCHMARKS.md):
//! a per-attempt timer is not even registered when the attempt is ready on
//! its first poll. (That events are not even built when nobody listens is
//! a unit test of the runtime crate, `run::call`, which counts them.)

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

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
