//! The token bucket (docs/task-scope.md, "The token bucket"): the AWS SDKs' standard
//! retry quota, shared by the calls of a layer. A retry takes 5 tokens (10
//! after a timed-out attempt); a call that succeeds after retries gives back
//! what its successful retry took; a first-attempt success adds one, up to
//! the capacity; once the bucket cannot pay for a retry, calls fail fast.
//! Paused clock, except the two fleets of calls over loopback HTTP.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::observe;
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Layer, TokenBucket, retry, timeout};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::verb::{Provider, RequestOptions, Transport};
use nika_retry_tests::{Error, EventLog, Script};
use tokio::time::Instant;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

type ScriptError = nika_retry_tests::ProviderError;

#[retry(layer = "provider", backoff = "10ms", jitter = 0.0)]
async fn provider(script: &Script) -> Result<u32, ScriptError> {
    script.attempt()
}

/// Times out on its first two attempts, then answers.
#[retry(layer = "provider", backoff = "10ms", jitter = 0.0)]
#[timeout(attempt = "1s")]
async fn stalls_then_answers(attempts: &AtomicU32) -> Result<u32, Error> {
    let n = attempts.fetch_add(1, Ordering::SeqCst) + 1;
    if n <= 2 {
        std::future::pending::<()>().await;
    }
    Ok(n)
}

#[tokio::test(start_paused = true)]
async fn the_bucket_gives_back_a_successful_retry_and_adds_one_on_a_first_attempt_success() {
    let bucket = TokenBucket::new(100).with_retry_cost(10);
    let policy = TaskPolicy::new().with_token_bucket(Layer::Provider, bucket.clone());

    // Two retries, then a success: AWS ends at 90 (the successful retry is given back).
    let script = Script::new(2, ScriptError::status(503));
    assert_eq!(scope(policy.clone(), provider(&script)).await, Ok(3));
    assert_eq!(bucket.available(), 90);

    // A first-attempt success adds one, up to the capacity.
    let script = Script::new(0, ScriptError::status(503));
    assert_eq!(scope(policy.clone(), provider(&script)).await, Ok(1));
    assert_eq!(bucket.available(), 91);

    // A retry after a timeout costs the timeout cost (10 by default, vs 5).
    let bucket = TokenBucket::new(100);
    let policy = TaskPolicy::new().with_token_bucket(Layer::Provider, bucket.clone());
    let attempts = AtomicU32::new(0);
    assert_eq!(
        scope(policy, stalls_then_answers(&attempts)).await.unwrap(),
        3
    );
    assert_eq!(bucket.available(), 100 - 10 - 10 + 10);

    // An empty bucket fails fast: no retry, no sleep.
    let bucket = TokenBucket::new(9).with_retry_cost(10);
    let policy = TaskPolicy::new().with_token_bucket(Layer::Provider, bucket.clone());
    let log = Arc::new(EventLog::default());
    let script = Script::always(ScriptError::status(503));
    let start = Instant::now();
    assert!(
        observe(log.clone(), scope(policy, provider(&script)))
            .await
            .is_err()
    );
    assert_eq!((script.attempts(), start.elapsed()), (1, Duration::ZERO));
    assert_eq!(log.take()[0].reason, Some(GiveUp::TokenBucketEmpty));
}

/// The outage recovers on every call's retry: the bucket gets each retry
/// back, so it never runs dry and retries stay on. (Under the old rule, a
/// success refilling one token, 26 of these 100 calls failed.)
#[tokio::test]
async fn a_recovering_outage_keeps_the_bucket_full_and_retries_on() {
    const CALLS: usize = 100;
    let script: Vec<Fault> = (0..CALLS)
        .flat_map(|_| [Fault::Status(503), Fault::ok("fine")])
        .collect();
    let server = FaultServer::start(script).await;
    let provider = Provider::new(Transport::new(
        server.url(""),
        RequestOptions::fast_retries(),
    ));
    let bucket = TokenBucket::new(100);
    let policy = TaskPolicy::new()
        .with_token_bucket(Layer::Http, bucket.clone())
        .with_token_bucket(Layer::Provider, bucket.clone());
    let mut ok = 0;
    for _ in 0..CALLS {
        if scope(policy.clone(), provider.complete("x")).await.is_ok() {
            ok += 1;
        }
    }
    println!(
        "recovering outage, token bucket (100 tokens, 5 a retry) on both layers: {:.2} requests per call, {ok}/{CALLS} calls succeeded, {} tokens left",
        server.requests() as f64 / CALLS as f64,
        bucket.available()
    );
    assert_eq!(ok, CALLS);
    assert_eq!(server.requests(), 2 * CALLS);
    assert_eq!(bucket.available(), 100);
}

#[retry(layer = "provider", backoff = "10ms", jitter = 0.0)]
async fn always_failing(script: &Script) -> Result<u32, ScriptError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn the_token_bucket_bounds_retries_across_100_concurrent_calls() {
    // 50 tokens at 5 a retry pay for 10 retries in all, however many calls there are.
    let bucket = TokenBucket::new(50);
    let policy = TaskPolicy::new().with_token_bucket(Layer::Provider, bucket.clone());
    let script = Arc::new(Script::always(ScriptError::status(503)));
    let log = Arc::new(EventLog::default());
    let calls: Vec<_> = (0..100)
        .map(|_| {
            let (policy, script, log) = (policy.clone(), script.clone(), log.clone());
            tokio::spawn(observe(
                log,
                scope(policy, async move { always_failing(&script).await }),
            ))
        })
        .collect();
    for call in calls {
        assert!(call.await.unwrap().is_err());
    }
    assert_eq!(
        script.attempts(),
        100 + 10,
        "100 first attempts and the 10 retries the bucket paid for"
    );
    assert_eq!(bucket.available(), 0);
    let empty = log
        .take()
        .into_iter()
        .filter(|e| e.reason == Some(GiveUp::TokenBucketEmpty))
        .count();
    assert!(empty >= 90, "{empty}");

    // Without the bucket, the same load triples.
    let script = Arc::new(Script::always(ScriptError::status(503)));
    let calls: Vec<_> = (0..100)
        .map(|_| {
            let script = script.clone();
            tokio::spawn(async move { always_failing(&script).await })
        })
        .collect();
    for call in calls {
        assert!(call.await.unwrap().is_err());
    }
    assert_eq!(script.attempts(), 300);
}

/// 100 concurrent calls into a provider whose server answers every request
/// with 503, through provider over http (3 × 3 attempts, the default budget
/// of 9), one bucket of 100 tokens on both layers: it pays for 20 retries in
/// all, at 5 tokens each, and no success gives any back. (The same fleet
/// without the bucket makes 9 requests a call: `soak.rs`'s amplification test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_outage_drains_the_bucket_after_20_retries() {
    const CALLS: usize = 100;
    let server = FaultServer::start([Fault::Status(503)]).await;
    // No read timeout within reach: a retry after a timed-out attempt
    // would cost 10 tokens instead of 5.
    let http = RequestOptions {
        read_timeout: secs(30),
        ..RequestOptions::fast_retries()
    };
    let provider = Arc::new(Provider::new(Transport::new(server.url(""), http)));
    let bucket = TokenBucket::new(100);
    let retry: TaskPolicy =
        serde_norway::from_str("retry: { max_attempts: 3, delay_ms: 20, backoff: constant }")
            .unwrap();
    let policy = retry
        .with_budget(9)
        .with_token_bucket(Layer::Http, bucket.clone())
        .with_token_bucket(Layer::Provider, bucket.clone());
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let (provider, policy) = (provider.clone(), policy.clone());
            tokio::spawn(
                async move { scope(policy, provider.complete(&format!("call {i}"))).await },
            )
        })
        .collect();
    for call in calls {
        assert!(call.await.unwrap().is_err());
    }
    let requests = server.requests();
    println!(
        "full outage, token bucket (100 tokens, 5 a retry) on both layers: {:.2} requests per call",
        requests as f64 / CALLS as f64
    );
    // 100 first attempts and exactly the 20 retries the tokens paid for.
    assert_eq!((requests, bucket.available()), (CALLS + 20, 0));
    let hits = server.hits();
    for i in 0..CALLS {
        let body = format!("call {i}");
        let made = hits.iter().filter(|h| h.body == body).count();
        assert!((1..=9).contains(&made), "{body}: {made} requests");
    }
}
