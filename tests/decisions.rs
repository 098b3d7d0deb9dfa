//! The retry decisions a fleet depends on: the cumulative budget, the token
//! bucket, server hints that cross a layer, classification of what a server
//! or a socket does, `x-should-retry`, and the attempt context that gives a
//! call its idempotency key. Paused clock where time matters, loopback where
//! HTTP does.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::{Outcome, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{
    AttemptInfo, Classify, ErrorCategory, Layer, RetryConfig, TimeoutError, TokenBucket,
    current_attempt, retry, timeout,
};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::verb::{HttpError, Provider, RequestOptions, Transport};
use nika_retry_tests::{EventLog, Script};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

type ScriptError = nika_retry_tests::ProviderError;

// ---- (1) The budget: the default never cuts a loop below its own attempts.

#[retry(layer = "provider", attempts = 10, backoff = "10ms", jitter = 0.0)]
async fn ten_attempts(script: &Script) -> Result<u32, ScriptError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn a_lone_loop_makes_its_own_attempts_and_a_task_budget_always_holds() {
    let log = Arc::new(EventLog::default());
    let script = Script::always(ScriptError::status(503));
    assert!(observe(log.clone(), ten_attempts(&script)).await.is_err());
    assert_eq!(
        script.attempts(),
        10,
        "the default budget of 9 does not cut it"
    );
    let last = log.take().pop().unwrap();
    assert_eq!(
        (last.outcome, last.reason, last.total_attempts),
        (Outcome::GaveUp, Some(GiveUp::AttemptsExhausted), 10)
    );

    // A budget the task sets holds, even at the default's value.
    for yaml in ["budget: 9", "budget: 4"] {
        let policy: TaskPolicy = serde_norway::from_str(yaml).unwrap();
        let script = Script::always(ScriptError::status(503));
        assert!(
            observe(log.clone(), scope(policy, ten_attempts(&script)))
                .await
                .is_err()
        );
        let budget: u32 = yaml["budget: ".len()..].parse().unwrap();
        assert_eq!(script.attempts(), budget, "{yaml}");
        let last = log.take().pop().unwrap();
        assert_eq!(
            (last.outcome, last.reason),
            (Outcome::BudgetExhausted, Some(GiveUp::BudgetExhausted))
        );
    }

    // A task's retry: of 10 attempts is a loop's own attempts too.
    let retry = RetryConfig::for_layer(Layer::Provider)
        .with_max_attempts(10)
        .and_then(|c| c.with_initial_backoff(ms(10)))
        .unwrap();
    let script = Script::always(ScriptError::status(503));
    let policy = TaskPolicy::new().with_retry(retry);
    assert!(scope(policy, ten_attempts(&script)).await.is_err());
    assert_eq!(script.attempts(), 10);
}

// ---- (2) The token bucket: the AWS standard retry quota.

#[retry(layer = "provider", backoff = "10ms", jitter = 0.0)]
async fn provider(script: &Script) -> Result<u32, ScriptError> {
    script.attempt()
}

#[derive(Debug, thiserror::Error, Classify)]
enum SlowError {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// Times out on its first two attempts, then answers.
#[retry(layer = "provider", backoff = "10ms", jitter = 0.0)]
#[timeout(attempt = "1s")]
async fn stalls_then_answers(attempts: &AtomicU32) -> Result<u32, SlowError> {
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

/// Http-layer retries 10 ms apart, exactly.
fn fast_http() -> RequestOptions {
    let retry = RetryConfig::for_layer(Layer::Http)
        .with_initial_backoff(ms(10))
        .and_then(|c| c.with_jitter(0.0))
        .unwrap();
    RequestOptions {
        read_timeout: secs(5),
        retry: Some(retry),
        ..RequestOptions::default()
    }
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
    let provider = Provider::new(Transport::new(server.url(""), fast_http()));
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

// ---- (3) A server hint survives the layer that gave up on it.

#[tokio::test(start_paused = true)]
async fn the_provider_waits_a_45s_retry_after_that_the_http_layer_gave_up_on() {
    let server = FaultServer::start([Fault::UnavailableFor(45), Fault::ok("after the wait")]).await;
    let provider = Provider::new(Transport::new(server.url(""), RequestOptions::default()));
    let log = Arc::new(EventLog::default());
    let answer = observe(log.clone(), provider.complete("hi")).await;
    assert_eq!(answer.unwrap(), "after the wait");
    let events = log.take();
    let outline: Vec<_> = events.iter().map(|e| (e.layer, e.outcome)).collect();
    assert_eq!(
        outline,
        [
            (Layer::Http, Outcome::GaveUp),
            (Layer::Provider, Outcome::Retrying),
            (Layer::Provider, Outcome::Recovered)
        ],
        "{events:#?}"
    );
    assert_eq!(
        events[0].reason,
        Some(GiveUp::HintTooLong { hint: secs(45) }),
        "above the http layer's 30 s cap"
    );
    assert_eq!(
        (events[1].delay, events[1].from_hint),
        (Some(secs(45)), true)
    );
    let hits = server.hits();
    assert_eq!(hits.len(), 2);
    assert!(
        hits[1].at - hits[0].at >= secs(45),
        "{:?}",
        hits[1].at - hits[0].at
    );
}

// ---- (4) Classification of what a socket or a server does.

#[tokio::test]
async fn a_connection_closed_mid_response_is_retried() {
    let server = FaultServer::start([Fault::Truncated, Fault::ok("whole")]).await;
    let transport = Transport::new(server.url(""), fast_http());
    let log = Arc::new(EventLog::default());
    let body = observe(log.clone(), transport.post("/", "x"))
        .await
        .unwrap();
    assert_eq!(body, "whole");
    assert_eq!(server.requests(), 2);
    let first = &log.events()[0];
    assert_eq!(
        (first.category, first.outcome),
        (ErrorCategory::Transient, Outcome::Retrying)
    );
}

#[tokio::test]
async fn retry_after_too_large_for_the_clock_gives_up_and_before_1970_is_now() {
    let server =
        FaultServer::start([Fault::UnavailableRaw("99999999999999999999999".into())]).await;
    let transport = Transport::new(server.url(""), fast_http());
    let err = transport.post("/", "x").await.unwrap_err();
    assert!(
        matches!(err, HttpError::Status { retry_after: Some(d), .. } if d == Duration::MAX),
        "{err:?}"
    );
    assert_eq!(server.requests(), 1, "a hint too long: no retry");

    let server = FaultServer::start([
        Fault::UnavailableRaw("Wed, 31 Dec 1969 23:59:59 GMT".into()),
        Fault::ok("at once"),
    ])
    .await;
    let transport = Transport::new(server.url(""), fast_http());
    let log = Arc::new(EventLog::default());
    assert_eq!(
        observe(log.clone(), transport.post("/", "x"))
            .await
            .unwrap(),
        "at once"
    );
    let first = &log.events()[0];
    assert_eq!(
        (first.delay, first.from_hint),
        (Some(Duration::ZERO), true),
        "a date in the past: retry now"
    );
}

// ---- (6) `x-should-retry` wins over the status.

/// A transport error carrying the category `classify_response` gave.
#[derive(Debug)]
struct Refused(ErrorCategory);

impl Classify for Refused {
    fn category(&self) -> ErrorCategory {
        self.0
    }
}

#[retry(layer = "http", backoff = "10ms", jitter = 0.0)]
async fn get(client: &reqwest::Client, url: &str) -> Result<(), Refused> {
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| Refused(e.category()))?;
    match nika_retry::http::classify_response(&response) {
        _ if response.status().is_success() => Ok(()),
        (category, _) => Err(Refused(category)),
    }
}

fn should_retry(status: u16, value: &str) -> Fault {
    Fault::WithHeaders(status, vec![("x-should-retry".into(), value.into())])
}

#[tokio::test]
async fn x_should_retry_overrides_the_status_category() {
    let client = reqwest::Client::new();

    let server = FaultServer::start([should_retry(503, "false")]).await;
    let err = get(&client, &server.url("/")).await.unwrap_err();
    assert_eq!(err.0, ErrorCategory::Permanent);
    assert_eq!(server.requests(), 1, "a 503 the server says not to retry");

    let server = FaultServer::start([should_retry(409, "true"), Fault::ok("done")]).await;
    assert!(get(&client, &server.url("/")).await.is_ok());
    assert_eq!(server.requests(), 2, "a 409 the server says to retry");

    let server = FaultServer::start([Fault::Status(409)]).await;
    let err = get(&client, &server.url("/")).await.unwrap_err();
    assert_eq!((err.0, server.requests()), (ErrorCategory::Permanent, 1));
}

// ---- (7) The attempt context: one idempotency key per call, on every attempt.

#[tokio::test]
async fn every_attempt_of_a_call_sends_its_key_and_the_next_call_a_new_one() {
    let server = FaultServer::start([
        Fault::Status(503),
        Fault::Status(503),
        Fault::ok("first"),
        Fault::ok("second"),
    ])
    .await;
    let transport = Transport::new(server.url(""), fast_http());
    assert_eq!(transport.post("/", "x").await.unwrap(), "first");
    assert_eq!(transport.post("/", "x").await.unwrap(), "second");
    let hits = server.hits();
    let keys: Vec<&str> = hits
        .iter()
        .map(|h| h.idempotency_key.as_deref().expect("an Idempotency-Key"))
        .collect();
    let counts: Vec<&str> = hits
        .iter()
        .map(|h| h.retry_count.as_deref().expect("an X-Retry-Count"))
        .collect();
    assert_eq!(counts, ["0", "1", "2", "0"]);
    assert!(keys[0] == keys[1] && keys[1] == keys[2], "{keys:?}");
    assert_ne!(keys[2], keys[3], "a new call, a new key");
    for key in keys {
        let groups: Vec<usize> = key.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "UUID text: {key}");
    }
}

/// Records its attempt before and after a nested call, which records its own.
#[retry(layer = "provider", backoff = "10ms", jitter = 0.0)]
async fn outer_call(script: &Script, seen: &Mutex<Vec<AttemptInfo>>) -> Result<u32, ScriptError> {
    let before = current_attempt().expect("inside the body");
    inner_call(seen).await?;
    assert_eq!(
        current_attempt(),
        Some(before.clone()),
        "restored after the nested call"
    );
    seen.lock().unwrap().push(before);
    script.attempt()
}

#[retry(layer = "http")]
async fn inner_call(seen: &Mutex<Vec<AttemptInfo>>) -> Result<(), ScriptError> {
    let info = current_attempt().expect("inside the nested body");
    // Across a pending poll too.
    tokio::task::yield_now().await;
    assert_eq!(current_attempt(), Some(info.clone()));
    seen.lock().unwrap().push(info);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn nested_calls_each_see_their_own_attempt_and_key() {
    let seen = Mutex::new(vec![]);
    let script = Script::new(1, ScriptError::status(503));
    assert_eq!(outer_call(&script, &seen).await, Ok(2));
    let seen = seen.into_inner().unwrap();
    let outline: Vec<_> = seen
        .iter()
        .map(|i| (i.layer, i.attempt, i.max_attempts))
        .collect();
    assert_eq!(
        outline,
        [
            (Layer::Http, 1, 3),
            (Layer::Provider, 1, 3),
            (Layer::Http, 1, 3),
            (Layer::Provider, 2, 3)
        ]
    );
    assert_eq!(seen[1].idempotency_key, seen[3].idempotency_key, "one call");
    assert_ne!(
        seen[0].idempotency_key, seen[2].idempotency_key,
        "two calls"
    );
    assert_ne!(seen[0].idempotency_key, seen[1].idempotency_key);
    assert_eq!(current_attempt(), None);
}
