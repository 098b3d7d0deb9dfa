//! `#[timeout]` alone: bounds a fn without retrying it, for the boundaries
//! that have no retry of their own (an agent loop's total, a tool's
//! execution, a task). The body runs exactly once, even inside a task scope
//! whose `retry:` would retry a loop, and the fn keeps the shapes `#[retry]`
//! takes (docs/time-limits.md). Paused clock.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{
    Boundary, Classify, ErrorCategory, Layer, RetryConfig, TimeoutError, retry, timeout,
};
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

/// An agent loop: bounded in total by its own limit, never retried as a whole.
struct Agent {
    turns: AtomicU32,
    max_duration: Duration,
}

#[derive(Debug, thiserror::Error, Classify)]
enum AgentError {
    #[error("tool failed")]
    #[category(transient)]
    Tool,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

impl Agent {
    #[timeout(layer = "task", total = self.max_duration)]
    async fn run(&self, turn: Duration) -> Result<u32, AgentError> {
        loop {
            let n = self.turns.fetch_add(1, Ordering::SeqCst) + 1;
            sleep(turn).await;
            if n == 100 {
                return Err(AgentError::Tool);
            }
        }
    }
}

/// A task step bounded per attempt, with no `#[retry]`: it stalls past its
/// limit, and an `attempt` expiry is transient, so a loop would retry it.
#[timeout(layer = "task", attempt = "1s")]
async fn task_body(runs: &AtomicU32) -> Result<(), AgentError> {
    runs.fetch_add(1, Ordering::SeqCst);
    sleep(Duration::from_secs(3600)).await;
    Ok(())
}

/// The same step with a retry loop, which the task scope's `retry:` drives.
#[retry(layer = "task")]
#[timeout(attempt = "1s")]
async fn looped_task_body(runs: &AtomicU32) -> Result<(), AgentError> {
    runs.fetch_add(1, Ordering::SeqCst);
    sleep(Duration::from_secs(3600)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn timeout_alone_runs_once_even_in_a_task_scope_that_retries() {
    let runs = AtomicU32::new(0);
    let policy = TaskPolicy::new().with_retry(three_attempts());
    let start = Instant::now();
    let err = scope(policy.clone(), task_body(&runs)).await.unwrap_err();
    let AgentError::Timeout(t) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        t,
        &TimeoutError::new(Boundary::Attempt, ms(1000), Layer::Task)
    );
    // Retryable: only the absence of a loop keeps it to one run.
    assert_eq!(err.category(), ErrorCategory::Transient);
    assert_eq!(
        (runs.load(Ordering::SeqCst), start.elapsed()),
        (1, ms(1000))
    );

    // The same failure under the same scope, with a loop: three runs.
    let runs = AtomicU32::new(0);
    assert!(scope(policy, looped_task_body(&runs)).await.is_err());
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn an_agent_loop_is_bounded_in_total_and_its_own_error_is_not_retried() {
    let agent = Agent {
        turns: AtomicU32::new(0),
        max_duration: Duration::from_secs(10),
    };
    let err = agent.run(Duration::from_secs(3)).await.unwrap_err();
    assert!(matches!(err, AgentError::Timeout(ref t) if t.boundary() == Boundary::Total));
    assert_eq!(agent.turns.load(Ordering::SeqCst), 4);

    // The body's own transient error comes back after one run: no retry.
    let agent = Agent {
        turns: AtomicU32::new(0),
        max_duration: Duration::from_secs(1000),
    };
    let policy = TaskPolicy::new().with_retry(three_attempts());
    let err = scope(policy, agent.run(ms(1))).await.unwrap_err();
    assert!(matches!(err, AgentError::Tool), "{err:?}");
    assert_eq!(agent.turns.load(Ordering::SeqCst), 100);
}

/// A tool fn with its own per-call timeout and no retry, returning io::Error.
struct Command {
    timeout: Duration,
}

impl Command {
    #[timeout(layer = "tool", attempt = self.timeout)]
    async fn exec(&self, script: String) -> Result<usize, io::Error> {
        // Moves an argument: fine, the body runs once.
        let owned: String = script;
        sleep(ms(owned.len() as u64 * 100)).await;
        Ok(owned.len())
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_fn_alone_returns_an_io_error_holding_an_attempt_timeout() {
    let cmd = Command { timeout: ms(500) };
    assert_eq!(cmd.exec("ls".into()).await.unwrap(), 2);
    let err = cmd.exec("sleep 10".into()).await.unwrap_err();
    assert_eq!(
        held(&err),
        Some(&TimeoutError::new(Boundary::Attempt, ms(500), Layer::Tool))
    );
    assert_eq!(err.category(), ErrorCategory::Transient);
}

/// `#[timeout]` alone on the shapes `#[retry]` takes.
mod shapes {
    use super::*;

    type Res<T> = Result<T, io::Error>;

    pub struct Counter {
        pub n: u32,
    }

    impl Counter {
        /// `&mut self`, a `Result` alias, `?` and an early `return`.
        #[timeout(layer = "tool", attempt = "1s")]
        pub async fn bump(&mut self, by: u32) -> Res<u32> {
            if by == 0 {
                return Err(io::Error::other("zero"));
            }
            let parsed: u32 = "1".parse().map_err(io::Error::other)?;
            self.n += by * parsed;
            Ok(self.n)
        }

        /// A coercing return: `&String` to `&str`.
        #[timeout(layer = "tool", attempt = "1s")]
        pub async fn name(&self, names: &[String]) -> Res<usize> {
            let first: &str = names.first().map_or("", |s| s);
            Ok(first.len())
        }
    }

    /// Generics with a where-clause.
    #[timeout(layer = "task", total = "1s")]
    pub async fn sum<T>(items: Vec<T>) -> Res<u64>
    where
        T: Into<u64> + Send,
    {
        Ok(items.into_iter().map(Into::into).sum())
    }

    #[async_trait::async_trait]
    pub trait Tool {
        async fn call(&self, input: String) -> Res<String>;
    }

    pub struct Echo;

    #[async_trait::async_trait]
    impl Tool for Echo {
        #[timeout(layer = "tool", attempt = "100ms")]
        async fn call(&self, input: String) -> Res<String> {
            if input == "slow" {
                sleep(Duration::from_secs(5)).await;
            }
            Ok(input)
        }
    }

    fn assert_send<F: std::future::Future + Send>(f: F) -> F {
        f
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_alone_keeps_the_fn_as_written() {
        let mut c = Counter { n: 0 };
        assert_eq!(assert_send(c.bump(2)).await.unwrap(), 2);
        assert!(c.bump(0).await.is_err());
        assert_eq!(c.name(&["abc".to_owned()]).await.unwrap(), 3);
        assert_eq!(assert_send(sum(vec![1u8, 2, 3])).await.unwrap(), 6);
        let tool: &dyn Tool = &Echo;
        assert_eq!(tool.call("hi".into()).await.unwrap(), "hi");
        let err = tool.call("slow".into()).await.unwrap_err();
        assert_eq!(
            held(&err).map(TimeoutError::boundary),
            Some(Boundary::Attempt)
        );
    }
}
