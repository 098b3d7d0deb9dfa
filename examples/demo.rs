//! The layered retry policy of ADR-019, end to end: a real reqwest client
//! against a real HTTP server on 127.0.0.1 that fails on purpose, through a
//! verb crate's transport (L1), provider and tool (L2), with each workflow
//! task's YAML policy in force. Every retry decision is printed as it
//! happens, tagged with its layer.
//!
//! ```text
//! cargo run --example demo
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nika_retry::events::{Outcome, RetryEvent, RetryObserver, observe};
use nika_retry_tests::fault::{Fault, FaultServer, closed_port};
use nika_retry_tests::verb::{HttpTool, Provider, RequestOptions, Task, Transport, run_task};
use tokio::time::Instant;

/// Prints each event as a timeline row and counts retries per layer.
struct Timeline {
    start: Instant,
    retries: Mutex<Vec<nika_retry::Layer>>,
}

impl RetryObserver for Timeline {
    fn on_event(&self, e: &RetryEvent) {
        let wait = match (e.delay, e.from_hint) {
            (Some(d), true) => format!("{} (server hint)", humantime::format_duration(d)),
            (Some(d), false) => format!("{} (backoff)", fmt_ms(d)),
            (None, _) => String::new(),
        };
        let outcome = match (e.outcome, e.reason) {
            (Outcome::Retrying, _) => "retrying".to_owned(),
            (outcome, Some(reason)) => format!("{outcome}: {reason}"),
            (outcome, None) => outcome.to_string(),
        };
        // `Transport::post` for a method, `module::fn` for a free fn.
        let owner = e.self_type.unwrap_or(
            e.operation
                .trim_end_matches(e.fn_name())
                .trim_end_matches("::"),
        );
        let owner = owner.rsplit("::").next().unwrap_or(owner);
        println!(
            "  {:>7}  {:<8} {:<20} {}/{}  {:<12} {:<24} {}",
            fmt_ms(self.start.elapsed()),
            e.layer,
            format!("{owner}::{}", e.fn_name()),
            e.attempt,
            e.max_attempts,
            e.category,
            wait,
            outcome
        );
        if e.outcome == Outcome::Retrying {
            self.retries.lock().unwrap().push(e.layer);
        }
    }
}

fn fmt_ms(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.2}s", d.as_secs_f64())
    }
}

/// One task of the demo workflow: its YAML, and what the server does.
struct Scenario {
    title: &'static str,
    yaml: &'static str,
    faults: Vec<Fault>,
}

#[tokio::main]
async fn main() {
    let scenarios = [
        Scenario {
            title: "503 with Retry-After: the http layer waits it out",
            yaml: "{ id: summarize, verb: infer, input: 'summarize the report' }",
            faults: vec![Fault::UnavailableFor(1), Fault::ok("a two-line summary")],
        },
        Scenario {
            title: "connection reset mid-response: the http layer retries",
            yaml: "{ id: translate, verb: infer, input: 'translate to French' }",
            faults: vec![Fault::Reset, Fault::ok("bonjour")],
        },
        Scenario {
            title: "429 with retry_after_ms: http leaves it to the provider, which waits",
            yaml: "{ id: classify, verb: infer, input: 'label this ticket' }",
            faults: vec![
                Fault::RateLimited {
                    retry_after_ms: 1500,
                },
                Fault::ok("billing"),
            ],
        },
        Scenario {
            title: "401: never retried, at any layer",
            yaml: "{ id: audit, verb: infer, input: 'audit the logs' }",
            faults: vec![Fault::Status(401)],
        },
        Scenario {
            title: "tool failure: not retried (tool failures are semantic)",
            yaml: "{ id: list-files, verb: tool, input: 'ls /data' }",
            faults: vec![Fault::Status(503)],
        },
        Scenario {
            title: "the same tool failure, with the task's retry: block opting in",
            yaml: "{ id: list-files-again, verb: tool, input: 'ls /data', \
                   retry: { max_attempts: 3, delay_ms: 200, backoff: constant } }",
            faults: vec![
                Fault::Status(503),
                Fault::Status(503),
                Fault::ok("report.csv"),
            ],
        },
    ];

    let timeline = Arc::new(Timeline {
        start: Instant::now(),
        retries: Mutex::new(Vec::new()),
    });
    println!(
        "nika-retry demo: a workflow of {} tasks against a fault server on 127.0.0.1\n",
        scenarios.len() + 1
    );
    println!(
        "  {:>7}  {:<8} {:<20} {:<4} {:<12} {:<24} outcome",
        "time", "layer", "operation", "try", "category", "wait"
    );

    let (mut ok, mut failed) = (0, 0);
    // First the transport alone against a closed port: connection refused.
    {
        println!(
            "\n▶ fetch-model-list — connection refused: the http layer retries, then gives up"
        );
        let refused = Transport::new(
            format!("http://{}", closed_port().await),
            RequestOptions::default(),
        );
        match observe(timeline.clone(), refused.post("/v1/models", "")).await {
            Ok(_) => ok += 1,
            Err(e) => {
                failed += 1;
                println!("  ✗ {e}");
            }
        }
    }
    for scenario in scenarios {
        let server = FaultServer::start(scenario.faults).await;
        // A single-attempt transport under the tool, so the tool's own policy shows.
        let tool_options = RequestOptions {
            retry: Some(
                nika_retry::RetryConfig::for_layer(nika_retry::Layer::Http)
                    .with_max_attempts(1)
                    .unwrap(),
            ),
            ..RequestOptions::default()
        };
        let provider = Provider::new(Transport::new(server.url(""), RequestOptions::default()));
        let tool = HttpTool::new(Transport::new(server.url(""), tool_options));
        let task: Task = serde_norway::from_str(scenario.yaml).expect("the demo's YAML is valid");
        println!("\n▶ {} — {}", task.id, scenario.title);
        match observe(timeline.clone(), run_task(&task, &provider, &tool)).await {
            Ok(out) => {
                ok += 1;
                println!("  ✓ {out:?} after {} request(s)", server.requests());
            }
            Err(e) => {
                failed += 1;
                println!("  ✗ {e} after {} request(s)", server.requests());
            }
        }
    }

    let retries = timeline.retries.lock().unwrap();
    let count = |l| retries.iter().filter(|r| **r == l).count();
    println!(
        "\n{} tasks: {ok} succeeded, {failed} failed · {} retries (http {}, provider {}, tool {}) · {}",
        ok + failed,
        retries.len(),
        count(nika_retry::Layer::Http),
        count(nika_retry::Layer::Provider),
        count(nika_retry::Layer::Tool),
        fmt_ms(timeline.start.elapsed())
    );
}
