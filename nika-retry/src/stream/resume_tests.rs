//! `Started::resume_with` on a paused clock: what a resume spends, when it
//! waits, and when it never happens.

use core::future::poll_fn;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use futures_core::Stream;
use tokio::time::Instant;

use super::{Resume, Started, started};
use crate::events::{Outcome, RetryEvent, RetryObserver, observe};
use crate::upstream::{Held, Quota, Upstream};
use crate::vocab::timeout_error::{Boundary, TimeoutError};
use nika_retry_macros::{Classify, retry, timeout};

#[derive(Debug, Classify)]
#[category(crate = "crate")]
enum Error {
    #[category(transient)]
    Reset,
    #[category(permanent)]
    Refused,
    #[category(transparent)]
    Timeout(TimeoutError),
    #[category(transparent)]
    Held(Held),
}

impl From<TimeoutError> for Error {
    fn from(e: TimeoutError) -> Error {
        Error::Timeout(e)
    }
}

impl From<Held> for Error {
    fn from(e: Held) -> Error {
        Error::Held(e)
    }
}

/// One step of a scripted response.
#[derive(Debug)]
enum Step {
    Item(u32),
    Reset,
    Refused,
    Stall,
}

/// A response that plays its steps, then ends.
#[derive(Debug)]
struct Script(VecDeque<Step>);

impl Stream for Script {
    type Item = Result<u32, Error>;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.0.pop_front() {
            None => Poll::Ready(None),
            Some(Step::Item(n)) => Poll::Ready(Some(Ok(n))),
            Some(Step::Reset) => Poll::Ready(Some(Err(Error::Reset))),
            Some(Step::Refused) => Poll::Ready(Some(Err(Error::Refused))),
            Some(Step::Stall) => {
                self.0.push_front(Step::Stall);
                Poll::Pending
            }
        }
    }
}

/// Items `from..to`, then `end` if any.
fn items(from: u32, to: u32, end: Option<Step>) -> Script {
    Script((from..to).map(Step::Item).chain(end).collect())
}

/// Events `0..3`, then a reset: the first response of every test.
#[retry(layer = "provider", backoff = "1s", jitter = 0.0, crate = "crate")]
async fn cut() -> Result<Started<Script>, Error> {
    started(items(0, 3, Some(Step::Reset))).await
}

/// The same, but a call that is not idempotent.
#[retry(layer = "provider", idempotent = false, crate = "crate")]
async fn cut_not_idempotent() -> Result<Started<Script>, Error> {
    started(items(0, 3, Some(Step::Reset))).await
}

/// Events `0..3`, then a stall, under `read` and `total`.
#[retry(layer = "provider", backoff = "1s", jitter = 0.0, crate = "crate")]
#[timeout(read = "10s", total = "15s", crate = "crate")]
async fn stalls() -> Result<Started<Script>, Error> {
    started(items(0, 3, Some(Step::Stall))).await
}

/// Events `0..3`, then a reset, at `upstream`.
#[retry(layer = "provider", backoff = "1s", jitter = 0.0, upstream = upstream, crate = "crate")]
async fn cut_at(upstream: &Upstream) -> Result<Started<Script>, Error> {
    started(items(0, 3, Some(Step::Reset))).await
}

/// The calls of a resume's closure: when, and as which attempt.
#[derive(Clone, Default)]
struct Sent(Arc<Mutex<Vec<(Instant, Resume, u32)>>>);

impl Sent {
    fn log(&self) -> Vec<(Instant, Resume, u32)> {
        self.0.lock().unwrap().clone()
    }
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// What a resume's closure gives: the rest, once started.
type Opening = Pin<Box<dyn Future<Output = Result<Started<Script>, Error>> + Send>>;

/// A closure that opens the rest from `delivered` to 6, after as many
/// failures before content as `fail_first` says.
fn opens_rest(sent: &Sent, fail_first: u32) -> impl FnMut(Resume) -> Opening + Send + 'static {
    let sent = sent.clone();
    let failures = Arc::new(AtomicU32::new(fail_first));
    move |resume| {
        let attempt = crate::current_attempt().map_or(0, |a| a.attempt);
        sent.0
            .lock()
            .unwrap()
            .push((Instant::now(), resume, attempt));
        let fail = failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        Box::pin(async move {
            let from = u32::try_from(resume.delivered()).unwrap();
            if fail {
                // Fails before its own content: the attempt fails.
                return started(Script([Step::Reset].into())).await;
            }
            started(items(from, 6, None)).await
        })
    }
}

#[derive(Default)]
struct Log(Mutex<Vec<RetryEvent>>);

impl RetryObserver for Log {
    fn on_event(&self, event: &RetryEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

impl Log {
    fn events(&self) -> Vec<RetryEvent> {
        self.0.lock().unwrap().clone()
    }
}

/// Every item until the end: `Ok` numbers, `Err` as their debug text.
async fn drain<S: Stream<Item = Result<u32, Error>> + Unpin>(mut s: S) -> Vec<Result<u32, String>> {
    let mut out = Vec::new();
    while let Some(item) = poll_fn(|cx| Pin::new(&mut s).poll_next(cx)).await {
        out.push(item.map_err(|e| format!("{e:?}")));
    }
    out
}

fn oks(to: u32) -> Vec<Result<u32, String>> {
    (0..to).map(Ok).collect()
}

#[tokio::test(start_paused = true)]
async fn a_cut_after_content_resumes_with_the_layers_backoff_and_spends_one_attempt() {
    let (sent, log) = (Sent::default(), Arc::new(Log::default()));
    let start = Instant::now();
    let items = observe(log.clone(), async {
        let stream = cut().await.unwrap().resume_with(opens_rest(&sent, 0));
        let mut stream = stream;
        let first = poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await;
        let mut items = vec![first.unwrap().map_err(|e| format!("{e:?}"))];
        items.extend(drain(&mut stream).await);
        assert_eq!(
            stream.time_to_first_content(),
            Duration::ZERO,
            "unchanged by the resume"
        );
        assert_eq!(stream.delivered(), 6);
        items
    })
    .await;
    assert_eq!(items, oks(6), "every event once, in order");
    let [(at, resume, attempt)] = sent.log()[..] else {
        panic!("one resume: {:?}", sent.log())
    };
    assert_eq!(
        at - start,
        Duration::from_secs(1),
        "the provider's first backoff"
    );
    assert_eq!((resume.delivered(), resume.attempt(), attempt), (3, 2, 2));
    let events = log.events();
    assert_eq!(events[0].outcome, Outcome::Resuming, "{events:?}");
    assert_eq!(events[0].attempt, 1);
    assert_eq!(events[0].delay, Some(Duration::from_secs(1)));
    assert_eq!(events[0].resumed_after, Some(3));
    assert_eq!(events[0].total_attempts, 2, "one attempt spent");
    assert!(
        events[0].to_string().contains("resuming in 1s"),
        "{}",
        events[0]
    );
}

#[tokio::test(start_paused = true)]
async fn a_resume_that_fails_before_its_content_is_retried_as_an_attempt() {
    let (sent, log) = (Sent::default(), Arc::new(Log::default()));
    let start = Instant::now();
    let items = observe(log.clone(), async {
        let stream = cut().await.unwrap().resume_with(opens_rest(&sent, 1));
        drain(stream).await
    })
    .await;
    assert_eq!(items, oks(6), "the failed resume showed nothing");
    let sent = sent.log();
    assert_eq!(sent.len(), 2, "{sent:?}");
    // 1 s, then the second backoff, 4 s.
    assert_eq!(sent[0].0 - start, Duration::from_secs(1));
    assert_eq!(sent[1].0 - start, Duration::from_secs(5));
    assert_eq!((sent[1].1.attempt(), sent[1].2), (3, 3));
    let outcomes: Vec<_> = log
        .events()
        .iter()
        .map(|e| (e.attempt, e.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            (1, Outcome::Resuming),
            (2, Outcome::Resuming),
            (3, Outcome::Recovered)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn what_a_resume_holds_before_its_content_is_replayed_or_dropped_with_its_attempt() {
    let log = Arc::new(Log::default());
    let calls = Arc::new(AtomicU32::new(0));
    let opened = calls.clone();
    let items = observe(log.clone(), async {
        let stream = cut().await.unwrap().resume_with(move |resume: Resume| {
            let first = opened.fetch_add(1, Ordering::SeqCst) == 0;
            // 100 is not content: held until content, then replayed.
            let steps: Vec<Step> = if first {
                // Held, then the attempt fails before content: dropped.
                vec![Step::Item(100), Step::Reset]
            } else {
                let from = u32::try_from(resume.delivered()).unwrap();
                [Step::Item(100)]
                    .into_iter()
                    .chain((from..6).map(Step::Item))
                    .collect()
            };
            super::started_when(Script(steps.into()), |n: &u32| *n != 100)
        });
        drain(stream).await
    })
    .await;
    let mut expected = oks(3);
    expected.extend([Ok(100), Ok(3), Ok(4), Ok(5)]);
    assert_eq!(items, expected, "the failed resume's held item never shown");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn the_budget_exhausted_ends_the_stream_with_the_last_error() {
    let (sent, log) = (Sent::default(), Arc::new(Log::default()));
    let items = observe(log.clone(), async {
        let stream = cut().await.unwrap().resume_with(opens_rest(&sent, 5));
        drain(stream).await
    })
    .await;
    let mut expected = oks(3);
    expected.push(Err("Reset".to_owned()));
    assert_eq!(items, expected, "the last error, then the end");
    assert_eq!(sent.count(), 2, "3 attempts: the first and two resumes");
    let last = log.events().pop().unwrap();
    assert_eq!((last.attempt, last.outcome), (3, Outcome::GaveUp));
}

#[tokio::test(start_paused = true)]
async fn a_resume_spends_the_budget_of_the_task_in_force() {
    use crate::task::{TaskPolicy, scope};
    let (sent, log) = (Sent::default(), Arc::new(Log::default()));
    // Two attempts for the whole task: the call's first, and one resume.
    let policy = TaskPolicy::new().with_budget(2);
    let items = observe(
        log.clone(),
        scope(policy, async {
            let stream = cut().await.unwrap().resume_with(opens_rest(&sent, 5));
            Ok::<_, Error>(drain(stream).await)
        }),
    )
    .await
    .unwrap();
    assert_eq!(items.last(), Some(&Err("Reset".to_owned())), "{items:?}");
    assert_eq!(sent.count(), 1, "one resume, then the budget is spent");
    let last = log.events().pop().unwrap();
    assert_eq!((last.attempt, last.outcome), (2, Outcome::BudgetExhausted));
}

#[tokio::test(start_paused = true)]
async fn total_ends_it_whatever_is_left() {
    let sent = Sent::default();
    let start = Instant::now();
    // The `read` stall at 10 s resumes after 1 s; `total` (15 s) cuts the
    // rest's stall, and is never resumed.
    let resumes = sent.clone();
    let stream = stalls().await.unwrap().resume_with(move |resume: Resume| {
        resumes.0.lock().unwrap().push((Instant::now(), resume, 0));
        let from = u32::try_from(resume.delivered()).unwrap();
        started(items(from, 4, Some(Step::Stall)))
    });
    let items = drain(stream).await;
    let Some(Err(last)) = items.last() else {
        panic!("{items:?}")
    };
    assert!(last.contains("Total"), "{items:?}");
    assert_eq!(&items[..4], oks(4), "{items:?}");
    assert_eq!(
        Instant::now() - start,
        Duration::from_secs(15),
        "at `total`, not later"
    );
    assert_eq!(sent.count(), 1, "the stall resumed, `total` did not");
}

#[tokio::test(start_paused = true)]
async fn a_non_idempotent_call_never_resumes() {
    let sent = Sent::default();
    let stream = cut_not_idempotent()
        .await
        .unwrap()
        .resume_with(opens_rest(&sent, 0));
    let items = drain(stream).await;
    let mut expected = oks(3);
    expected.push(Err("Reset".to_owned()));
    assert_eq!(
        items, expected,
        "the cut is the caller's, as without resume_with"
    );
    assert_eq!(sent.count(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_error_the_layer_does_not_retry_is_the_callers_last_item() {
    #[retry(layer = "provider", crate = "crate")]
    async fn refused() -> Result<Started<Script>, Error> {
        started(items(0, 2, Some(Step::Refused))).await
    }
    let sent = Sent::default();
    let stream = refused().await.unwrap().resume_with(opens_rest(&sent, 0));
    let items = drain(stream).await;
    let mut expected = oks(2);
    expected.push(Err("Refused".to_owned()));
    assert_eq!(items, expected);
    assert_eq!(sent.count(), 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_stream_during_a_resumes_backoff_sends_nothing_more() {
    let sent = Sent::default();
    let mut stream = cut().await.unwrap().resume_with(opens_rest(&sent, 0));
    for _ in 0..3 {
        poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await;
    }
    // The cut: the resume sleeps its 1 s backoff.
    let waiting = tokio::time::timeout(
        Duration::from_millis(500),
        poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)),
    )
    .await;
    assert!(waiting.is_err(), "still in its backoff");
    drop(stream);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(sent.count(), 0, "nothing sent after the drop");
}

#[tokio::test(start_paused = true)]
async fn an_upstream_held_during_a_resume_makes_it_wait() {
    let upstream = Upstream::new("resume/held");
    let sent = Sent::default();
    let start = Instant::now();
    let stream = cut_at(&upstream).await.unwrap();
    upstream.hold_for(Duration::from_secs(7));
    let items = drain(stream.resume_with(opens_rest(&sent, 0))).await;
    assert_eq!(items, oks(6));
    let [(at, ..)] = sent.log()[..] else { panic!() };
    assert!(
        at - start >= Duration::from_secs(7),
        "held: {:?}",
        at - start
    );
}

#[tokio::test(start_paused = true)]
async fn pacing_counts_a_resume() {
    // One request per 10 s: the call's own attempt takes it, so the resume
    // waits for the next, well past its 1 s backoff.
    let upstream =
        Upstream::new("resume/paced").with_quota(Quota::per(Duration::from_secs(10)).requests(1));
    let sent = Sent::default();
    let start = Instant::now();
    let stream = cut_at(&upstream).await.unwrap();
    let items = drain(stream.resume_with(opens_rest(&sent, 0))).await;
    assert_eq!(items, oks(6));
    let [(at, ..)] = sent.log()[..] else { panic!() };
    assert!(
        at - start >= Duration::from_secs(9),
        "paced: {:?}",
        at - start
    );
}

#[tokio::test(start_paused = true)]
async fn outside_an_annotated_fn_nothing_resumes() {
    let sent = Sent::default();
    let stream = started(items(0, 3, Some(Step::Reset)))
        .await
        .unwrap()
        .resume_with(opens_rest(&sent, 0));
    let items = drain(stream).await;
    assert_eq!(items.len(), 4, "{items:?}");
    assert_eq!(sent.count(), 0);
}

#[test]
fn a_read_stall_resumes_and_boundary_says_so() {
    let stall = TimeoutError::new(
        Boundary::Read,
        Duration::from_secs(1),
        crate::Layer::Provider,
    );
    assert_eq!(Resume::new(1, 2, &stall).boundary(), Some(Boundary::Read));
}
