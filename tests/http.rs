//! The verb crate against a real HTTP server on 127.0.0.1 with a real
//! reqwest client: every fault, which layer retried, the waits honoured.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use nika_retry::events::{Outcome, RetryEvent, RetryObserver, observe};
use nika_retry::{Boundary, Classify, ErrorCategory, Layer};
use nika_retry_tests::fault::{Fault, FaultServer, closed_port};
use nika_retry_tests::verb::{
    HttpError, HttpTool, Provider, ProviderError, RequestOptions, Task, TaskError, ToolError,
    Transport, run_task,
};
use nika_retry_tests::{EventLog, serve};
use tokio::time::Instant;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Fast http-layer retries, 10 ms apart, under a read timeout out of reach of
/// a loaded machine (5 s): the exact outlines and request counts below do not
/// depend on its speed.
fn fast() -> RequestOptions {
    RequestOptions::fast_retries()
}

/// [`fast`] with a read timeout short enough for a test to wait out, for
/// the tests where the timeout is what they show: still 1 s, so that an
/// answer on time is never cut on a loaded machine.
fn cut_after_1s() -> RequestOptions {
    fast().with_read_timeout(Duration::from_secs(1))
}

use Layer::{Http, Provider as P, Tool};
use Outcome::{GaveUp, Recovered, Retrying};

#[tokio::test]
async fn connection_refused_is_retried_at_the_http_layer() {
    let addr = closed_port().await;
    let transport = Transport::new(format!("http://{addr}"), fast());
    let (out, log) = EventLog::record(transport.post("/", "x")).await;
    let err = out.unwrap_err();
    assert!(
        matches!(&err, HttpError::Request(e) if e.is_connect()),
        "{err:?}"
    );
    assert_eq!(err.category(), ErrorCategory::Transient);
    assert_eq!(
        log.outline(),
        [(Http, Retrying), (Http, Retrying), (Http, GaveUp)]
    );
    let event = &log.events()[0];
    assert_eq!(event.self_type, Some("nika_retry_tests::verb::Transport"));
    let line = event.to_string();
    assert!(
        line.starts_with(
            "[http] nika_retry_tests::verb::Transport::post attempt 1/3 transient: retrying in "
        ),
        "{line}"
    );
}

#[tokio::test]
async fn a_503_waits_at_least_its_retry_after_in_seconds() {
    let (server, transport) = serve([Fault::UnavailableFor(1), Fault::ok("fine")], fast()).await;
    assert_eq!(transport.post("/", "x").await.unwrap(), "fine");
    let hits = server.hits();
    assert_eq!(hits.len(), 2);
    assert!(
        hits[1].at - hits[0].at >= Duration::from_secs(1),
        "{:?}",
        hits[1].at - hits[0].at
    );
}

/// Keeps each event with the wall-clock time it was seen.
#[derive(Default)]
struct Stamped(Mutex<Vec<(RetryEvent, SystemTime)>>);

impl RetryObserver for Stamped {
    fn on_event(&self, event: &RetryEvent) {
        let mut events = self.0.lock().unwrap();
        events.push((event.clone(), SystemTime::now()));
    }
}

#[tokio::test]
async fn a_503_waits_for_its_retry_after_date() {
    // The header's own date: whole seconds, so 2 s ahead of `before` is
    // somewhere in (1 s, 2 s] ahead of it.
    let before = SystemTime::now();
    let header = httpdate::fmt_http_date(before + Duration::from_secs(2));
    let date = httpdate::parse_http_date(&header).unwrap();
    let (server, transport) =
        serve([Fault::UnavailableRaw(header), Fault::ok("fine")], fast()).await;
    let log = Arc::new(Stamped::default());
    assert_eq!(
        observe(log.clone(), transport.post("/", "x"))
            .await
            .unwrap(),
        "fine"
    );
    let (event, seen) = log.0.lock().unwrap()[0].clone();
    // The client read the date at some instant between `before` and the
    // event, so the wait is the date minus that instant.
    let delay = event.delay.unwrap();
    let longest = date.duration_since(before).unwrap();
    let shortest = date.duration_since(seen).unwrap_or(Duration::ZERO);
    assert!(
        event.from_hint && shortest <= delay && delay <= longest,
        "{shortest:?} <= {delay:?} <= {longest:?}"
    );
    let hits = server.hits();
    assert!(hits[1].at - hits[0].at >= delay);
}

#[tokio::test]
async fn a_reset_mid_response_is_retried() {
    let (server, transport) = serve([Fault::Reset, Fault::ok("whole")], fast()).await;
    let (out, log) = EventLog::record(transport.post("/", "x")).await;
    assert_eq!(out.unwrap(), "whole");
    assert_eq!(server.requests(), 2);
    assert_eq!(log.outline(), [(Http, Retrying), (Http, Recovered)]);
}

#[tokio::test]
async fn a_stall_past_the_read_timeout_is_cut_and_retried() {
    let stall = Fault::Stall(Duration::from_secs(30), "late".into());
    let (_server, transport) = serve([stall, Fault::ok("on time")], cut_after_1s()).await;
    let (out, log) = EventLog::record(transport.post("/", "x")).await;
    // "on time" is the second answer: the first attempt was cut, not waited out.
    assert_eq!(out.unwrap(), "on time");
    assert_eq!(log.outline(), [(Http, Retrying), (Http, Recovered)]);
    assert_eq!(log.events()[0].category, Some(ErrorCategory::Transient));
}

#[tokio::test]
async fn a_server_that_never_answers_gives_read_timeouts() {
    let (server, transport) = serve([Fault::Hang], cut_after_1s()).await;
    let err = transport.post("/", "x").await.unwrap_err();
    let HttpError::Timeout(timeout) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (timeout.boundary(), timeout.limit(), timeout.layer()),
        (Boundary::Read, Duration::from_secs(1), Http)
    );
    assert_eq!(server.requests(), 3);
}

#[tokio::test]
async fn a_429_is_left_to_the_provider_which_waits_out_its_hint() {
    let server = FaultServer::start([
        Fault::RateLimited {
            retry_after_ms: 400,
        },
        Fault::ok("done"),
    ])
    .await;
    let provider = Provider::new(Transport::new(server.url(""), fast()));
    let (out, log) = EventLog::record(provider.complete("hi")).await;
    assert_eq!(out.unwrap(), "done");
    let events = log.events();
    assert_eq!(
        log.outline(),
        [(Http, GaveUp), (P, Retrying), (P, Recovered)],
        "{events:#?}"
    );
    assert_eq!(
        (events[0].category, events[1].category),
        (
            Some(ErrorCategory::RateLimited),
            Some(ErrorCategory::RateLimited)
        )
    );
    assert_eq!(
        (events[1].delay, events[1].from_hint),
        (Some(ms(400)), true)
    );
    let hits = server.hits();
    assert_eq!(hits.len(), 2, "the http layer did not retry the 429");
    assert!(hits[1].at - hits[0].at >= ms(400));
}

#[tokio::test]
async fn auth_not_found_and_bad_request_are_never_retried() {
    for (status, category) in [
        (401, ErrorCategory::Auth),
        (404, ErrorCategory::NotFound),
        (400, ErrorCategory::Permanent),
    ] {
        let server = FaultServer::start([Fault::Status(status)]).await;
        let provider = Provider::new(Transport::new(server.url(""), fast()));
        let err = provider.complete("hi").await.unwrap_err();
        assert!(
            matches!(err, ProviderError::Api { status: s, .. } if s == status),
            "{err:?}"
        );
        assert_eq!(err.category(), category);
        assert_eq!(server.requests(), 1, "{status}");
    }
}

fn task(yaml: &str) -> Task {
    serde_norway::from_str(yaml).unwrap()
}

#[tokio::test]
async fn a_tool_failure_is_not_retried_until_the_task_opts_in() {
    let (server, transport) = serve([Fault::Status(503)], fast().single_attempt()).await;
    let tool = HttpTool::new(transport);
    let provider = Provider::new(Transport::new(server.url(""), fast()));
    let plain = task("{ id: t1, verb: tool, input: ls }");
    let (out, log) = EventLog::record(run_task(&plain, &provider, &tool)).await;
    let err = out.unwrap_err();
    assert!(
        matches!(err, TaskError::Tool(ToolError::Unavailable(_))),
        "{err:?}"
    );
    assert_eq!(server.requests(), 1);
    // The transport's single attempt gives up, then the tool does not retry.
    assert_eq!(log.outline(), [(Http, GaveUp), (Tool, GaveUp)]);

    let script = [Fault::Status(503), Fault::Status(503), Fault::ok("listing")];
    let (server, transport) = serve(script, fast().single_attempt()).await;
    let tool = HttpTool::new(transport);
    let opted_in = task(
        "{ id: t2, verb: tool, input: ls, retry: { max_attempts: 3, delay_ms: 50, backoff: constant } }",
    );
    assert_eq!(
        run_task(&opted_in, &provider, &tool).await.unwrap(),
        "listing"
    );
    assert_eq!(server.requests(), 3);
}

#[tokio::test]
async fn the_task_retry_block_sets_the_provider_attempts_and_timeout_bounds_the_task() {
    let server = FaultServer::start([Fault::Status(500)]).await;
    let tool = HttpTool::new(Transport::new(server.url(""), fast()));
    let provider = Provider::new(Transport::new(server.url(""), fast().single_attempt()));
    let t = task("{ id: t3, verb: infer, input: hi, retry: { max_attempts: 2, delay_ms: 50 } }");
    assert!(matches!(
        run_task(&t, &provider, &tool).await,
        Err(TaskError::Provider(_))
    ));
    assert_eq!(server.requests(), 2);

    let server = FaultServer::start([Fault::Hang]).await;
    let provider = Provider::new(Transport::new(server.url(""), RequestOptions::default()));
    let t = task("{ id: t4, verb: infer, input: hi, timeout: 300ms }");
    let start = Instant::now();
    let err = run_task(&t, &provider, &tool).await.unwrap_err();
    // Not before the deadline; the error says the deadline is what ended it.
    assert!(start.elapsed() >= ms(300));
    let TaskError::Timeout(timeout) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        (timeout.boundary(), timeout.layer()),
        (Boundary::Total, Layer::Task)
    );
}

#[tokio::test]
async fn reqwest_errors_classify_by_status_and_by_cause() {
    let server =
        FaultServer::start([Fault::Status(503), Fault::Status(404), Fault::Status(429)]).await;
    let client = reqwest::Client::new();
    let mut categories = vec![];
    for _ in 0..3 {
        let err = client
            .get(server.url("/"))
            .send()
            .await
            .unwrap()
            .error_for_status()
            .unwrap_err();
        categories.push(err.category());
    }
    assert_eq!(
        categories,
        [
            ErrorCategory::Transient,
            ErrorCategory::NotFound,
            ErrorCategory::RateLimited
        ]
    );

    let refused = client
        .get(format!("http://{}/", closed_port().await))
        .send()
        .await
        .unwrap_err();
    assert_eq!(refused.category(), ErrorCategory::Transient);
    let bad_url = client.get("http://[::1").send().await.unwrap_err();
    assert_eq!(bad_url.category(), ErrorCategory::Permanent);
}
