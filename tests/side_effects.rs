//! Calls with side effects: a fn marked `idempotent = false` (or whose
//! `idempotent = EXPR` says so) retries only a failure whose attempt never
//! reached the other side (`Reached::No`) or was turned away (`Refused`);
//! any other gives up at once with `GiveUp::MayHaveTakenEffect`, a WARN
//! line naming the fn, whatever the task's `retry:` says. Every test reads
//! the log lines at DEBUG: tracing caches callsite interest process-wide.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry::engine::GiveUp;
use nika_retry::events::{EventLog, Outcome, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Classify, Layer, RetryConfig, TimeoutError, retry};
use nika_retry_tests::logs::{Clock, logged};

/// One failure of each `Reached`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Classify)]
enum SendError {
    /// The connection was refused: the request never left.
    #[category(transient, reached = no)]
    NeverSent,
    /// The server answered 503: it did not act.
    #[category(transient, reached = refused)]
    TurnedAway,
    /// The answer was lost after the request was written.
    #[category(transient)]
    AnswerLost,
    #[category(transient)]
    Timeout,
}

impl From<TimeoutError> for SendError {
    fn from(_: TimeoutError) -> SendError {
        SendError::Timeout
    }
}

/// Fails with `error` every attempt, counting them.
struct Mailbox {
    error: SendError,
    attempts: AtomicU32,
}

impl Mailbox {
    fn failing(error: SendError) -> Mailbox {
        Mailbox {
            error,
            attempts: AtomicU32::new(0),
        }
    }

    fn attempt(&self) -> Result<(), SendError> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        Err(self.error)
    }

    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }

    #[retry(layer = "provider", backoff = "1s", idempotent = false)]
    async fn send(&self) -> Result<(), SendError> {
        self.attempt()
    }

    /// The same, as every fn was before the key: idempotent.
    #[retry(layer = "provider", backoff = "1s")]
    async fn send_idempotent(&self) -> Result<(), SendError> {
        self.attempt()
    }

    #[retry(layer = "tool", idempotent = false)]
    async fn send_tool(&self) -> Result<(), SendError> {
        self.attempt()
    }
}

/// Runs `work` under a DEBUG subscriber and an event log: what it returned,
/// the log lines and the log.
fn run<F: Future>(work: F) -> (F::Output, String, EventLog) {
    let log = EventLog::new();
    let (out, text) = logged(
        tracing::Level::DEBUG,
        Clock::Paused,
        observe(log.clone().into(), work),
    );
    (out, text, log)
}

type Seen = (u32, Outcome, Option<GiveUp>);

fn seen(log: &EventLog) -> Vec<Seen> {
    log.events()
        .iter()
        .map(|e| (e.attempt, e.outcome, e.reason))
        .collect()
}

#[test]
fn what_never_left_or_was_refused_is_retried_what_may_have_arrived_is_not() {
    for (error, attempts) in [
        (SendError::NeverSent, 3),
        (SendError::TurnedAway, 3),
        (SendError::AnswerLost, 1),
    ] {
        let mailbox = Mailbox::failing(error);
        let (result, _, _) = run(mailbox.send());
        assert_eq!(result, Err(error));
        assert_eq!(
            mailbox.attempts(),
            attempts,
            "{error:?} ({})",
            error.reached()
        );
        // Without the key, every one of them is retried as before.
        let idempotent = Mailbox::failing(error);
        let _ = run(idempotent.send_idempotent());
        assert_eq!(idempotent.attempts(), 3, "{error:?}");
    }
}

#[test]
fn the_give_up_is_an_event_a_warn_line_naming_the_fn_and_an_event_log_line() {
    let mailbox = Mailbox::failing(SendError::AnswerLost);
    let (_, text, log) = run(mailbox.send());
    assert_eq!(
        seen(&log),
        [(1, Outcome::GaveUp, Some(GiveUp::MayHaveTakenEffect))]
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(
        lines[0].contains("WARN"),
        "a WARN even on the first attempt: {text}"
    );
    assert!(
        lines[0].contains(
            "gave_up (not retried: the attempt may have taken effect and `Mailbox::send` is not idempotent)"
        ),
        "{text}"
    );
    let printed = log.to_string();
    assert!(
        printed.contains("Mailbox::send")
            && printed.contains("not retried: may have taken effect, not idempotent"),
        "{printed}"
    );
}

/// Read once per call, as it starts (before any attempt), so that the calls
/// nested in its attempts know it too (docs/side-effects.md, Inward).
#[test]
fn the_run_time_expression_is_read_once_per_call_as_it_starts() {
    static ASKED: AtomicU32 = AtomicU32::new(0);
    fn safe(method: &str) -> bool {
        ASKED.fetch_add(1, Ordering::SeqCst);
        method == "GET"
    }
    #[retry(layer = "http", backoff = "1s", idempotent = safe(method))]
    async fn request(method: &str, fails: &AtomicU32) -> Result<(), SendError> {
        match fails.fetch_sub(1, Ordering::SeqCst) {
            0 => Ok(()),
            _ => Err(SendError::AnswerLost),
        }
    }
    // A GET that fails twice is retried twice; the expression was read once.
    let fails = AtomicU32::new(2);
    let (result, _, log) = run(request("GET", &fails));
    assert_eq!(result, Ok(()));
    assert_eq!(ASKED.load(Ordering::SeqCst), 1);
    assert_eq!(log.events().len(), 3);
    // A POST that fails is not retried.
    let fails = AtomicU32::new(2);
    let (result, _, log) = run(request("POST", &fails));
    assert_eq!(result, Err(SendError::AnswerLost));
    assert_eq!(
        seen(&log),
        [(1, Outcome::GaveUp, Some(GiveUp::MayHaveTakenEffect))]
    );
    assert_eq!(ASKED.load(Ordering::SeqCst), 2);
    // A first attempt that succeeds: read once all the same, as the call started.
    let fails = AtomicU32::new(0);
    let _ = run(request("POST", &fails));
    assert_eq!(ASKED.load(Ordering::SeqCst), 3);
}

#[test]
fn a_tasks_retry_cannot_override_it() {
    let retry = RetryConfig::for_layer(Layer::Tool)
        .with_max_attempts(3)
        .unwrap();
    let opted_in = || TaskPolicy::new().with_retry(retry.clone());
    // The task opts the tool in: what never left is retried…
    let refused = Mailbox::failing(SendError::NeverSent);
    let _ = run(scope(opted_in(), refused.send_tool()));
    assert_eq!(refused.attempts(), 3);
    // …what may have arrived is not.
    let lost = Mailbox::failing(SendError::AnswerLost);
    let (_, _, log) = run(scope(opted_in(), lost.send_tool()));
    assert_eq!(lost.attempts(), 1);
    assert_eq!(
        seen(&log),
        [(1, Outcome::GaveUp, Some(GiveUp::MayHaveTakenEffect))]
    );
    // Not opted in: tried once, reported as such.
    let alone = Mailbox::failing(SendError::NeverSent);
    let (_, _, log) = run(alone.send_tool());
    assert_eq!(seen(&log), [(1, Outcome::GaveUp, Some(GiveUp::NotOptedIn))]);
}

#[test]
fn the_derive_says_what_each_variant_reached() {
    use nika_retry::{Boundary, Reached};
    use std::io;

    #[derive(Debug, Classify)]
    enum Wrapped {
        /// Delegates, the reach included.
        #[category(transparent)]
        Io(io::Error),
        /// A variant whose one field is a `TimeoutError`: what it says.
        #[category(transient)]
        Limit(TimeoutError),
        /// A status: 503 turned away, 500 may have acted.
        #[category(http_status = status)]
        Status { status: u16 },
        /// Fixed by the attribute, over the category's default.
        #[category(rate_limited, reached = maybe)]
        Odd,
        #[category(rate_limited)]
        Throttled,
    }
    let limit = |b| TimeoutError::new(b, std::time::Duration::from_secs(1), Layer::Http);
    let cases = [
        (
            Wrapped::Io(io::ErrorKind::ConnectionRefused.into()),
            Reached::No,
        ),
        (
            Wrapped::Io(io::ErrorKind::ConnectionReset.into()),
            Reached::Maybe,
        ),
        (Wrapped::Limit(limit(Boundary::Connect)), Reached::No),
        (Wrapped::Limit(limit(Boundary::Read)), Reached::Maybe),
        (Wrapped::Status { status: 503 }, Reached::Refused),
        (Wrapped::Status { status: 500 }, Reached::Maybe),
        (Wrapped::Odd, Reached::Maybe),
        (Wrapped::Throttled, Reached::Refused),
    ];
    for (error, reached) in cases {
        assert_eq!(error.reached(), reached, "{error:?}");
    }
}
