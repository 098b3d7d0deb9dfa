//! A workflow task with a YAML `retry:` and `timeout:`: the task runner puts
//! the task's policy in force for everything the task calls, and an
//! EventLog observer records which layer retried and why it stopped.
//!
//! ```text
//! cargo run --example workflow_task
//! ```

use std::sync::{Arc, Mutex};

use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::verb::{HttpTool, Provider, RequestOptions, Task, Transport, run_task};

/// The engine's EventLog.
#[derive(Default)]
struct EventLog(Mutex<Vec<String>>);

impl RetryObserver for EventLog {
    fn on_event(&self, event: &RetryEvent) {
        self.0.lock().unwrap().push(event.to_string());
    }
}

const WORKFLOW: &str = r#"
- id: draft
  verb: infer
  input: write a haiku about retries
  retry: { max_attempts: 4, delay_ms: 200, backoff: exponential }
  timeout: 10s
"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = FaultServer::start([
        Fault::Status(500),
        Fault::Status(500),
        Fault::ok("five, seven, five"),
    ])
    .await;
    // One attempt at L1, so that this example shows the task-driven provider retries.
    let once = nika_retry::RetryConfig::for_layer(nika_retry::Layer::Http).with_max_attempts(1)?;
    let options = || RequestOptions {
        retry: Some(once.clone()),
        ..RequestOptions::default()
    };
    let provider = Provider::new(Transport::new(server.url(""), options()));
    let tool = HttpTool::new(Transport::new(server.url(""), options()));

    let tasks: Vec<Task> = serde_norway::from_str(WORKFLOW)?;
    let log = Arc::new(EventLog::default());
    for task in &tasks {
        let out = observe(log.clone(), run_task(task, &provider, &tool)).await?;
        println!("task {}: {out:?}", task.id);
    }
    for line in log.0.lock().unwrap().iter() {
        println!("  event: {line}");
    }
    Ok(())
}
