//! A tool or task fn tried once because its task did not opt in is reported
//! as such: `GiveUp::NotOptedIn` in the event, "not
//! opted in by the task" in its log line, never "attempts exhausted". Alone
//! in its binary: tracing caches callsite interest process-wide.

use std::future::Future;
use std::sync::Arc;

use nika_retry::engine::GiveUp;
use nika_retry::events::{Outcome, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Layer, RetryConfig, retry};
use nika_retry_tests::logs::{Clock, logged};
use nika_retry_tests::{EventLog, ProviderError, Script};

#[retry(layer = "tool")]
async fn tool(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "task")]
async fn task(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

/// A task fn that asks for two attempts itself.
#[retry(layer = "task", attempts = 2, backoff = "1ms")]
async fn task_twice(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

fn busy() -> Script {
    Script::always(ProviderError::status(503))
}

fn opted_in(attempts: u32) -> TaskPolicy {
    let retry = RetryConfig::for_layer(Layer::Tool)
        .with_max_attempts(attempts)
        .unwrap();
    TaskPolicy::new().with_retry(retry)
}

/// `(layer, attempt, outcome, reason)` of one event.
type Seen = (Layer, u32, Outcome, Option<GiveUp>);

/// Runs `work` under a DEBUG subscriber and an event log; the log lines and
/// what each event says.
fn run<F: Future>(work: F) -> (String, Vec<Seen>) {
    let log = Arc::new(EventLog::default());
    let (_, text) = logged(
        tracing::Level::DEBUG,
        Clock::Paused,
        observe(log.clone(), work),
    );
    let events = log
        .events()
        .iter()
        .map(|e| (e.layer, e.attempt, e.outcome, e.reason))
        .collect();
    (text, events)
}

#[test]
fn a_tool_or_task_without_the_tasks_retry_is_not_opted_in() {
    let (text, events) = run(async {
        tool(&busy()).await.unwrap_err();
        // A task scope without `retry:` does not opt in either.
        scope(TaskPolicy::new(), tool(&busy())).await.unwrap_err();
        task(&busy()).await.unwrap_err();
    });
    let not_opted_in = Some(GiveUp::NotOptedIn);
    assert_eq!(
        events,
        [
            (Layer::Tool, 1, Outcome::GaveUp, not_opted_in),
            (Layer::Tool, 1, Outcome::GaveUp, not_opted_in),
            (Layer::Task, 1, Outcome::GaveUp, not_opted_in),
        ]
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for line in lines {
        assert!(line.contains("DEBUG"), "{line}");
        assert!(
            line.contains("gave_up (not opted in by the task)"),
            "{line}"
        );
        assert!(!line.contains("attempts exhausted"), "{line}");
    }
}

#[test]
fn an_opted_in_or_self_set_loop_is_exhausted_and_a_401_is_not_retryable() {
    let (text, events) = run(async {
        // The task opts in with 2 attempts, or with 1.
        scope(opted_in(2), tool(&busy())).await.unwrap_err();
        scope(opted_in(1), tool(&busy())).await.unwrap_err();
        // A task fn of two attempts of its own.
        task_twice(&busy()).await.unwrap_err();
        // Never retryable, opted in or not.
        let denied = Script::always(ProviderError::status(401));
        tool(&denied).await.unwrap_err();
    });
    let exhausted = Some(GiveUp::AttemptsExhausted);
    assert_eq!(
        events,
        [
            (Layer::Tool, 1, Outcome::Retrying, None),
            (Layer::Tool, 2, Outcome::GaveUp, exhausted),
            (Layer::Tool, 1, Outcome::GaveUp, exhausted),
            (Layer::Task, 1, Outcome::Retrying, None),
            (Layer::Task, 2, Outcome::GaveUp, exhausted),
            (Layer::Tool, 1, Outcome::GaveUp, Some(GiveUp::NotRetryable)),
        ]
    );
    assert!(!text.contains("not opted in"), "{text}");
    assert_eq!(text.matches("(attempts exhausted)").count(), 3, "{text}");
}
