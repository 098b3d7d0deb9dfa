//! A `connect` limit that cannot take effect is said, once per fn, at run
//! time. Alone in its binary: the warning is once per process, tracing caches
//! callsite interest process-wide, and no client from
//! `nika_retry::http::client_builder` may connect here (its pooled
//! connections would explain an attempt that connects nowhere).

use nika_retry::{retry, timeout};
use nika_retry_tests::Error;
use nika_retry_tests::logs::{Clock, logged};

/// A connect limit and nothing that reads it (a plain client would be the same).
#[retry(layer = "http", attempts = 1)]
#[timeout(connect = "1s")]
async fn connects_nowhere() -> Result<(), Error> {
    Ok(())
}

/// A connect limit that its connection set-up reads.
#[retry(layer = "http", attempts = 1)]
#[timeout(connect = "1s")]
async fn connects_through_the_boundary() -> Result<(), Error> {
    nika_retry::connect(async {}).await?;
    Ok(())
}

/// The same for `#[timeout]` alone.
#[timeout(layer = "http", connect = "2s")]
async fn alone_connects_nowhere() -> Result<(), Error> {
    Ok(())
}

#[test]
fn a_connect_limit_never_reached_is_reported_once_per_fn() {
    let ((), text) = logged(tracing::Level::WARN, Clock::Real, async {
        for _ in 0..3 {
            connects_nowhere().await.unwrap();
            connects_through_the_boundary().await.unwrap();
            alone_connects_nowhere().await.unwrap();
        }
    });
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("WARN")
            && lines[0].contains(
                "connect_warning::connects_nowhere: its connect limit of 1s was never used"
            )
            && lines[0].contains("nika_retry::http::client_builder()"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("connect_warning::alone_connects_nowhere: its connect limit of 2s"),
        "{}",
        lines[1]
    );
}
