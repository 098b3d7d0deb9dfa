//! A retry after a timed-out attempt costs a token bucket its
//! `timeout_retry_cost`, whichever limit expired: the
//! attempt's own (`read`, `attempt`), its `connect` limit through
//! `nika_retry::connect` or the reqwest connector, or a `TimeoutError` that
//! comes back inside the fn's own error.
//!
//! Each call below fails twice in two attempts: one retry, whose cost stays
//! taken (a retry is given back only when the call succeeds). A fresh bucket
//! of 100 thus ends at 90 after a timeout (cost 10), 95 after anything else
//! (cost 5).

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Boundary, Layer, TimeoutError, TokenBucket, retry, timeout};
use nika_retry_tests::fault::HangingPort;
use nika_retry_tests::verb::HttpError;

/// What a retry costs in a fresh bucket of 100 with the AWS defaults.
const ORDINARY: u32 = 100 - 5;
const AFTER_TIMEOUT: u32 = 100 - 10;

fn bucket_on(layer: Layer) -> (TokenBucket, TaskPolicy) {
    let bucket = TokenBucket::new(100);
    let policy = TaskPolicy::new().with_token_bucket(layer, bucket.clone());
    (bucket, policy)
}

/// Connects through `nika_retry::connect`, which never completes when `hang`;
/// otherwise fails with a reset.
#[retry(layer = "http", attempts = 2, backoff = "1ms", jitter = 0.0)]
#[timeout(connect = "1s")]
async fn dial(hang: bool) -> Result<(), io::Error> {
    if hang {
        nika_retry::connect(std::future::pending::<()>()).await?;
    }
    Err(io::ErrorKind::ConnectionReset.into())
}

#[tokio::test(start_paused = true)]
async fn a_connect_limit_through_nika_retry_connect_costs_the_timeout_cost() {
    let (bucket, policy) = bucket_on(Layer::Http);
    let err = scope(policy.clone(), dial(true)).await.unwrap_err();
    assert!(TimeoutError::find(&err).is_some(), "{err:?}");
    assert_eq!(bucket.available(), AFTER_TIMEOUT);

    // The control: a reset is an ordinary retry.
    let (bucket, policy) = bucket_on(Layer::Http);
    scope(policy, dial(false)).await.unwrap_err();
    assert_eq!(bucket.available(), ORDINARY);
}

#[retry(layer = "http", attempts = 2, backoff = "1ms", jitter = 0.0)]
#[timeout(connect = "200ms")]
async fn get(client: &reqwest::Client, url: &str) -> Result<String, HttpError> {
    Ok(client.get(url).send().await?.text().await?)
}

#[tokio::test]
async fn a_connect_limit_in_the_reqwest_connector_costs_the_timeout_cost() {
    let port = HangingPort::start().await;
    let client = nika_retry::http::client_builder().build().unwrap();
    let (bucket, policy) = bucket_on(Layer::Http);
    let err = scope(policy, get(&client, &port.url())).await.unwrap_err();
    assert!(matches!(err, HttpError::Request(_)), "{err:?}");
    assert_eq!(bucket.available(), AFTER_TIMEOUT);
}

#[derive(Debug, thiserror::Error, nika_retry::Classify)]
enum StepError {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    /// A one-field variant with its own category.
    #[error("the step was too slow: {0}")]
    #[category(transient)]
    Slow(TimeoutError),
    #[error("busy")]
    #[category(transient)]
    Busy,
}

/// A tool run bounded on its own, called from the provider's attempt.
#[timeout(layer = "tool", attempt = "1s")]
async fn step() -> Result<(), StepError> {
    std::future::pending::<()>().await;
    Ok(())
}

/// Fails with what `how` says: the inner timeout as it comes back (`?`),
/// that timeout in a one-field variant, or a plain transient error.
#[retry(layer = "provider", attempts = 2, backoff = "1ms", jitter = 0.0)]
async fn plan(how: &str, calls: &AtomicU32) -> Result<(), StepError> {
    calls.fetch_add(1, Ordering::SeqCst);
    match how {
        "inner" => step().await,
        "wrapped" => match step().await {
            Err(StepError::Timeout(t)) => Err(StepError::Slow(t)),
            other => other,
        },
        _ => Err(StepError::Busy),
    }
}

#[tokio::test(start_paused = true)]
async fn a_timeout_inside_the_fns_own_error_costs_the_timeout_cost() {
    for (how, left) in [
        ("inner", AFTER_TIMEOUT),
        ("wrapped", AFTER_TIMEOUT),
        ("busy", ORDINARY),
    ] {
        let (bucket, policy) = bucket_on(Layer::Provider);
        let calls = AtomicU32::new(0);
        scope(policy, plan(how, &calls)).await.unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 2, "{how}");
        assert_eq!(bucket.available(), left, "{how}");
    }
}

/// The attempt's own limits: `attempt`, the whole attempt's duration.
#[retry(layer = "provider", attempts = 2, backoff = "1ms", jitter = 0.0)]
#[timeout(attempt = "1s")]
async fn stalls() -> Result<(), StepError> {
    std::future::pending::<()>().await;
    Ok(())
}

/// And `read`, an attempt that goes a second without a wake-up.
#[retry(layer = "provider", attempts = 2, backoff = "1ms", jitter = 0.0)]
#[timeout(read = "1s")]
async fn stalls_unread() -> Result<(), StepError> {
    std::future::pending::<()>().await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn the_attempts_own_limits_cost_the_timeout_cost() {
    for (boundary, (err, left)) in [
        (Boundary::Attempt, with_bucket(stalls()).await),
        (Boundary::Read, with_bucket(stalls_unread()).await),
    ] {
        assert!(
            matches!(&err, StepError::Timeout(t) if t.boundary() == boundary),
            "{err:?}"
        );
        assert_eq!(left, AFTER_TIMEOUT, "{boundary:?}");
    }
}

/// The error of `call` under a fresh provider bucket, and what the bucket
/// has left.
async fn with_bucket(
    call: impl std::future::Future<Output = Result<(), StepError>>,
) -> (StepError, u32) {
    let (bucket, policy) = bucket_on(Layer::Provider);
    let err = scope(policy, call).await.unwrap_err();
    (err, bucket.available())
}
