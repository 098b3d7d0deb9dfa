//! A workflow task with a YAML `retry:` and `timeout:`: the task runner puts
//! the task's policy in force for everything the task calls, and an
//! EventLog observer records which layer retried and why it stopped.
//!
//! ```text
//! cargo run --example workflow_task
//! ```
//!
//! Needs this repository: the verb crate it drives (`nika_retry_tests::verb`,
//! `src/verb.rs`: a transport, a provider and a tool written as a user would)
//! and the fault server (`nika_retry_tests::fault`), started on 127.0.0.1 to
//! fail twice with a 500 and then answer. In a project of your own, with
//! your verb crate, `nika-retry = { version = "0.1", features = ["serde"] }`,
//! `serde_norway = "0.9"` (or any serde YAML crate) and `tokio`, replace
//! the fault server's two lines:
//!
//! ```text
//! let server = FaultServer::start([…]).await;   // delete
//! let base = server.url("");                    // let base = "https://api.your-provider.com";
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
    let base = server.url("");
    let provider = Provider::new(Transport::new(base.as_str(), options()));
    let tool = HttpTool::new(Transport::new(base.as_str(), options()));

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
