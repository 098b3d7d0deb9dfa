//! The layered retry policy (docs/layers.md), end to end: a real reqwest client
//! against a real HTTP server on 127.0.0.1 that fails on purpose, through a
//! verb crate's transport (L1), provider and tool (L2), with each workflow
//! task's YAML policy in force, and a streamed answer (retried before its
//! first token, never after), then 50 calls at once on one model whose
//! limits count requests and tokens (on one shared upstream, beside the same
//! calls each on their own), and a mail whose answer is lost (a tool that is not
//! idempotent: not sent again). Every retry decision is printed as it happens,
//! tagged with its layer.
//!
//! ```text
//! cargo run --example demo
//! ```
//!
//! Needs this repository, and nothing else: the fault server
//! (`nika_retry_tests::fault`, `src/fault.rs`) it starts on 127.0.0.1 for
//! each task, and the verb crate (`nika_retry_tests::verb`, `src/verb.rs`)
//! it drives. The jitter is seeded, so every run waits the same; docs/demo.md
//! shows an excerpt of its output, which CI compares with a run.

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use nika_retry::Layer;
use nika_retry::engine::GiveUp;
use nika_retry::events::{EventLog, Outcome, RetryEvent, RetryObserver, UpstreamEvent, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::upstream::Quota;
use nika_retry_tests::fault::{Fault, FaultServer, Step, closed_port, quota};
use nika_retry_tests::verb::{
    HttpTool, Mailer, Provider, RequestOptions, Task, Transport, run_task,
};
use tokio::time::Instant;

/// Prints each event as a timeline row, and keeps it for the tally.
struct Timeline {
    start: Instant,
    log: EventLog,
    /// The layer whose loop calls the transport in the running task, if any.
    above_http: Mutex<Option<Layer>>,
}

impl RetryObserver for Timeline {
    fn on_event(&self, e: &RetryEvent) {
        if e.outcome == Outcome::Recovered && e.attempt == 1 {
            // A first attempt that succeeded after a wait at its upstream
            // (DEBUG, one per caller that waited): the hold's line says it.
            return;
        }
        let wait = match (e.delay, e.backoff) {
            (Some(d), _) if e.from_hint => format!("{} (server hint)", fmt_ms(d)),
            // The backoff, and the delay jitter drew from it.
            (Some(d), Some(backoff)) => format!("{} (of {})", fmt_ms(d), fmt_ms(backoff)),
            (Some(d), None) => fmt_ms(d),
            (None, _) => String::new(),
        };
        let above = *self.above_http.lock().unwrap();
        let outcome = match (e.outcome, e.reason, above) {
            (Outcome::Retrying, ..) => "retrying".to_owned(),
            // A call that is not idempotent, whose attempt may have arrived.
            (_, Some(GiveUp::MayHaveTakenEffect), _) => {
                "not retried: may have taken effect, not idempotent".to_owned()
            }
            (Outcome::Recovered, ..) => "recovered".to_owned(),
            // An inner loop that stops hands the error to the layer above it.
            (Outcome::GaveUp, Some(GiveUp::NotRetryable), Some(up))
                if e.layer == Layer::Http
                    && e.category == Some(nika_retry::ErrorCategory::RateLimited) =>
            {
                format!("→ {up}: 429 is the provider layer's to retry")
            }
            (Outcome::GaveUp, _, Some(up)) if e.layer == Layer::Http && e.max_attempts == 1 => {
                format!("→ {up}: its transport tries once")
            }
            (Outcome::GaveUp, Some(reason), Some(up)) if e.layer == Layer::Http => {
                format!("→ {up}: {reason}")
            }
            (Outcome::GaveUp, _, _) if e.layer == Layer::Tool && e.max_attempts == 1 => {
                "gave up: a tool is retried only if its task opts in".to_owned()
            }
            (outcome, Some(reason), _) => {
                format!("{}: {reason}", outcome.as_str().replace('_', " "))
            }
            (outcome, None, _) => outcome.to_string(),
        };
        // `Transport::post` for a method, `module::fn` for a free fn.
        let owner = e.self_type.unwrap_or(
            e.operation
                .trim_end_matches(e.fn_name())
                .trim_end_matches("::"),
        );
        let owner = owner.rsplit("::").next().unwrap_or(owner);
        println!(
            "  {:>7}  {:<8} {:<20} {}/{}  {:<12} {:<22} {}",
            fmt_ms(self.start.elapsed()),
            e.layer,
            format!("{owner}::{}", e.fn_name()),
            e.attempt,
            e.max_attempts,
            e.category.map_or("", nika_retry::ErrorCategory::as_str),
            wait,
            outcome
        );
        self.log.on_event(e);
    }

    fn on_upstream(&self, e: &UpstreamEvent) {
        let verb = if e.extended { "hold extended" } else { "held" };
        println!(
            "  {:>7}  {:<8} {:<20} {verb} for {} ({}): every call on it waits",
            fmt_ms(self.start.elapsed()),
            "upstream",
            e.upstream,
            fmt_ms(e.held_for),
            e.reason
        );
    }
}

fn fmt_ms(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.2}s", d.as_secs_f64())
    }
}

/// An error and its causes: reqwest's own message names the request, and
/// the cause at the bottom of its `source()` chain says what went wrong.
fn describe(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    let mut last = None;
    while let Some(e) = cause {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            // "connection refused", rather than the OS's wording with its number.
            last = Some(io.kind().to_string());
            break;
        }
        last = Some(e.to_string());
        cause = e.source();
    }
    if let Some(last) = last.filter(|l| !text.contains(l.as_str())) {
        text = format!("{text}: {last}");
    }
    text
}

fn requests(n: usize) -> String {
    format!("{n} request{}", if n == 1 { "" } else { "s" })
}

/// The fan-out's model: 20 requests and 3 000 tokens per rolling 2 s,
/// OpenAI's rate-limit headers on every answer, 50–150 ms per answer.
fn model_limits() -> quota::Config {
    quota::Config::per(Duration::from_secs(2))
        .requests(20)
        .tokens(3_000)
        .kind(quota::Kind::Rolling)
}

/// What one side of the fan-out did.
struct FanOut {
    failed: usize,
    counts: quota::Counts,
    makespan: Duration,
}

/// How the fan-out's calls share their model's limits.
#[derive(Clone, Copy)]
enum Sharing {
    /// One upstream that knows the quota from the start.
    Declared,
    /// One upstream that learns the limits from the headers.
    Cold,
    /// Each call on its own.
    Alone,
}

/// `n` completions at once through one provider, each prompt 200 tokens
/// (800 characters), against a quota server of its own.
async fn fan_out(sharing: Sharing, n: usize) -> FanOut {
    let server = quota::QuotaServer::start(model_limits()).await;
    let provider = Provider::for_model(
        Transport::new(server.url(""), RequestOptions::default()),
        "gpt-4o",
    );
    let provider = match sharing {
        Sharing::Declared => provider.with_quota(
            Quota::per(Duration::from_secs(2))
                .requests(20)
                .tokens(3_000),
        ),
        Sharing::Cold => provider,
        Sharing::Alone => provider.unshared(),
    };
    let prompt = format!("{:<800}", "summarize a chapter");
    let started = Instant::now();
    let calls = (0..n).map(|_| provider.complete(&prompt));
    let results = futures_util::future::join_all(calls).await;
    FanOut {
        failed: results.iter().filter(|r| r.is_err()).count(),
        counts: server.counts(),
        makespan: started.elapsed(),
    }
}

/// One task of the demo workflow: its YAML, and what the server does.
struct Scenario {
    title: &'static str,
    yaml: &'static str,
    faults: Vec<Fault>,
}

// One thread and a fixed jitter seed: the same waits on every run.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    nika_retry::engine::seed_thread_jitter(19);
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
        log: EventLog::new(),
        above_http: Mutex::new(None),
    });
    println!(
        "nika-retry demo: a workflow of {} tasks against a fault server on 127.0.0.1\n\n\
         Each row is one decision of a retry loop, after an attempt failed: the layer\n\
         whose loop decided, the attempt of how many, the error's category, the wait\n\
         before the next attempt, and what the loop did. A wait of \"179ms (of 250ms)\"\n\
         is the delay jitter drew from a 250 ms backoff (between half of it and all\n\
         of it); a server hint is waited as given. \"→ provider\" hands the error to\n\
         the loop of the layer above.\n",
        scenarios.len() + 4
    );
    println!(
        "  {:>7}  {:<8} {:<20} {:<4} {:<12} {:<22} outcome",
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
                println!("  ✗ {}", describe(&e));
            }
        }
    }
    for scenario in scenarios {
        let server = FaultServer::start(scenario.faults).await;
        // A single-attempt transport under the tool, so the tool's own policy shows.
        let tool_options = RequestOptions {
            retry: Some(
                nika_retry::RetryConfig::for_layer(Layer::Http)
                    .with_max_attempts(1)
                    .unwrap(),
            ),
            ..RequestOptions::default()
        };
        let provider = Provider::new(Transport::new(server.url(""), RequestOptions::default()));
        let tool = HttpTool::new(Transport::new(server.url(""), tool_options));
        let task: Task = serde_norway::from_str(scenario.yaml).expect("the demo's YAML is valid");
        println!("\n▶ {} — {}", task.id, scenario.title);
        let above = if task.verb == "tool" {
            println!("  (the tool's transport makes 1 attempt: the tool layer decides on retries)");
            Layer::Tool
        } else {
            Layer::Provider
        };
        *timeline.above_http.lock().unwrap() = Some(above);
        match observe(timeline.clone(), run_task(&task, &provider, &tool)).await {
            Ok(out) => {
                ok += 1;
                println!("  ✓ {out:?} after {}", requests(server.requests()));
            }
            Err(e) => {
                failed += 1;
                println!(
                    "  ✗ failed after {}: {}",
                    requests(server.requests()),
                    describe(&e)
                );
            }
        }
    }

    // Last, a streamed answer (server-sent events): the stall before its
    // first token is the attempt's, cut by `read` and retried; the stream
    // after it is the caller's, and `read` never cuts it while it delivers.
    {
        const READ: Duration = Duration::from_millis(300);
        const EVERY: Duration = Duration::from_millis(100);
        const TOKENS: usize = 10;
        println!(
            "\n▶ stream-story — streamed: the first attempt stalls before its first token, read ({}) cuts it, the provider retries",
            fmt_ms(READ)
        );
        let server = FaultServer::start([
            Fault::stream([Step::Meta("ping".into()), Step::Stall]),
            Fault::steady(EVERY, TOKENS),
        ])
        .await;
        let options = RequestOptions {
            read_timeout: READ,
            ..RequestOptions::default()
        };
        let provider = Provider::new(Transport::new(server.url(""), options));
        let retry = "retry: { max_attempts: 3, delay_ms: 200, backoff: constant }";
        let policy: TaskPolicy = serde_norway::from_str(retry).expect("the demo's YAML is valid");
        *timeline.above_http.lock().unwrap() = None;
        match observe(
            timeline.clone(),
            scope(policy, provider.stream("tell a story")),
        )
        .await
        {
            Ok(mut stream) => {
                // In the time column: counted from the call's start, the stall,
                // the wait and the retry included.
                println!(
                    "  {:>7}  time to first token, from the call's start",
                    fmt_ms(stream.time_to_first_content())
                );
                let (mut tokens, mut error) = (0, None);
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(chunk) => tokens += usize::from(chunk.is_token()),
                        Err(e) => error = Some(e),
                    }
                }
                match error {
                    None => {
                        ok += 1;
                        println!(
                            "  ✓ {tokens} tokens, one every {} ({} in all): never cut by read ({}) · {}",
                            fmt_ms(EVERY),
                            fmt_ms(EVERY * TOKENS as u32),
                            fmt_ms(READ),
                            requests(server.requests())
                        );
                    }
                    Some(e) => {
                        failed += 1;
                        println!("  ✗ after {tokens} tokens: {}", describe(&e));
                    }
                }
            }
            Err(e) => {
                failed += 1;
                println!(
                    "  ✗ failed after {}: {}",
                    requests(server.requests()),
                    describe(&e)
                );
            }
        }
    }

    // Then 50 calls at once on one model, against its request and token
    // limits: on the shared upstream, and each call alone, side by side.
    // The counts depend on timing (docs/demo.md's excerpt leaves out the digits
    // of the rows that start with │).
    {
        const CALLS: usize = 50;
        println!(
            "\n▶ fan-out — {CALLS} calls at once on one model whose limits are 20 requests and 3000 tokens per 2s (rolling), 200 tokens a call"
        );
        println!(
            "  (each call: the provider layer's 3 attempts; every answer carries OpenAI's x-ratelimit-* headers)"
        );
        let (declared, shared, alone) = tokio::join!(
            fan_out(Sharing::Declared, CALLS),
            fan_out(Sharing::Cold, CALLS),
            fan_out(Sharing::Alone, CALLS)
        );
        let allows = model_limits().allows(CALLS as u32, 200);
        println!(
            "  {:<28} {:>8} {:>6} {:>7}  makespan / what the limits allow ({})",
            "",
            "requests",
            "429s",
            "failed",
            fmt_ms(allows)
        );
        for (label, side) in [
            ("a declared quota, no cost", &declared),
            ("one shared upstream, cold", &shared),
            ("each call alone", &alone),
        ] {
            println!(
                "  │ {:<26} {:>8} {:>6} {:>7}  {:.2}×",
                label,
                side.counts.requests,
                side.counts.limited,
                side.failed,
                side.makespan.as_secs_f64() / allows.as_secs_f64()
            );
        }
        if shared.failed == 0 {
            ok += 1;
            println!("  ✓ {CALLS} answers on the shared upstream");
        } else {
            failed += 1;
            println!(
                "  ✗ {} of {CALLS} calls failed on the shared upstream",
                shared.failed
            );
        }
    }

    // Last, a tool with a side effect: the mail server takes the mail, then
    // its answer is lost. Neither the mailer nor its transport call is
    // idempotent, so neither repeats it, although the task opts in.
    {
        println!(
            "\n▶ send-alert — the mail server took the mail but its answer was lost: not retried"
        );
        let server = FaultServer::start([Fault::CommitThenDrop, Fault::ok("queued")]).await;
        let mailer = Mailer::new(Transport::new(server.url(""), RequestOptions::default()));
        let retry = "retry: { max_attempts: 3, delay_ms: 200, backoff: constant }";
        let policy: TaskPolicy = serde_norway::from_str(retry).expect("the demo's YAML is valid");
        *timeline.above_http.lock().unwrap() = Some(Layer::Tool);
        let sent = mailer.send("oncall@example.com", "disk 93% full");
        match observe(timeline.clone(), scope(policy, sent)).await {
            Ok(id) => {
                ok += 1;
                println!("  ✓ {id:?} after {}", requests(server.requests()));
            }
            Err(e) => {
                failed += 1;
                println!(
                    "  ✗ not sent again after {}: {} (the server took {} mail)",
                    requests(server.requests()),
                    describe(&e),
                    server.effects()
                );
            }
        }
    }

    let retries: Vec<Layer> = timeline
        .log
        .events()
        .iter()
        .filter(|e| e.outcome == Outcome::Retrying)
        .map(|e| e.layer)
        .collect();
    let count = |l| retries.iter().filter(|r| **r == l).count();
    println!(
        "\n{} tasks: {ok} succeeded, {failed} failed · {} retries (http {}, provider {}, tool {}) · {}",
        ok + failed,
        retries.len(),
        count(Layer::Http),
        count(Layer::Provider),
        count(Layer::Tool),
        fmt_ms(timeline.start.elapsed())
    );
}
