//! The retry decisions a fleet depends on: the cumulative budget, server
//! hints that cross a layer, classification of what a server or a socket
//! does, and `x-should-retry`. Paused clock where time matters, loopback
//! where HTTP does. (The token bucket has `token_bucket.rs`, the
//! idempotency key `idempotency_key.rs`.)

use std::sync::Arc;
use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::{Outcome, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Classify, ErrorCategory, Layer, RetryConfig, retry};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::verb::{HttpError, Provider, RequestOptions, Transport};
use nika_retry_tests::{EventLog, Script, serve};

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

// ---- (2) A server hint survives the layer that gave up on it.

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

// ---- (3) Classification of what a socket or a server does.

#[tokio::test]
async fn a_connection_closed_mid_response_is_retried() {
    let script = [Fault::Truncated, Fault::ok("whole")];
    let (server, transport) = serve(script, RequestOptions::fast_retries()).await;
    let (body, log) = EventLog::record(transport.post("/", "x")).await;
    assert_eq!(body.unwrap(), "whole");
    assert_eq!(server.requests(), 2);
    let first = &log.events()[0];
    assert_eq!(
        (first.category, first.outcome),
        (Some(ErrorCategory::Transient), Outcome::Retrying)
    );
}

#[tokio::test]
async fn retry_after_too_large_for_the_clock_gives_up_and_before_1970_is_now() {
    let script = [Fault::UnavailableRaw("99999999999999999999999".into())];
    let (server, transport) = serve(script, RequestOptions::fast_retries()).await;
    let err = transport.post("/", "x").await.unwrap_err();
    assert!(
        matches!(err, HttpError::Status { retry_after: Some(d), .. } if d == Duration::MAX),
        "{err:?}"
    );
    assert_eq!(server.requests(), 1, "a hint too long: no retry");

    let script = [
        Fault::UnavailableRaw("Wed, 31 Dec 1969 23:59:59 GMT".into()),
        Fault::ok("at once"),
    ];
    let (_server, transport) = serve(script, RequestOptions::fast_retries()).await;
    let (out, log) = EventLog::record(transport.post("/", "x")).await;
    assert_eq!(out.unwrap(), "at once");
    let first = &log.events()[0];
    assert_eq!(
        (first.delay, first.from_hint),
        (Some(Duration::ZERO), true),
        "a date in the past: retry now"
    );
}

// ---- (4) `x-should-retry` wins over the status.

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
