//! The layer defaults (docs/layers.md), end to end through `#[retry]`,
//! on a paused clock.

use std::time::Duration;

use nika_retry::{RetryConfig, retry};
use nika_retry_tests::{ProviderError, Script};
use tokio::time::Instant;

#[retry(layer = "http")]
async fn http(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "provider")]
async fn provider(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "tool")]
async fn tool(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "task")]
async fn task(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Asserts `elapsed` lies in `[low, high]`: the schedule with 50 % jitter.
#[track_caller]
fn assert_between(elapsed: Duration, low: Duration, high: Duration) {
    assert!(
        low <= elapsed && elapsed <= high,
        "{elapsed:?} not in [{low:?}, {high:?}]"
    );
}

#[tokio::test(start_paused = true)]
async fn http_retries_transient_three_attempts_250ms_then_1s() {
    let script = Script::always(ProviderError::status(503));
    let start = Instant::now();
    assert_eq!(http(&script).await, Err(ProviderError::status(503)));
    assert_eq!(script.attempts(), 3);
    // 250 ms + 1 s, each jittered down by at most half.
    assert_between(start.elapsed(), ms(625), ms(1250));
}

#[tokio::test(start_paused = true)]
async fn http_recovers_on_the_second_attempt() {
    let script = Script::new(1, ProviderError::status(502));
    let start = Instant::now();
    assert_eq!(http(&script).await, Ok(2));
    assert_between(start.elapsed(), ms(125), ms(250));
}

#[tokio::test(start_paused = true)]
async fn http_leaves_429_to_the_provider_layer() {
    let script = Script::always(ProviderError::rate_limited(None));
    let start = Instant::now();
    assert!(http(&script).await.is_err());
    assert_eq!(script.attempts(), 1);
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn provider_retries_5xx_three_attempts_1s_then_4s() {
    let script = Script::always(ProviderError::status(500));
    let start = Instant::now();
    assert!(provider(&script).await.is_err());
    assert_eq!(script.attempts(), 3);
    assert_between(start.elapsed(), ms(2500), ms(5000));
}

#[tokio::test(start_paused = true)]
async fn provider_waits_exactly_the_rate_limit_hint() {
    let script = Script::new(2, ProviderError::rate_limited(Some(ms(7000))));
    let start = Instant::now();
    assert_eq!(provider(&script).await, Ok(3));
    // The hint replaces the backoff, unjittered, and still uses up an attempt.
    assert_eq!(start.elapsed(), ms(14_000));
}

#[tokio::test(start_paused = true)]
async fn provider_gives_up_at_once_on_a_hint_above_60s() {
    let script = Script::always(ProviderError::rate_limited(Some(ms(61_000))));
    let start = Instant::now();
    assert!(provider(&script).await.is_err());
    assert_eq!((script.attempts(), start.elapsed()), (1, Duration::ZERO));
}

#[tokio::test(start_paused = true)]
async fn provider_never_retries_auth_not_found_or_permanent() {
    for status in [401, 403, 404, 410, 400, 422] {
        let script = Script::always(ProviderError::status(status));
        let start = Instant::now();
        assert_eq!(provider(&script).await, Err(ProviderError::status(status)));
        assert_eq!(
            (script.attempts(), start.elapsed()),
            (1, Duration::ZERO),
            "{status}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn tool_and_task_run_one_attempt_by_default() {
    let script = Script::always(ProviderError::status(503));
    assert!(tool(&script).await.is_err());
    assert_eq!(script.attempts(), 1);
    let script = Script::always(ProviderError::status(503));
    assert!(task(&script).await.is_err());
    assert_eq!(script.attempts(), 1);
}

#[retry(
    layer = "http",
    attempts = 4,
    backoff = "100ms",
    max_backoff = "300ms",
    multiplier = 2,
    jitter = 0.0
)]
async fn http_literal(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn literal_keys_override_the_layer_defaults_exactly() {
    let script = Script::always(ProviderError::status(503));
    let start = Instant::now();
    assert!(http_literal(&script).await.is_err());
    assert_eq!(script.attempts(), 4);
    // 100 ms, 200 ms, then capped at 300 ms: no jitter, so exact.
    assert_eq!(start.elapsed(), ms(600));
}

#[retry(layer = "provider", on = [transient], jitter = 0.0)]
async fn provider_transient_only(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn on_narrows_what_is_retried() {
    let script = Script::always(ProviderError::rate_limited(Some(ms(10))));
    assert!(provider_transient_only(&script).await.is_err());
    assert_eq!(script.attempts(), 1);
    let script = Script::new(1, ProviderError::status(503));
    let start = Instant::now();
    assert_eq!(provider_transient_only(&script).await, Ok(2));
    assert_eq!(start.elapsed(), ms(1000));
}

struct Client {
    retry: Option<RetryConfig>,
}

impl Client {
    #[retry(layer = "provider", attempts = 2, jitter = 0.0, config = self.retry.clone())]
    async fn call(&self, script: &Script) -> Result<u32, ProviderError> {
        script.attempt()
    }
}

#[tokio::test(start_paused = true)]
async fn config_expr_replaces_the_literals_and_none_keeps_them() {
    let runtime = RetryConfig::for_layer(nika_retry::Layer::Provider)
        .with_max_attempts(5)
        .and_then(|c| c.with_jitter(0.0))
        .and_then(|c| c.with_initial_backoff(ms(50)))
        .and_then(|c| c.with_max_backoff(ms(50)))
        .unwrap();
    let client = Client {
        retry: Some(runtime),
    };
    let script = Script::always(ProviderError::status(503));
    let start = Instant::now();
    assert!(client.call(&script).await.is_err());
    assert_eq!((script.attempts(), start.elapsed()), (5, ms(200)));

    let client = Client { retry: None };
    let script = Script::always(ProviderError::status(503));
    let start = Instant::now();
    assert!(client.call(&script).await.is_err());
    assert_eq!((script.attempts(), start.elapsed()), (2, ms(1000)));
}

struct CountedClient {
    retry: RetryConfig,
    evaluated: std::sync::atomic::AtomicU32,
}

impl CountedClient {
    fn config(&self) -> Option<RetryConfig> {
        self.evaluated
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(self.retry.clone())
    }

    #[retry(layer = "provider", config = self.config())]
    async fn call(&self, script: &Script) -> Result<u32, ProviderError> {
        script.attempt()
    }
}

#[tokio::test(start_paused = true)]
async fn config_expr_is_evaluated_after_each_failed_attempt_only() {
    let client = CountedClient {
        retry: RetryConfig::for_layer(nika_retry::Layer::Provider)
            .with_max_attempts(5)
            .unwrap(),
        evaluated: Default::default(),
    };
    let log = std::sync::Arc::new(nika_retry_tests::EventLog::default());
    let script = Script::new(2, ProviderError::status(503));
    let out = nika_retry::events::observe(log.clone(), client.call(&script)).await;
    assert_eq!(out, Ok(3));
    // Two failures, two evaluations; the recovery (with someone listening) reuses them.
    let evaluated = client.evaluated.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(evaluated, 2);
    let max_attempts: Vec<_> = log.events().iter().map(|e| e.max_attempts).collect();
    assert_eq!(max_attempts, [5, 5, 5]);
}

#[tokio::test(start_paused = true)]
async fn the_same_thread_seed_gives_the_same_schedule() {
    async fn run() -> Duration {
        nika_retry::engine::seed_thread_jitter(99);
        let script = Script::always(ProviderError::status(503));
        let start = Instant::now();
        let _ = provider(&script).await;
        start.elapsed()
    }
    let first = run().await;
    assert_eq!(first, run().await);
    assert_between(first, ms(2500), ms(5000));
}
