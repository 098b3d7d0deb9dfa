//! `nika_retry::events::EventLog`: the ready-made
//! observer keeps every decision in order, shared by its clones and by the
//! tasks a scope spawns, bounded, and prints one line per event.

use std::sync::Arc;
use std::time::Duration;

use nika_retry::events::{EventLog, Outcome, RetryObserver, observe};
use nika_retry::task::carry;
use nika_retry::{Layer, retry};
use nika_retry_tests::{ProviderError, Script};

struct Provider;

impl Provider {
    #[retry(layer = "provider", jitter = 0.0)]
    async fn complete(&self, script: &Script) -> Result<u32, ProviderError> {
        script.attempt()
    }
}

#[retry(layer = "http", backoff = "10ms", jitter = 0.0)]
async fn post(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn a_run_prints_one_line_per_event_as_the_demo_does() {
    let log = EventLog::new();
    // A 429 with a 1.5 s hint, then a success; then a 401, not retried.
    let hinted = Script::new(
        1,
        ProviderError::rate_limited(Some(Duration::from_millis(1500))),
    );
    observe(log.clone().into(), Provider.complete(&hinted))
        .await
        .unwrap();
    let denied = Script::always(ProviderError::status(401));
    observe(log.clone().into(), Provider.complete(&denied))
        .await
        .unwrap_err();

    let lines: Vec<String> = log.to_string().lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        [
            "    0ms  provider Provider::complete   1/3  rate_limited 1.50s (server hint)    retrying",
            "  1.50s  provider Provider::complete   2/3  rate_limited                        recovered",
            "  1.50s  provider Provider::complete   1/3  auth                                gave up: not retryable",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clones_share_one_log_across_threads_and_spawned_tasks() {
    let log = EventLog::new();
    let observer: Arc<dyn RetryObserver> = log.clone().into();
    observe(observer, async {
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                tokio::spawn(carry(async {
                    post(&Script::new(2, ProviderError::status(503))).await
                }))
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.unwrap(), Ok(3));
        }
    })
    .await;
    let events = log.events();
    assert_eq!(events.len(), 8 * 3, "two retries and a recovery per call");
    // Every call's two retries and its recovery, none lost to a race.
    for outcome in [Outcome::Retrying, Outcome::Recovered] {
        let n = events.iter().filter(|e| e.outcome == outcome).count();
        assert_eq!(n, if outcome == Outcome::Retrying { 16 } else { 8 });
    }
    assert!(events.iter().all(|e| e.layer == Layer::Http));
    let mut attempts_seen = events.iter().map(|e| e.attempt).collect::<Vec<_>>();
    attempts_seen.sort_unstable();
    assert_eq!(attempts_seen, [[1; 8], [2; 8], [3; 8]].concat());
}

#[tokio::test(start_paused = true)]
async fn a_full_log_keeps_the_last_events_and_counts_the_dropped() {
    let log = EventLog::with_capacity(4);
    for _ in 0..3 {
        // Two retries, then a give-up: three events per call.
        let script = Script::always(ProviderError::status(503));
        observe(log.clone().into(), post(&script))
            .await
            .unwrap_err();
    }
    assert_eq!((log.len(), log.dropped(), log.capacity()), (4, 5, 4));
    let kept: Vec<(u32, Outcome)> = log
        .events()
        .iter()
        .map(|e| (e.attempt, e.outcome))
        .collect();
    assert_eq!(
        kept,
        [
            (3, Outcome::GaveUp),
            (1, Outcome::Retrying),
            (2, Outcome::Retrying),
            (3, Outcome::GaveUp),
        ]
    );
    let text = log.to_string();
    assert_eq!(text.lines().count(), 5);
    assert!(text.starts_with("(5 earlier entries dropped: the log keeps the last 4)\n"));
    // Taking empties it.
    assert_eq!(log.take().len(), 4);
    assert!(log.is_empty());
}
