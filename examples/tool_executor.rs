//! A tool executor: tool failures are semantic, so the tool layer never
//! retries by itself — `#[retry(layer = "tool", attempts = 3)]` does not even
//! compile. A workflow task opts in with its `retry:` block.
//!
//! ```text
//! cargo run --example tool_executor
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code,
//! so you can copy it as it is. The tool is a stand-in that fails twice,
//! then succeeds. In a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["serde"] }
//! serde_norway = "0.9"   # or any serde YAML crate
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```

use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Classify, TimeoutError, retry, timeout};

#[derive(Debug, thiserror::Error, Classify)]
pub enum ToolExecError {
    #[error("tool `{0}` not found")]
    #[category(not_found)]
    NotFound(String),
    #[error("tool not available right now")]
    #[category(transient)]
    NotAvailable,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

static RUNS: AtomicU32 = AtomicU32::new(0);

/// One run of a tool, bounded to 30 s (a shell command's own timeout).
#[retry(layer = "tool")]
#[timeout(attempt = "30s")]
async fn execute(tool: &str) -> Result<String, ToolExecError> {
    match (tool, RUNS.fetch_add(1, Ordering::SeqCst)) {
        ("grep", 0 | 1) => Err(ToolExecError::NotAvailable),
        ("grep", _) => Ok("3 matches".to_owned()),
        (other, _) => Err(ToolExecError::NotFound(other.to_owned())),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let alone = execute("grep").await;
    println!(
        "without a task policy: {alone:?} after {} run",
        RUNS.load(Ordering::SeqCst)
    );

    let policy: TaskPolicy =
        serde_norway::from_str("retry: { max_attempts: 3, delay_ms: 100, backoff: constant }")?;
    let opted_in: Result<String, ToolExecError> = scope(policy, execute("grep")).await;
    println!(
        "with the task's retry: block: {opted_in:?} after {} runs in all",
        RUNS.load(Ordering::SeqCst)
    );

    let missing: Result<String, ToolExecError> = scope(TaskPolicy::new(), execute("sed")).await;
    println!("a missing tool is never retried: {missing:?}");
    Ok(())
}
