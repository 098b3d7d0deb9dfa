//! The level of each retry event in the logs: a give-up on the first attempt
//! is DEBUG (not retryable, a one-attempt layer, the 429 that http leaves to
//! the provider); a retry and a give-up after retries are WARN. Alone in its
//! binary: tracing caches callsite interest process-wide.

use nika_retry::retry;
use nika_retry_tests::logs::{Clock, logged};
use nika_retry_tests::{ProviderError, Script};

#[retry(layer = "http", jitter = 0.0)]
async fn http(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[retry(layer = "tool")]
async fn tool(script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

/// `(level, outcome)` of each line logged while `work` runs, at `max` and below.
fn levels<F: std::future::Future>(max: tracing::Level, work: F) -> Vec<(String, String)> {
    let (_, text) = logged(max, Clock::Paused, work);
    text.lines()
        .map(|line| {
            let level = ["DEBUG", "WARN"]
                .into_iter()
                .find(|l| line.contains(l))
                .unwrap_or("?");
            let outcome = line
                .split("outcome=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or("?");
            (level.to_owned(), outcome.to_owned())
        })
        .collect()
}

fn lines(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(l, o)| (l.to_string(), o.to_string()))
        .collect()
}

#[test]
fn first_attempt_give_ups_are_debug_and_retries_are_warn() {
    let run = |max| {
        levels(max, async {
            // A one-attempt layer.
            assert!(
                tool(&Script::always(ProviderError::status(503)))
                    .await
                    .is_err()
            );
            // The 429 that http hands to the provider.
            let limited = ProviderError::rate_limited(None);
            assert!(http(&Script::always(limited)).await.is_err());
            // Not retryable.
            assert!(
                http(&Script::always(ProviderError::status(401)))
                    .await
                    .is_err()
            );
            // Retries, then a give-up after them.
            assert!(
                http(&Script::always(ProviderError::status(503)))
                    .await
                    .is_err()
            );
            // A retry, then a recovery.
            assert_eq!(
                http(&Script::new(1, ProviderError::status(502))).await,
                Ok(2)
            );
        })
    };
    assert_eq!(
        run(tracing::Level::DEBUG),
        lines(&[
            ("DEBUG", "gave_up"),
            ("DEBUG", "gave_up"),
            ("DEBUG", "gave_up"),
            ("WARN", "retrying"),
            ("WARN", "retrying"),
            ("WARN", "gave_up"),
            ("WARN", "retrying"),
            ("DEBUG", "recovered"),
        ])
    );
    // A service logging at WARN sees only the retries and what followed them.
    assert_eq!(
        run(tracing::Level::WARN),
        lines(&[
            ("WARN", "retrying"),
            ("WARN", "retrying"),
            ("WARN", "gave_up"),
            ("WARN", "retrying"),
        ])
    );
}

#[test]
fn a_hold_is_warn_and_its_extension_debug() {
    let run = |max| {
        let (_, text) = logged(max, Clock::Paused, async {
            let upstream = nika_retry::upstream::Upstream::new("levels/model");
            upstream.hold_for(std::time::Duration::from_secs(10));
            upstream.hold_for(std::time::Duration::from_secs(20));
            upstream.hold_for(std::time::Duration::from_secs(5)); // shorter: nothing
        });
        text.lines()
            .filter(|line| line.contains("levels/model"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let debug = run(tracing::Level::DEBUG);
    assert_eq!(debug.len(), 2, "{debug:#?}");
    assert!(
        debug[0].contains("WARN") && debug[0].contains("held for 10s"),
        "{debug:#?}"
    );
    assert!(
        debug[1].contains("DEBUG") && debug[1].contains("hold extended for 20s"),
        "{debug:#?}"
    );
    let warn = run(tracing::Level::WARN);
    assert_eq!(warn.len(), 1, "the extension is below WARN: {warn:#?}");
}
