//! A workflow runner: each task's YAML `retry:` and `timeout:` are put in
//! force with `nika_retry::task::scope` for everything the task calls, and
//! an observer records which layer retried and why it stopped.
//!
//! ```text
//! cargo run --example workflow_task
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code,
//! so you can copy it as it is. The provider and the tool are stand-ins for
//! your verb crate (no server needed): the provider answers 500 twice, then
//! a haiku; the tool is busy twice, then lists a file. In a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["serde"] }
//! serde = { version = "1", features = ["derive"] }
//! serde_norway = "0.9"   # or any serde YAML crate
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry::events::{EventLog, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Classify, TimeoutError, retry};

const WORKFLOW: &str = r#"
- id: draft
  verb: infer
  input: write a haiku about retries
  retry: { max_attempts: 4, delay_ms: 200, backoff: exponential }
  timeout: 10s
- id: list-files
  verb: tool
  input: ls /data
- id: list-files-again
  verb: tool
  input: ls /data
  retry: { max_attempts: 3, delay_ms: 100, backoff: constant }
"#;

/// A workflow task, as the YAML gives it.
#[derive(Debug, serde::Deserialize)]
struct Task {
    id: String,
    verb: String,
    input: String,
    /// Its `retry:`, `timeout:` and `budget:`, read by `parse_workflow`.
    #[serde(skip)]
    policy: TaskPolicy,
}

/// The tasks of a workflow with their policies. `TaskPolicy` reads the
/// policy keys of a task mapping and ignores the others, so it is parsed on
/// its own from the same text: a bad value is then reported with its key
/// and position, which `#[serde(flatten)]` would lose.
fn parse_workflow(yaml: &str) -> Result<Vec<Task>, serde_norway::Error> {
    let policies: Vec<TaskPolicy> = serde_norway::from_str(yaml)?;
    let mut tasks: Vec<Task> = serde_norway::from_str(yaml)?;
    for (task, policy) in tasks.iter_mut().zip(policies) {
        task.policy = policy;
    }
    Ok(tasks)
}

#[derive(Debug, thiserror::Error, Classify)]
enum ProviderError {
    #[error("api error {status}")]
    #[category(http_status = status)]
    Api { status: u16 },
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[derive(Debug, thiserror::Error, Classify)]
enum ToolError {
    #[error("tool busy")]
    #[category(transient)]
    Busy,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[derive(Debug, thiserror::Error)]
enum TaskError {
    #[error(transparent)]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// The task's `timeout:` expired.
    #[error(transparent)]
    Timeout(#[from] TimeoutError),
    #[error("unknown verb `{0}`")]
    UnknownVerb(String),
}

/// A stand-in for an LLM provider: 500 twice, then an answer.
#[derive(Default)]
struct Provider {
    calls: AtomicU32,
}

impl Provider {
    /// Alone: 3 attempts, 1 s then 4 s. The task's `retry:` replaces that.
    #[retry(layer = "provider")]
    async fn complete(&self, _prompt: &str) -> Result<String, ProviderError> {
        match self.calls.fetch_add(1, Ordering::SeqCst) {
            0 | 1 => Err(ProviderError::Api { status: 500 }),
            _ => Ok("five, seven, five".to_owned()),
        }
    }
}

/// A stand-in for a tool: busy twice, then an answer.
#[derive(Default)]
struct Tool {
    calls: AtomicU32,
}

impl Tool {
    /// Tried once, unless the task's `retry:` opts in.
    #[retry(layer = "tool")]
    async fn run(&self, _input: &str) -> Result<String, ToolError> {
        match self.calls.fetch_add(1, Ordering::SeqCst) {
            0 | 1 => Err(ToolError::Busy),
            _ => Ok("report.csv".to_owned()),
        }
    }
}

/// Runs `task` with its policy in force.
async fn run_task(task: &Task, provider: &Provider, tool: &Tool) -> Result<String, TaskError> {
    scope(task.policy.clone(), async {
        match task.verb.as_str() {
            "infer" => Ok(provider.complete(&task.input).await?),
            "tool" => Ok(tool.run(&task.input).await?),
            other => Err(TaskError::UnknownVerb(other.to_owned())),
        }
    })
    .await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tasks = parse_workflow(WORKFLOW)?;
    let (provider, tool) = (Provider::default(), Tool::default());
    // The engine's EventLog: every retry decision, in order.
    let log = EventLog::new();
    for task in &tasks {
        match observe(log.clone().into(), run_task(task, &provider, &tool)).await {
            Ok(out) => println!("task {}: {out:?}", task.id),
            Err(e) => println!("task {} failed: {e}", task.id),
        }
        for event in log.take() {
            println!("  event: {event}");
        }
    }

    // A bad value is refused with its key and its place in the file.
    let typo = "- id: draft\n  verb: infer\n  input: hi\n  retry: { max_attempts: 0 }\n";
    if let Err(e) = parse_workflow(typo) {
        println!("a bad retry: block: {e}");
    }
    Ok(())
}
