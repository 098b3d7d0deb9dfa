//! The metrics of feature `opentelemetry`, read back through the SDK's
//! in-memory exporter after scripted calls on the paused clock: a
//! recovered call, a give-up, a wait at a hold, a paced wait, pushbacks, a
//! call that returns `Held`, a stream's first chunk, and a request of each
//! adapter. Each figure is checked against the `RetryEvent`s (and
//! `UpstreamEvent`s) of the same calls, and exactly where the paused clock
//! makes it exact. The tests run at once in one process, through one
//! provider: each reads the points of its own fns and upstreams.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use nika_retry::events::{Outcome, RetryEvent, RetryObserver, UpstreamEvent, WaitReason, observe};
use nika_retry::metrics::{
    CALL_ATTEMPTS, CALL_DURATION, ERROR_TYPE, LAYER, OPERATION, OUTCOME, PUSHBACK_REASON,
    RETRY_DELAY, TIME_TO_FIRST_CHUNK, UPSTREAM_NAME, UPSTREAM_PUSHBACKS, UPSTREAM_WAIT_DURATION,
    WAIT_REASON,
};
use nika_retry::stream::{Started, started};
use nika_retry::upstream::{HoldReason, Quota, Upstream};
use nika_retry::{ErrorCategory, Layer, RetryConfig, retry};
use nika_retry_tests::metrics::{Point, kv, point};
use nika_retry_tests::{Error, ProviderError, Script};

/// Every event of the calls it observes, upstream holds included.
#[derive(Default)]
struct Seen {
    events: Mutex<Vec<RetryEvent>>,
    holds: Mutex<Vec<UpstreamEvent>>,
}

impl RetryObserver for Seen {
    fn on_event(&self, event: &RetryEvent) {
        self.events.lock().unwrap().push(event.clone());
    }

    fn on_upstream(&self, event: &UpstreamEvent) {
        self.holds.lock().unwrap().push(event.clone());
    }
}

impl Seen {
    /// Runs `fut` observed: its output, and what was seen.
    async fn run<F: Future>(fut: F) -> (F::Output, Arc<Seen>) {
        nika_retry_tests::metrics::install();
        let seen = Arc::new(Seen::default());
        let out = observe(seen.clone(), fut).await;
        (out, seen)
    }

    fn events(&self) -> Vec<RetryEvent> {
        self.events.lock().unwrap().clone()
    }

    fn holds(&self) -> Vec<UpstreamEvent> {
        self.holds.lock().unwrap().clone()
    }

    /// The delays of its retries, as their events say.
    fn delays(&self) -> Duration {
        self.events().iter().filter_map(|e| e.delay).sum()
    }

    /// The waits at an upstream, as the events say.
    fn waits(&self) -> Duration {
        self.events().iter().filter_map(|e| e.upstream_wait).sum()
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The call attributes of `operation` ending with `outcome`.
fn call(operation: &'static str, outcome: &'static str) -> Vec<opentelemetry::KeyValue> {
    vec![kv(OPERATION, operation), kv(OUTCOME, outcome)]
}

/// A histogram point of one measurement of `value`.
fn one(value: f64) -> (u64, f64) {
    (1, value)
}

fn counted(p: Option<Point>) -> (u64, f64) {
    p.map_or((0, 0.0), |p| (p.count, p.sum))
}

#[retry(layer = "provider", backoff = "1s", jitter = 0.0)]
async fn recovers(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn a_recovered_call_records_its_duration_its_attempts_and_its_delay() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    let script = Script::new(1, ProviderError::status(503));
    let (out, seen) = Seen::run(recovers(&script)).await;
    assert_eq!(out.unwrap(), 2);
    let events = seen.events();
    let outcomes: Vec<Outcome> = events.iter().map(|e| e.outcome).collect();
    assert_eq!(outcomes, [Outcome::Retrying, Outcome::Recovered]);
    assert_eq!(seen.delays(), Duration::from_secs(1));

    let at = call("metrics::recovers", "recovered");
    let mut with_layer = at.clone();
    with_layer.push(kv(LAYER, "provider"));
    let duration = point(CALL_DURATION, &with_layer).expect("the call's duration");
    // On the paused clock the call lasted exactly its one backoff.
    assert_eq!((duration.count, duration.sum), one(secs(seen.delays())));
    let attempts = point(CALL_ATTEMPTS, &at).unwrap();
    assert_eq!(
        (attempts.count, attempts.sum),
        one(f64::from(events[1].attempt))
    );
    // A96's buckets: ≤1, ≤2, ≤3, ≤4, ≤5, more.
    assert_eq!(attempts.bounds, [1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(attempts.buckets, [0, 1, 0, 0, 0, 0]);
    let delay = point(RETRY_DELAY, &at).unwrap();
    assert_eq!((delay.count, delay.sum), one(secs(seen.delays())));
    // A success has no `error.type`.
    let mut failed = at.clone();
    failed.push(kv(ERROR_TYPE, "transient"));
    assert_eq!(point(CALL_DURATION, &failed), None);
}

#[retry(layer = "http", backoff = "200ms", jitter = 0.0)]
async fn gives_up(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "provider")]
async fn refused_for_good(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "http")]
async fn succeeds_at_once() -> Result<u32, Error> {
    Ok(7)
}

#[tokio::test(start_paused = true)]
async fn a_give_up_records_its_error_type_and_a_first_success_no_delay() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    let script = Script::always(ProviderError::status(502));
    let (out, seen) = Seen::run(gives_up(&script)).await;
    assert!(out.is_err());
    let last = seen.events().pop().unwrap();
    assert_eq!((last.outcome, last.attempt), (Outcome::GaveUp, 3));
    assert_eq!(last.category, Some(ErrorCategory::Transient));
    // 200 ms, then 800 ms.
    assert_eq!(seen.delays(), Duration::from_secs(1));

    let mut at = call("metrics::gives_up", "gave_up");
    at.push(kv(ERROR_TYPE, "transient"));
    at.push(kv(LAYER, "http"));
    let attempts = point(CALL_ATTEMPTS, &at).unwrap();
    assert_eq!((attempts.count, attempts.sum), one(3.0));
    assert_eq!(attempts.buckets, [0, 0, 1, 0, 0, 0]);
    let delay = point(RETRY_DELAY, &at).unwrap();
    assert_eq!((delay.count, delay.sum), one(secs(seen.delays())));
    let duration = point(CALL_DURATION, &at).unwrap();
    assert_eq!((duration.count, duration.sum), one(secs(seen.delays())));

    // A 400: given up on its first attempt, no time without an attempt.
    let script = Script::always(ProviderError::status(400));
    let (out, seen) = Seen::run(refused_for_good(&script)).await;
    assert!(out.is_err());
    assert_eq!(seen.events()[0].outcome, Outcome::GaveUp);
    let mut at = call("metrics::refused_for_good", "gave_up");
    at.push(kv(ERROR_TYPE, "permanent"));
    assert_eq!(counted(point(CALL_ATTEMPTS, &at)), one(1.0));
    assert_eq!(point(RETRY_DELAY, &at), None);

    // Two first-attempt successes: no event at all, and two calls recorded.
    for _ in 0..2 {
        let (out, seen) = Seen::run(succeeds_at_once()).await;
        assert_eq!((out.unwrap(), seen.events().len()), (7, 0));
    }
    let at = call("metrics::succeeds_at_once", "success");
    let duration = point(CALL_DURATION, &at).unwrap();
    assert_eq!((duration.count, duration.sum), (2, 0.0));
    assert_eq!(counted(point(CALL_ATTEMPTS, &at)), (2, 2.0));
    assert_eq!(point(RETRY_DELAY, &at), None);
}

#[retry(layer = "provider", upstream = upstream)]
async fn through(upstream: &Upstream, script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn a_wait_at_a_hold_is_a_wait_a_delay_and_its_hold_by_hand_a_pushback() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    let upstream = Upstream::new("metrics/held");
    let script = Script::new(0, ProviderError::status(503));
    let (out, seen) = Seen::run(async {
        upstream.hold_for(Duration::from_secs(2));
        through(&upstream, &script).await
    })
    .await;
    assert_eq!(out.unwrap(), 1);
    // The call says it waited, and why: a first attempt that succeeded.
    let events = seen.events();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].wait_reason, Some(WaitReason::Held));
    assert_eq!(events[0].upstream_wait, Some(Duration::from_secs(2)));
    assert_eq!(seen.holds().len(), 1);
    assert_eq!(seen.holds()[0].reason, HoldReason::ByHand);

    let name = kv(UPSTREAM_NAME, "metrics/held");
    let wait = point(
        UPSTREAM_WAIT_DURATION,
        &[name.clone(), kv(WAIT_REASON, "held")],
    )
    .unwrap();
    assert_eq!((wait.count, wait.sum), one(secs(seen.waits())));
    assert_eq!(
        point(
            UPSTREAM_WAIT_DURATION,
            &[name.clone(), kv(WAIT_REASON, "paced")]
        ),
        None
    );
    // The call: its first attempt succeeded, after 2 s with none in flight.
    let at = call("metrics::through", "success");
    assert_eq!(counted(point(RETRY_DELAY, &at)), one(2.0));
    assert_eq!(counted(point(CALL_DURATION, &at)), one(2.0));
    let by_hand = point(UPSTREAM_PUSHBACKS, &[name, kv(PUSHBACK_REASON, "by_hand")]);
    assert_eq!(by_hand.map(|p| p.sum), Some(seen.holds().len() as f64));
}

#[retry(layer = "provider", upstream = upstream)]
async fn paced(upstream: &Upstream) -> Result<(), ProviderError> {
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_paced_wait_is_recorded_as_its_event_says() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    // One request a second, declared: the second call waits for the refill.
    let upstream =
        Upstream::new("metrics/paced").with_quota(Quota::per(Duration::from_secs(1)).requests(1));
    let (out, seen) = Seen::run(async {
        paced(&upstream).await?;
        paced(&upstream).await
    })
    .await;
    out.unwrap();
    let events = seen.events();
    assert_eq!(events.len(), 1, "only the second waited: {events:?}");
    assert_eq!(events[0].wait_reason, Some(WaitReason::Paced));
    let waited = seen.waits();
    assert!(waited > Duration::ZERO);

    let name = kv(UPSTREAM_NAME, "metrics/paced");
    let wait = point(
        UPSTREAM_WAIT_DURATION,
        &[name.clone(), kv(WAIT_REASON, "paced")],
    )
    .unwrap();
    assert_eq!((wait.count, wait.sum), one(secs(waited)));
    assert_eq!(
        point(
            UPSTREAM_WAIT_DURATION,
            &[name.clone(), kv(WAIT_REASON, "held")]
        ),
        None
    );
    // Both calls succeeded at their first attempt; one had a delay.
    let at = call("metrics::paced", "success");
    assert_eq!(counted(point(CALL_ATTEMPTS, &at)), (2, 2.0));
    assert_eq!(counted(point(RETRY_DELAY, &at)), one(secs(waited)));
    // Pacing is not a pushback.
    assert_eq!(crate_pushbacks("metrics/paced"), 0.0);
}

/// Every pushback of the upstream `name`, whatever the reason.
fn crate_pushbacks(name: &'static str) -> f64 {
    nika_retry_tests::metrics::points(UPSTREAM_PUSHBACKS, &[kv(UPSTREAM_NAME, name)])
        .iter()
        .map(|(_, p)| p.sum)
        .sum()
}

#[retry(layer = "provider", upstream = upstream)]
async fn pushed_back(upstream: &Upstream, script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn a_429_and_a_503_with_a_hint_are_each_one_pushback_not_two() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    let upstream = Upstream::new("metrics/pushed-back");
    let script = Script::new(
        1,
        ProviderError::rate_limited(Some(Duration::from_millis(500))),
    );
    let (out, seen) = Seen::run(pushed_back(&upstream, &script)).await;
    assert_eq!(out.unwrap(), 2);
    let refused = seen
        .events()
        .iter()
        .filter(|e| e.category == Some(ErrorCategory::RateLimited) && e.attempt == 1)
        .count();
    assert_eq!(refused, 1);
    // The 429's hint held the upstream: one hold, not a pushback of its own.
    assert_eq!(seen.holds().len(), 1);
    assert_eq!(seen.holds()[0].reason, HoldReason::ServerHint);
    let name = kv(UPSTREAM_NAME, "metrics/pushed-back");
    let rate_limited = point(
        UPSTREAM_PUSHBACKS,
        &[name.clone(), kv(PUSHBACK_REASON, "rate_limited")],
    );
    assert_eq!(rate_limited.map(|p| p.sum), Some(refused as f64));
    assert_eq!(crate_pushbacks("metrics/pushed-back"), refused as f64);

    // A 503 with a `Retry-After`: the server said when to come back.
    let upstream = Upstream::new("metrics/unavailable");
    let hinted = ProviderError::Api {
        status: 503,
        message: String::new(),
        retry_after: Some(Duration::from_millis(300)),
    };
    let script = Script::new(1, hinted);
    let (out, seen) = Seen::run(pushed_back(&upstream, &script)).await;
    assert_eq!(out.unwrap(), 2);
    assert_eq!(seen.events()[0].category, Some(ErrorCategory::Transient));
    assert!(seen.events()[0].from_hint);
    let name = kv(UPSTREAM_NAME, "metrics/unavailable");
    let hint = point(
        UPSTREAM_PUSHBACKS,
        &[name, kv(PUSHBACK_REASON, "server_hint")],
    );
    assert_eq!(hint.map(|p| p.sum), Some(1.0));
    assert_eq!(crate_pushbacks("metrics/unavailable"), 1.0);
}

#[retry(layer = "provider", upstream = upstream)]
async fn held_too_long(upstream: &Upstream) -> Result<(), ProviderError> {
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_call_that_returns_held_without_an_attempt_says_so() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    // Longer than the provider layer's `max_retry_after` (60 s).
    let upstream = Upstream::new("metrics/held-too-long");
    upstream.hold_for(Duration::from_secs(600));
    let (out, seen) = Seen::run(held_too_long(&upstream)).await;
    assert!(matches!(out, Err(ProviderError::Held(_))), "{out:?}");
    assert_eq!(seen.events().len(), 0, "no attempt, no decision");
    let mut at = call("metrics::held_too_long", "held");
    at.push(kv(ERROR_TYPE, "held"));
    let attempts = point(CALL_ATTEMPTS, &at).unwrap();
    assert_eq!((attempts.count, attempts.sum), (1, 0.0));
    assert_eq!(counted(point(CALL_DURATION, &at)), one(0.0));
}

/// Items of a streamed response, the first ready at once.
struct Items(u32);

impl futures_core::Stream for Items {
    type Item = Result<u32, Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        self.0 = self.0.saturating_sub(1);
        Poll::Ready((self.0 > 0).then_some(Ok(self.0)))
    }
}

static OPENS: AtomicU32 = AtomicU32::new(0);

/// Its first attempt fails after 100 ms; the second sends its headers
/// after 250 ms, then the stream's first item comes at once.
#[retry(layer = "provider", backoff = "1s", jitter = 0.0)]
async fn opens() -> Result<Started<Items>, Error> {
    if OPENS.fetch_add(1, Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        return Err(Error::Busy);
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    started(Items(4)).await
}

#[tokio::test(start_paused = true)]
async fn a_streams_first_chunk_counts_from_the_start_of_its_call() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    let (out, seen) = Seen::run(opens()).await;
    let stream = out.unwrap();
    assert_eq!(seen.events().len(), 2);
    // 100 ms, the 1 s backoff, 250 ms.
    assert_eq!(stream.time_to_first_content(), Duration::from_millis(1350));
    let at = [kv(LAYER, "provider"), kv(OPERATION, "metrics::opens")];
    let first = point(TIME_TO_FIRST_CHUNK, &at).unwrap();
    assert_eq!(
        (first.count, first.sum),
        one(secs(stream.time_to_first_content()))
    );
    // The semantic conventions' buckets: 1.35 s is above 1.28, at most 2.56.
    let bucket = first.bounds.iter().position(|&b| b >= 1.35).unwrap();
    assert_eq!(
        (first.bounds[bucket - 1], first.bounds[bucket]),
        (1.28, 2.56)
    );
    assert_eq!(first.buckets[bucket], 1);
}

/// The inner service of the tower test: a 503 on its first request, then
/// the request's number back.
#[derive(Clone)]
struct Answers(Arc<AtomicU32>);

impl tower::Service<u32> for Answers {
    type Response = u32;
    type Error = ProviderError;
    type Future = std::future::Ready<Result<u32, ProviderError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ProviderError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, n: u32) -> Self::Future {
        std::future::ready(match self.0.fetch_add(1, Ordering::SeqCst) {
            0 => Err(ProviderError::status(503)),
            _ => Ok(n),
        })
    }
}

#[tokio::test(start_paused = true)]
async fn the_tower_layer_records_as_an_annotated_fn_does() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    use nika_retry::tower::{Cloned, RetryLayer};
    use tower::Layer as _;

    let config = RetryConfig::for_layer(Layer::Tool)
        .with_max_attempts(3)
        .unwrap()
        .with_initial_backoff(Duration::from_millis(700))
        .unwrap()
        .with_jitter(0.0)
        .unwrap();
    let service = RetryLayer::new(Layer::Tool)
        .config(config)
        .protocol(Cloned)
        .layer(Answers(Arc::default()));
    let (out, seen) = Seen::run(service.oneshot(5)).await;
    assert_eq!(out.unwrap(), 5);
    let events = seen.events();
    assert_eq!(events.len(), 2);
    let at = [
        kv(LAYER, "tool"),
        kv(OPERATION, "nika_retry::tower::RetryLayer"),
        kv(OUTCOME, "recovered"),
    ];
    assert_eq!(
        counted(point(CALL_ATTEMPTS, &at)),
        one(f64::from(events[1].attempt))
    );
    assert_eq!(counted(point(RETRY_DELAY, &at)), one(secs(seen.delays())));
    assert_eq!(counted(point(CALL_DURATION, &at)), one(0.7));
}

#[tokio::test(start_paused = true)]
async fn the_reqwest_middleware_records_as_an_annotated_fn_does() {
    // Before anything records: the tests share one provider.
    nika_retry_tests::metrics::install();
    use nika_retry::reqwest_middleware::Retry;
    use nika_retry_tests::fault::{Fault, FaultServer};

    let server = FaultServer::start([Fault::Status(503), Fault::ok("ok")]).await;
    let config = RetryConfig::for_layer(Layer::Task)
        .with_max_attempts(2)
        .unwrap()
        .with_jitter(0.0)
        .unwrap();
    let client = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(Retry::new(Layer::Task).config(config))
        .build();
    let (out, seen) = Seen::run(client.get(server.url("/")).send()).await;
    assert_eq!(out.unwrap().status().as_u16(), 200);
    let events = seen.events();
    assert_eq!(events.len(), 2);
    let at = [
        kv(LAYER, "task"),
        kv(OPERATION, "nika_retry::reqwest_middleware::Retry"),
        kv(OUTCOME, "recovered"),
    ];
    assert_eq!(counted(point(CALL_ATTEMPTS, &at)), one(2.0));
    assert_eq!(counted(point(RETRY_DELAY, &at)), one(secs(seen.delays())));
    let duration = point(CALL_DURATION, &at).unwrap();
    assert_eq!(duration.count, 1);
    assert!(duration.sum >= secs(seen.delays()), "{duration:?}");
}
