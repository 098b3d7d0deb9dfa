//! Stratification (docs/layers.md): a retry loop started inside
//! an attempt of a loop of the same or a lower layer reaches the observers
//! in force as a `LayerViolation`, each time; the normal shapes and
//! `#[timeout]` alone never do. (The `tracing` warning, once per pair, is
//! in `stratification_log.rs`, alone in its binary.)

use std::sync::Arc;

use nika_retry::events::{EventLog, LayerViolation, RetryObserver, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Layer, RetryConfig, retry, timeout};
use nika_retry_tests::Error;

type Res = Result<u32, Error>;

// One fn per layer, each of which succeeds at once.

#[retry(layer = "http")]
async fn http() -> Res {
    Ok(1)
}

#[retry(layer = "provider")]
async fn provider() -> Res {
    Ok(1)
}

#[retry(layer = "tool")]
async fn tool() -> Res {
    Ok(1)
}

#[retry(layer = "task")]
async fn task() -> Res {
    Ok(1)
}

/// `#[timeout]` alone: no loop.
#[timeout(layer = "provider", attempt = "5s")]
async fn bounded_provider() -> Res {
    Ok(1)
}

/// Calls the fn of `inner`'s layer from inside an attempt of `outer`'s.
async fn call(layer: Layer) -> Res {
    match layer {
        Layer::Http => http().await,
        Layer::Provider => provider().await,
        Layer::Tool => tool().await,
        _ => task().await,
    }
}

#[retry(layer = "http")]
async fn in_http(inner: Layer) -> Res {
    call(inner).await
}

#[retry(layer = "provider")]
async fn in_provider(inner: Layer) -> Res {
    call(inner).await
}

#[retry(layer = "tool")]
async fn in_tool(inner: Layer) -> Res {
    call(inner).await
}

#[retry(layer = "task")]
async fn in_task(inner: Layer) -> Res {
    call(inner).await
}

async fn nest(outer: Layer, inner: Layer) -> Res {
    match outer {
        Layer::Http => in_http(inner).await,
        Layer::Provider => in_provider(inner).await,
        Layer::Tool => in_tool(inner).await,
        _ => in_task(inner).await,
    }
}

fn name(layer: Layer) -> &'static str {
    match layer {
        Layer::Http => "stratification::http",
        Layer::Provider => "stratification::provider",
        Layer::Tool => "stratification::tool",
        _ => "stratification::task",
    }
}

fn outer_name(layer: Layer) -> &'static str {
    match layer {
        Layer::Http => "stratification::in_http",
        Layer::Provider => "stratification::in_provider",
        Layer::Tool => "stratification::in_tool",
        _ => "stratification::in_task",
    }
}

fn violation(outer: Layer, inner: Layer) -> (Layer, &'static str, Layer, &'static str) {
    (outer, outer_name(outer), inner, name(inner))
}

fn seen(log: &EventLog) -> Vec<(Layer, &'static str, Layer, &'static str)> {
    log.violations()
        .iter()
        .map(|v| {
            (
                v.outer_layer,
                v.outer_operation,
                v.inner_layer,
                v.inner_operation,
            )
        })
        .collect()
}

/// `(outer, inner)`: each one breaks the stratification.
const VIOLATIONS: [(Layer, Layer); 9] = [
    (Layer::Http, Layer::Http),
    (Layer::Http, Layer::Provider),
    (Layer::Http, Layer::Tool),
    (Layer::Http, Layer::Task),
    (Layer::Provider, Layer::Provider),
    (Layer::Provider, Layer::Task),
    (Layer::Tool, Layer::Tool),
    (Layer::Tool, Layer::Task),
    (Layer::Task, Layer::Task),
];

#[tokio::test]
async fn every_violating_shape_reaches_the_observer_each_time_and_every_normal_one_never() {
    for outer in Layer::ALL {
        for inner in Layer::ALL {
            let log = EventLog::new();
            for _ in 0..2 {
                let out = observe(log.clone().into(), nest(outer, inner)).await;
                assert_eq!(out.unwrap(), 1, "behaviour unchanged");
            }
            let expected = if VIOLATIONS.contains(&(outer, inner)) {
                vec![violation(outer, inner); 2]
            } else {
                vec![]
            };
            assert_eq!(seen(&log), expected, "{inner} inside {outer}");
            // Nothing else reaches the log: every call succeeded at once.
            assert!(log.events().is_empty());
        }
    }
}

#[tokio::test]
async fn the_same_shapes_in_a_task_scope_that_opts_in() {
    let retry = RetryConfig::for_layer(Layer::Task)
        .with_max_attempts(2)
        .unwrap();
    let policy = TaskPolicy::new().with_retry(retry);
    let log = EventLog::new();
    let run = async {
        nest(Layer::Tool, Layer::Tool).await?;
        nest(Layer::Task, Layer::Tool).await?;
        nest(Layer::Tool, Layer::Provider).await?;
        nest(Layer::Http, Layer::Provider).await
    };
    observe(log.clone().into(), scope(policy, run))
        .await
        .unwrap();
    assert_eq!(
        seen(&log),
        [
            violation(Layer::Tool, Layer::Tool),
            violation(Layer::Http, Layer::Provider)
        ]
    );
}

#[retry(layer = "http")]
async fn http_calling_a_bounded_provider() -> Res {
    bounded_provider().await
}

/// `#[timeout]` alone around an http loop, inside a provider loop.
#[timeout(layer = "provider", attempt = "5s")]
async fn bounded_around_http() -> Res {
    http().await
}

#[retry(layer = "provider")]
async fn provider_calling_through_a_bounded_fn() -> Res {
    bounded_around_http().await
}

#[tokio::test]
async fn timeout_alone_starts_no_loop_and_is_neither_side_of_a_violation() {
    let log = EventLog::new();
    let observer: Arc<dyn RetryObserver> = log.clone().into();
    observe(observer.clone(), http_calling_a_bounded_provider())
        .await
        .unwrap();
    observe(observer.clone(), provider_calling_through_a_bounded_fn())
        .await
        .unwrap();
    // Not even nested: a `#[timeout]`-alone fn calling loops.
    observe(observer, bounded_around_http()).await.unwrap();
    assert_eq!(seen(&log), []);
}

#[retry(layer = "http")]
async fn http_a() -> Res {
    http_b().await
}

#[retry(layer = "http")]
async fn http_b() -> Res {
    http().await
}

#[retry(layer = "http")]
async fn two_at_once() -> Res {
    let (a, b) = tokio::join!(provider(), http());
    Ok(a? + b?)
}

#[tokio::test]
async fn each_violation_names_the_loop_whose_attempt_it_started_in() {
    let log = EventLog::new();
    observe(log.clone().into(), http_a()).await.unwrap();
    observe(log.clone().into(), two_at_once()).await.unwrap();
    let http = Layer::Http;
    assert_eq!(
        seen(&log),
        [
            // Three deep: each inner loop against the one just around it,
            // reported as the poll of that one ends: the deeper first.
            (http, "stratification::http_b", http, "stratification::http"),
            (
                http,
                "stratification::http_a",
                http,
                "stratification::http_b"
            ),
            // Two started in one poll: both inside `two_at_once`, in order.
            (
                http,
                "stratification::two_at_once",
                Layer::Provider,
                "stratification::provider"
            ),
            (
                http,
                "stratification::two_at_once",
                http,
                "stratification::http"
            ),
        ]
    );
}

#[retry(layer = "http")]
async fn http_observing_its_inner_call(inner_log: EventLog) -> Res {
    observe(inner_log.clone().into(), provider()).await
}

#[tokio::test]
async fn the_observers_in_force_where_the_inner_loop_starts_get_it() {
    let (outer_log, inner_log) = (EventLog::new(), EventLog::new());
    observe(
        outer_log.clone().into(),
        http_observing_its_inner_call(inner_log.clone()),
    )
    .await
    .unwrap();
    let expected = [(
        Layer::Http,
        "stratification::http_observing_its_inner_call",
        Layer::Provider,
        "stratification::provider",
    )];
    assert_eq!(seen(&inner_log), expected);
    assert_eq!(seen(&outer_log), expected);
    // A violation with no observer around it reports to no one, and the
    // next call is not blamed for it.
    nest(Layer::Http, Layer::Provider).await.unwrap();
    let log = EventLog::new();
    observe(log.clone().into(), in_provider(Layer::Http))
        .await
        .unwrap();
    assert_eq!(seen(&log), []);
}

/// A retried inner loop inside a retried outer one: the attempts are what
/// they were (the budget bounds them), and the violation is reported once
/// per inner call, on its first poll.
#[retry(layer = "http", backoff = "1ms", jitter = 0.0)]
async fn flaky_http(tries: &std::sync::atomic::AtomicU32) -> Res {
    match tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
        0 | 1 => Err(Error::Busy),
        n => Ok(n),
    }
}

#[retry(layer = "http", backoff = "1ms", jitter = 0.0)]
async fn http_around_flaky(tries: &std::sync::atomic::AtomicU32) -> Res {
    flaky_http(tries).await
}

#[tokio::test(start_paused = true)]
async fn a_violation_changes_no_behaviour_and_is_reported_once_per_inner_call() {
    let log = EventLog::new();
    let tries = std::sync::atomic::AtomicU32::new(0);
    let out = observe(log.clone().into(), http_around_flaky(&tries)).await;
    assert_eq!(out.unwrap(), 2, "the inner loop's own 3 attempts");
    assert_eq!(log.violations().len(), 1);
    let retried: Vec<_> = log.events().iter().map(|e| e.operation).collect();
    assert_eq!(
        retried, ["stratification::flaky_http"; 3],
        "two retries and a recovery, all the inner loop's"
    );
    let violation: LayerViolation = log.violations()[0];
    assert_eq!(
        violation.to_string(),
        "http loop stratification::flaky_http inside an attempt of http loop stratification::http_around_flaky"
    );
}
