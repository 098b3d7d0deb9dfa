//! The four time limits, one meaning each (DESIGN.md "`#[timeout]`"): a
//! tool fn returning `io::Error`, `#[timeout]` alone, `read` as an
//! inactivity limit and `connect` through a real reqwest client.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Boundary, Classify, ErrorCategory, Layer, RetryConfig, TimeoutError};
use nika_retry::{retry, timeout};
use tokio::time::{Instant, sleep};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A task's `retry:` block with 3 attempts, 100 ms apart.
fn three_attempts() -> RetryConfig {
    serde_norway::from_str("{ max_attempts: 3, delay_ms: 100, backoff: constant, jitter: 0.0 }")
        .unwrap()
}

/// The `TimeoutError` an `io::Error` holds.
fn held(err: &io::Error) -> Option<&TimeoutError> {
    err.get_ref()?.downcast_ref()
}

/// A tool as tools are written: a shell-like step that returns `io::Error`.
struct Shell {
    runs: AtomicU32,
    timeout: Duration,
}

impl Shell {
    #[retry(layer = "tool")]
    #[timeout(attempt = self.timeout)]
    async fn run(&self, stall: Duration) -> Result<u32, io::Error> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        sleep(stall).await;
        Ok(7)
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_fn_returning_io_error_takes_timeout_and_the_task_scope() {
    let shell = Shell {
        runs: AtomicU32::new(0),
        timeout: ms(500),
    };
    // Alone: one attempt, cut at 500 ms, an io::Error holding the timeout.
    let start = Instant::now();
    let err = shell.run(ms(10_000)).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(
        held(&err),
        Some(&TimeoutError::new(Boundary::Attempt, ms(500), Layer::Tool))
    );
    assert_eq!(err.category(), ErrorCategory::Transient);
    assert_eq!(
        (shell.runs.load(Ordering::SeqCst), start.elapsed()),
        (1, ms(500))
    );

    // Under a task that opts in: retried, 3 attempts in all.
    shell.runs.store(0, Ordering::SeqCst);
    let policy = TaskPolicy::new().with_retry(three_attempts());
    let start = Instant::now();
    let err = scope(policy, shell.run(ms(10_000))).await.unwrap_err();
    assert_eq!(
        held(&err).map(TimeoutError::boundary),
        Some(Boundary::Attempt)
    );
    assert_eq!(shell.runs.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), ms(3 * 500 + 2 * 100));

    // The task's own `timeout:` expires as an io::Error too, and is permanent.
    shell.runs.store(0, Ordering::SeqCst);
    let policy = TaskPolicy::new()
        .with_retry(three_attempts())
        .with_timeout(ms(800));
    let err = scope(policy, shell.run(ms(10_000))).await.unwrap_err();
    assert_eq!(
        held(&err),
        Some(&TimeoutError::new(Boundary::Total, ms(800), Layer::Task))
    );
    assert_eq!(err.category(), ErrorCategory::Permanent);
    assert_eq!(shell.runs.load(Ordering::SeqCst), 2);

    // A fast run succeeds.
    assert_eq!(shell.run(ms(10)).await.unwrap(), 7);
}
