//! The adapters' loop, driven by hand: a request's attempts decided by the
//! engine as an annotated fn's are.

use core::time::Duration;
use std::sync::{Arc, Mutex};

use super::{Errors, Options, Sites, Timeouts, drive, response_failure};
use crate::engine::{Failure, GiveUp};
use crate::events::{EventLog, Outcome, observe};
use crate::upstream::{Held, Upstream};
use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;
use crate::vocab::timeout_error::TimeoutError;
use nika_retry_macros::{Classify, retry};

static SITES: Sites = Sites::new("nika_retry::adapter::tests");

/// A service's error, with the adapters' two of their own (the `tower`
/// layer's tests use it too).
#[derive(Debug, Classify, PartialEq)]
#[category(crate = "crate")]
pub(crate) enum Fault {
    #[category(transient)]
    Reset,
    #[category(transient, reached = no)]
    Refused,
    #[category(transparent)]
    Timeout(TimeoutError),
    #[category(transparent)]
    Held(Held),
}

impl From<TimeoutError> for Fault {
    fn from(e: TimeoutError) -> Self {
        Fault::Timeout(e)
    }
}

impl From<Held> for Fault {
    fn from(e: Held) -> Self {
        Fault::Held(e)
    }
}

const ERRORS: Errors<Fault> = Errors {
    timeout: Fault::from,
    held: Fault::from,
};

/// A response: its status and headers.
type Response = (u16, Vec<(&'static str, &'static str)>);

fn judge(upstream: Option<&Upstream>) -> impl FnMut(&Response) -> Option<Failure> + '_ {
    move |(status, headers)| response_failure(upstream, *status, &headers[..])
}

/// A request the server saw, and the idempotency key in force.
type Seen = (u32, Option<String>);

/// A script of results, one per attempt, and the requests it saw.
#[derive(Clone, Default)]
struct Server {
    script: Arc<Mutex<Vec<Result<Response, Fault>>>>,
    /// Each request, and the idempotency key its attempt saw.
    seen: Arc<Mutex<Vec<Seen>>>,
    /// When each request arrived (tokio's clock).
    at: Arc<Mutex<Vec<tokio::time::Instant>>>,
}

impl Server {
    fn new(script: Vec<Result<Response, Fault>>) -> Server {
        let mut script = script;
        script.reverse();
        Server {
            script: Arc::new(Mutex::new(script)),
            ..Server::default()
        }
    }

    async fn send(&self, request: u32) -> Result<Response, Fault> {
        let key = crate::current_attempt().map(|a| a.idempotency_key.to_string());
        self.seen.lock().unwrap().push((request, key));
        self.at.lock().unwrap().push(tokio::time::Instant::now());
        tokio::task::yield_now().await;
        self.script
            .lock()
            .unwrap()
            .pop()
            .unwrap_or(Ok((200, vec![])))
    }

    fn sent(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

fn ok(status: u16) -> Result<Response, Fault> {
    Ok((status, vec![]))
}

async fn run(options: &Options, server: &Server) -> Result<Response, Fault> {
    drive(
        options,
        7u32,
        |r| Some(*r),
        |r| server.send(r),
        judge(options.upstream.as_ref()),
        None,
        ERRORS,
    )
    .await
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn http_retries_errors_and_5xx_three_times_and_hands_the_last_back() {
    let options = Options::new(&SITES, Layer::Http);
    let server = Server::new(vec![Err(Fault::Reset), ok(503), ok(502)]);
    assert_eq!(run(&options, &server).await.unwrap().0, 502, "as it came");
    assert_eq!(server.sent(), 3);

    let server = Server::new(vec![ok(503), ok(200)]);
    assert_eq!(run(&options, &server).await.unwrap().0, 200);
    assert_eq!(server.sent(), 2);

    // 4xx and 429 are not the http layer's to retry.
    for status in [400, 404, 429] {
        let server = Server::new(vec![ok(status)]);
        assert_eq!(run(&options, &server).await.unwrap().0, status);
        assert_eq!(server.sent(), 1, "{status}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn provider_waits_out_retry_after_on_429() {
    let options = Options::new(&SITES, Layer::Provider);
    let server = Server::new(vec![Ok((429, vec![("retry-after", "7")])), ok(200)]);
    let started = tokio::time::Instant::now();
    assert_eq!(run(&options, &server).await.unwrap().0, 200);
    assert_eq!(started.elapsed(), Duration::from_secs(7));
    // `x-should-retry: false` wins over the status.
    let server = Server::new(vec![Ok((503, vec![("x-should-retry", "false")]))]);
    assert_eq!(run(&options, &server).await.unwrap().0, 503);
    assert_eq!(server.sent(), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn tool_never_retries_by_itself_but_does_with_a_config() {
    let log = Arc::new(EventLog::new());
    let options = Options::new(&SITES, Layer::Tool);
    let server = Server::new(vec![Err(Fault::Reset), ok(200)]);
    let result = observe(log.clone(), run(&options, &server)).await;
    assert_eq!(result.unwrap_err(), Fault::Reset);
    assert_eq!(server.sent(), 1);
    assert_eq!(log.events()[0].reason, Some(GiveUp::NotOptedIn));

    let config = RetryConfig::for_layer(Layer::Tool)
        .with_max_attempts(2)
        .unwrap();
    let options = options.config(config);
    let server = Server::new(vec![Err(Fault::Reset), ok(200)]);
    assert_eq!(run(&options, &server).await.unwrap().0, 200);
    assert_eq!(server.sent(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_request_that_cannot_be_kept_is_sent_once_and_the_event_says_why() {
    let log = Arc::new(EventLog::new());
    let options = Options::new(&SITES, Layer::Http);
    let server = Server::new(vec![ok(503), ok(200)]);
    let sent = drive(
        &options,
        1u32,
        |_| None,
        |r| server.send(r),
        judge(None),
        None,
        ERRORS,
    );
    assert_eq!(observe(log.clone(), sent).await.unwrap().0, 503);
    assert_eq!(server.sent(), 1);
    let events = log.events();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].outcome, Outcome::GaveUp);
    assert_eq!(events[0].reason, Some(GiveUp::NotReplayable));
    assert!(
        events[0].to_string().contains("cannot be sent again"),
        "{}",
        events[0]
    );

    // A failure never retried keeps its own reason.
    let server = Server::new(vec![ok(400)]);
    let sent = drive(
        &options,
        1,
        |_| None,
        |r| server.send(r),
        judge(None),
        None,
        ERRORS,
    );
    observe(log.clone(), sent).await.unwrap();
    assert_eq!(log.events()[1].reason, Some(GiveUp::NotRetryable));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_adapter_that_is_not_idempotent_retries_only_what_was_refused() {
    let options = Options::new(&SITES, Layer::Http).idempotent(false);
    let server = Server::new(vec![Err(Fault::Refused), ok(503), ok(502)]);
    assert_eq!(run(&options, &server).await.unwrap().0, 502);
    assert_eq!(server.sent(), 3, "refused and 503 said nothing was done");
    let server = Server::new(vec![ok(502), ok(200)]);
    assert_eq!(run(&options, &server).await.unwrap().0, 502);
    assert_eq!(server.sent(), 1, "a 502 may have been acted on");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_attempt_limit_is_the_services_error_and_is_retried() {
    let options = Options::new(&SITES, Layer::Http)
        .timeouts(Timeouts::NONE.with_attempt(Duration::from_secs(1)));
    let sends = Mutex::new(0);
    let result = drive(
        &options,
        0u32,
        |r| Some(*r),
        |_| {
            *sends.lock().unwrap() += 1;
            async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                ok(200)
            }
        },
        judge(None),
        None,
        ERRORS,
    )
    .await;
    assert!(matches!(result, Err(Fault::Timeout(_))), "{result:?}");
    assert_eq!(*sends.lock().unwrap(), 3);
}

#[retry(layer = "provider", backoff = "1ms", crate = "crate")]
async fn provider(server: &Server, options: &Options) -> Result<Response, Fault> {
    match run(options, server).await? {
        (503, _) => Err(Fault::Reset),
        response => Ok(response),
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn under_a_provider_fn_the_budget_and_the_key_are_the_calls() {
    let options = Options::new(&SITES, Layer::Http);
    let server = Server::new((0..20).map(|_| ok(503)).collect());
    provider(&server, &options).await.unwrap_err();
    // 3 × 3, the budget of the provider call, not 3 × 3 × 3.
    assert_eq!(server.sent(), 9);
    let seen = server.seen.lock().unwrap();
    let first = seen[0].1.clone().expect("current_attempt() inside");
    assert!(seen.iter().all(|(_, key)| key.as_deref() == Some(&*first)));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_429_holds_the_upstream_for_the_next_request() {
    let upstream = Upstream::new("tests/adapter");
    let options = Options::new(&SITES, Layer::Provider).upstream(upstream.clone());
    let server = Server::new(vec![Ok((429, vec![("retry-after", "5")])), ok(200)]);
    let started = tokio::time::Instant::now();
    let (first, second) = tokio::join!(run(&options, &server), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        run(&options, &server).await
    });
    assert_eq!((first.unwrap().0, second.unwrap().0), (200, 200));
    // The sibling waited out the hold rather than sending into it (the
    // script's 200 would have answered it at 10 ms).
    assert_eq!(server.sent(), 3);
    let at = server.at.lock().unwrap();
    let after_the_hold = |at: &tokio::time::Instant| *at - started >= Duration::from_secs(5);
    let gaps: Vec<Duration> = at.iter().map(|at| *at - started).collect();
    assert!(at[1..].iter().all(after_the_hold), "{gaps:?}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn total_bounds_the_attempts_and_the_waits_between_them() {
    use crate::vocab::timeout_error::Boundary;

    let config = RetryConfig::for_layer(Layer::Http)
        .with_jitter(0.0)
        .unwrap();
    let timeouts = Timeouts::NONE.with_total(Duration::from_secs(2));
    let options = Options::new(&SITES, Layer::Http)
        .config(config)
        .timeouts(timeouts);
    let started = tokio::time::Instant::now();
    // Each answer a 503 after 900 ms: the second attempt (from 1.15 s) is
    // cut at 2 s.
    let result = drive(
        &options,
        0u32,
        |r| Some(*r),
        |_| async {
            tokio::time::sleep(Duration::from_millis(900)).await;
            ok(503)
        },
        judge(None),
        None,
        ERRORS,
    )
    .await;
    let Err(Fault::Timeout(limit)) = result else {
        panic!("{result:?}")
    };
    assert_eq!(limit.boundary(), Boundary::Total);
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn read_cuts_an_attempt_without_progress_not_a_long_one_that_progresses() {
    use crate::vocab::timeout_error::Boundary;

    let timeouts = Timeouts::NONE.with_read(Duration::from_secs(1));
    let options = Options::new(&SITES, Layer::Http).timeouts(timeouts);
    let run = |gaps: u32, gap: Duration| {
        drive(
            &options,
            0u32,
            |r| Some(*r),
            move |_| async move {
                for _ in 0..gaps {
                    tokio::time::sleep(gap).await;
                }
                ok(200)
            },
            judge(None),
            None,
            ERRORS,
        )
    };
    // 3 s in all, a wake-up every 500 ms: never 1 s without progress.
    assert_eq!(run(6, Duration::from_millis(500)).await.unwrap().0, 200);
    // 5 s without a wake-up: cut at 1 s, each of the 3 attempts.
    let started = tokio::time::Instant::now();
    let result = run(1, Duration::from_secs(5)).await;
    let Err(Fault::Timeout(limit)) = result else {
        panic!("{result:?}")
    };
    assert_eq!(limit.boundary(), Boundary::Read);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
