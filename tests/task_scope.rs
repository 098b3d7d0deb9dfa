//! The layer-aware runtime: the task scope, the cumulative budget and the
//! events, on a paused clock. (The token bucket has `token_bucket.rs`.)

use std::sync::Arc;
use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::{Outcome, observe};
use nika_retry::task::{TaskPolicy, carry, scope};
use nika_retry::{ErrorCategory, Layer, RetryConfig, retry};
use nika_retry_tests::{EventLog, ProviderError, Script};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A task's `retry:` block with exact delays.
fn task_retry(attempts: u32, delay_ms: u64) -> RetryConfig {
    let yaml = format!(
        "{{ max_attempts: {attempts}, delay_ms: {delay_ms}, backoff: constant, jitter: 0.0 }}"
    );
    serde_norway::from_str(&yaml).unwrap()
}

#[retry(layer = "tool")]
async fn tool(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "http", jitter = 0.0)]
async fn http(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "provider", jitter = 0.0)]
async fn provider(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "provider", jitter = 0.0)]
async fn provider_over_http(script: &Script) -> Result<u32, ProviderError> {
    http(script).await
}

#[retry(layer = "task", attempts = 3, jitter = 0.0)]
async fn task_over_provider(script: &Script) -> Result<u32, ProviderError> {
    provider_over_http(script).await
}

#[tokio::test(start_paused = true)]
async fn a_tool_fn_is_retried_only_inside_a_scope_that_opts_in() {
    let script = Script::always(ProviderError::status(503));
    assert!(tool(&script).await.is_err());
    assert_eq!(script.attempts(), 1);

    let script = Script::always(ProviderError::status(503));
    let empty = TaskPolicy::new();
    assert!(scope(empty, tool(&script)).await.is_err());
    assert_eq!(
        script.attempts(),
        1,
        "a scope without retry: does not opt in"
    );

    let script = Script::new(2, ProviderError::status(503));
    let start = Instant::now();
    let policy = TaskPolicy::new().with_retry(task_retry(3, 200));
    assert_eq!(scope(policy, tool(&script)).await, Ok(3));
    assert_eq!(start.elapsed(), ms(400));
}

#[tokio::test(start_paused = true)]
async fn the_task_retry_block_overrides_the_provider_layer_but_not_http() {
    let script = Script::always(ProviderError::status(500));
    let start = Instant::now();
    let policy = TaskPolicy::new()
        .with_retry(task_retry(5, 100))
        .with_budget(100);
    assert!(scope(policy.clone(), provider(&script)).await.is_err());
    assert_eq!((script.attempts(), start.elapsed()), (5, ms(400)));

    let script = Script::always(ProviderError::status(503));
    let start = Instant::now();
    assert!(scope(policy, http(&script)).await.is_err());
    // The http layer keeps its own 3 attempts, 250 ms then 1 s.
    assert_eq!((script.attempts(), start.elapsed()), (3, ms(1250)));
}

#[tokio::test(start_paused = true)]
async fn scopes_nest_and_the_innermost_wins() {
    let outer = TaskPolicy::new().with_retry(task_retry(2, 10));
    let inner = TaskPolicy::new().with_retry(task_retry(4, 10));
    let script = Script::always(ProviderError::status(503));
    let out = scope(outer, async {
        let first = scope(inner, tool(&script)).await;
        let after_inner = script.attempts();
        let second = tool(&script).await;
        Ok::<_, ProviderError>((
            first.is_err(),
            after_inner,
            second.is_err(),
            script.attempts(),
        ))
    })
    .await;
    assert_eq!(out, Ok((true, 4, true, 6)));
}

#[tokio::test(start_paused = true)]
async fn nested_layers_share_the_budget_of_the_outermost_call() {
    // Without a scope: the default budget of 9 allows exactly 3 × 3.
    let script = Script::always(ProviderError::status(503));
    assert!(provider_over_http(&script).await.is_err());
    assert_eq!(script.attempts(), 9);
    // and one more level cannot multiply it: 9, not 3 × 3 × 3.
    let script = Script::always(ProviderError::status(503));
    assert!(task_over_provider(&script).await.is_err());
    assert_eq!(script.attempts(), 9);

    // A budget of 4 stops the nested loops after 4 attempts reach the server.
    let log = Arc::new(EventLog::default());
    let script = Script::always(ProviderError::status(503));
    let policy = TaskPolicy::new().with_budget(4);
    let result = observe(log.clone(), scope(policy, provider_over_http(&script))).await;
    assert!(result.is_err());
    assert_eq!(script.attempts(), 4);
    let events = log.take();
    let exhausted: Vec<_> = events
        .iter()
        .filter(|e| e.outcome == Outcome::BudgetExhausted)
        .collect();
    assert!(!exhausted.is_empty(), "{events:#?}");
    assert_eq!(exhausted[0].reason, Some(GiveUp::BudgetExhausted));
    assert_eq!(exhausted[0].total_attempts, 4);
    assert!(events.iter().all(|e| e.total_attempts <= 4));
}

#[tokio::test(start_paused = true)]
async fn events_say_which_layer_retried_how_often_how_long_and_why_it_stopped() {
    let log = Arc::new(EventLog::default());
    let script = Script::new(1, ProviderError::rate_limited(Some(ms(7000))));
    assert_eq!(observe(log.clone(), provider(&script)).await, Ok(2));
    let events = log.take();
    assert_eq!(events.len(), 2, "{events:#?}");
    let (retrying, recovered) = (&events[0], &events[1]);
    assert_eq!(retrying.layer, Layer::Provider);
    assert!(
        retrying.operation.ends_with("task_scope::provider"),
        "{}",
        retrying.operation
    );
    assert_eq!((retrying.attempt, retrying.max_attempts), (1, 3));
    assert_eq!(retrying.category, Some(ErrorCategory::RateLimited));
    assert_eq!(
        (retrying.delay, retrying.from_hint, retrying.backoff),
        (Some(ms(7000)), true, None)
    );
    assert_eq!(
        (recovered.attempt, recovered.outcome, recovered.delay),
        (2, Outcome::Recovered, None)
    );
    assert_eq!(recovered.since_first_failure, ms(7000));
    assert_eq!(
        retrying.to_string(),
        "[provider] task_scope::provider attempt 1/3 rate_limited: retrying in 7s (server hint)"
    );

    assert_eq!(retrying.self_type, None, "a free fn has no impl type");
    assert_eq!(retrying.fn_name(), "provider");

    let script = Script::always(ProviderError::status(401));
    assert!(observe(log.clone(), http(&script)).await.is_err());
    let events = log.take();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (
            events[0].layer,
            events[0].category,
            events[0].outcome,
            events[0].reason
        ),
        (
            Layer::Http,
            Some(ErrorCategory::Auth),
            Outcome::GaveUp,
            Some(GiveUp::NotRetryable)
        )
    );

    let script = Script::always(ProviderError::status(503));
    assert!(observe(log.clone(), http(&script)).await.is_err());
    let outcomes: Vec<_> = log
        .take()
        .iter()
        .map(|e| (e.attempt, e.outcome, e.delay))
        .collect();
    assert_eq!(
        outcomes,
        [
            (1, Outcome::Retrying, Some(ms(250))),
            (2, Outcome::Retrying, Some(ms(1000))),
            (3, Outcome::GaveUp, None)
        ]
    );
}

/// `delay_ms: 200, backoff: constant` with the default jitter of 0.5 waits
/// 100–200 ms, and each event shows the backoff the delay was drawn from.
#[tokio::test(start_paused = true)]
async fn events_show_the_backoff_that_jitter_drew_each_delay_from() {
    let log = Arc::new(EventLog::default());
    let policy: TaskPolicy =
        serde_norway::from_str("retry: { max_attempts: 3, delay_ms: 200, backoff: constant }")
            .unwrap();
    let script = Script::always(ProviderError::status(503));
    assert!(
        observe(log.clone(), scope(policy, tool(&script)))
            .await
            .is_err()
    );
    let retries: Vec<_> = log
        .take()
        .into_iter()
        .filter(|e| e.outcome == Outcome::Retrying)
        .collect();
    assert_eq!(retries.len(), 2);
    for e in retries {
        let delay = e.delay.unwrap();
        assert_eq!((e.backoff, e.from_hint), (Some(ms(200)), false));
        assert!((ms(100)..=ms(200)).contains(&delay), "{delay:?}");
        if delay != ms(200) {
            assert!(e.to_string().ends_with("(jittered from 200ms)"), "{e}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn observers_nest_and_carry_follows_a_spawned_task() {
    let outer = Arc::new(EventLog::default());
    let inner = Arc::new(EventLog::default());
    let script = Arc::new(Script::always(ProviderError::status(400)));
    let s = script.clone();
    let work = async move {
        let spawned = tokio::spawn(carry(async move { http(&s).await }));
        spawned.await.unwrap()
    };
    assert!(
        observe(outer.clone(), observe(inner.clone(), work))
            .await
            .is_err()
    );
    assert_eq!(outer.take().len(), 1);
    assert_eq!(inner.take().len(), 1);

    // Without carry, a spawned task starts without observers.
    let s = script.clone();
    let work = async move { tokio::spawn(async move { http(&s).await }).await.unwrap() };
    assert!(observe(outer.clone(), work).await.is_err());
    assert!(outer.take().is_empty());
}

#[retry(layer = "http")]
async fn http_panics() -> Result<u32, ProviderError> {
    panic!("a bug in the transport");
}

#[retry(layer = "provider")]
async fn provider_over_panicking_http() -> Result<u32, ProviderError> {
    http_panics().await
}

#[test]
fn a_panic_inside_nested_attempts_leaves_no_context_behind() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let log = Arc::new(EventLog::default());
    let policy = TaskPolicy::new()
        .with_budget(4)
        .with_retry(task_retry(3, 10));
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(observe(
            log.clone(),
            scope(policy, provider_over_panicking_http()),
        ))
    }));
    assert!(panicked.is_err());
    // The task policy, the observers and the budget were all restored on this thread.
    assert_eq!(nika_retry::task::current(), None);
    let script = Script::always(ProviderError::status(503));
    rt.block_on(async { assert!(provider_over_http(&script).await.is_err()) });
    assert_eq!(
        script.attempts(),
        9,
        "a fresh outermost call with the default budget"
    );
    assert!(
        log.events().is_empty(),
        "no observer left installed, and the panic was not retried"
    );
}
