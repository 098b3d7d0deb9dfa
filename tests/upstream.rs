//! Calls that share an upstream, against a real loopback server and a real
//! reqwest client: one 429 holds every caller, who then wait it out (one
//! probe first) or fail at once with `Held` when it is longer than they wait.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nika_retry::engine::GiveUp;
use nika_retry::events::{Outcome, RetryEvent, RetryObserver, UpstreamEvent, WaitReason, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::upstream::{HoldReason, LimitSource, Quota, Upstream};
use nika_retry::{Classify, ErrorCategory, Layer, TokenBucket, retry, timeout};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::fleet::{Error, Provider};
use nika_retry_tests::{ProviderError, Script};

fn client(server: &FaultServer) -> Provider {
    Provider::new(&server.url("/v1/chat"), Upstream::new("test/model"))
}

/// `n` calls of `call`: the first alone, the others once `ready` says its
/// answer is in (the upstream held, or the server's limit met), whatever
/// the machine's load: no follower can overtake the first's 429.
async fn fan_out<F, Fut>(n: usize, ready: impl Fn() -> bool, call: F) -> Vec<Result<String, Error>>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<String, Error>>,
{
    nika_retry_tests::behind_first::behind_first(n, ready, call).await
}

/// Whether `provider`'s upstream is held.
fn held(provider: &Provider) -> impl Fn() -> bool + '_ {
    || provider.upstream.held_for().is_some()
}

/// A 1 s limit opened by the first request; its 429s ask for 2 s.
fn window() -> Fault {
    Fault::LimitWindow {
        window: Duration::from_secs(1),
        retry_after: 2,
    }
}

#[tokio::test]
async fn one_429_holds_every_caller_where_alone_each_meets_its_own() {
    let server = FaultServer::start([window()]).await;
    let provider = client(&server);
    let results = fan_out(12, held(&provider), || provider.call()).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let hits = server.hits();
    assert_eq!(server.limited(), 1, "one request met the limit: {hits:#?}");
    assert_eq!(hits.len(), 13, "12 calls, one retried");
    // No request while held: after the 429, none before its 2 s are over.
    let first = hits[0].at;
    assert!(
        hits[1..]
            .iter()
            .all(|h| h.at >= first + Duration::from_secs(2)),
        "{:?}",
        hits.iter().map(|h| h.at - first).collect::<Vec<_>>()
    );

    let server = FaultServer::start([window()]).await;
    let provider = client(&server);
    let results = fan_out(12, || server.limited() > 0, || provider.call_alone()).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(server.limited(), 12, "each call met the limit alone");
}

#[tokio::test]
async fn the_probe_goes_first_and_the_rest_follow_its_outcome() {
    let server = FaultServer::start([window()]).await;
    let provider = client(&server);
    fan_out(8, held(&provider), || provider.call()).await;
    let hits = server.hits();
    let first = hits[0].at;
    let released: Vec<Duration> = hits[1..].iter().map(|h| h.at - first).collect();
    // The probe's request is answered before any other of the released ones
    // is sent: it alone is within its round trip of the hold's end.
    let probe = released[0];
    assert!(probe >= Duration::from_secs(2), "{released:?}");
    let answered = hits[1].answered.expect("the probe answered") - first;
    assert!(
        released[1..].iter().all(|&at| at >= answered),
        "sent before the probe's answer at {answered:?}: {released:?}"
    );
    // The 429 came without rate-limit headers: the adaptive rate (β of
    // what was sent before it, a few a second) paces the others after the
    // probe, one at a time, where its bucket, full after the 2 s in which
    // the hold sent nothing, let them all go at once before. Delays on a
    // loaded machine only spread them more; the bound above is generous.
    let spread = released[released.len() - 1] - released[1];
    assert!(
        spread >= Duration::from_millis(6 * 100),
        "paced, not a burst: {released:?}"
    );
    assert!(spread <= Duration::from_secs(3), "{released:?}");
}

/// One attempt that notes when it started; the first of all the calls
/// given `pushed` meets a 429 asking for 2 s, without rate-limit headers.
#[retry(layer = "provider", upstream = upstream)]
async fn pushed_back_once_noted(
    upstream: &Upstream,
    pushed: &AtomicBool,
    starts: &Mutex<Vec<tokio::time::Instant>>,
) -> Result<(), Error> {
    starts.lock().unwrap().push(tokio::time::Instant::now());
    first_pushed_back(pushed)
}

/// A 429 asking for 2 s for the first of the calls given `pushed`, a
/// success for the others.
fn first_pushed_back(pushed: &AtomicBool) -> Result<(), Error> {
    if pushed.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    Err(Error::Api(
        429,
        ErrorCategory::RateLimited,
        Some(Duration::from_secs(2)),
    ))
}

/// The promise of the test above on the paused clock, where no load can
/// spread the starts for it.
#[tokio::test(start_paused = true)]
async fn after_a_hold_a_rate_adapted_to_its_429_sends_one_then_the_others_at_the_rate() {
    nika_retry::engine::seed_thread_jitter(3);
    let upstream = Upstream::new("adapted, then held");
    let pushed = AtomicBool::new(false);
    let starts = Mutex::new(Vec::new());
    let t0 = tokio::time::Instant::now();
    // The first call's 429 holds the upstream 2 s, and turns the adaptive
    // rate on (β of the one request sent before it: a few a second); 7
    // more calls come while it is held.
    let first = pushed_back_once_noted(&upstream, &pushed, &starts);
    let others = async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(upstream.held_for().is_some());
        let calls = (0..7).map(|_| pushed_back_once_noted(&upstream, &pushed, &starts));
        futures_util::future::join_all(calls).await
    };
    let (first, others) = tokio::join!(first, others);
    assert!(first.is_ok() && others.iter().all(Result::is_ok));
    let mut released: Vec<Duration> = starts.lock().unwrap()[1..]
        .iter()
        .map(|&at| at - t0)
        .collect();
    released.sort();
    assert_eq!(released.len(), 8, "{released:?}");
    assert!(released[0] >= Duration::from_secs(2), "{released:?}");
    // Nothing was sent during the hold: a bucket left full at its end
    // would let a burst go into the server that refused one.
    let spread = released[released.len() - 1] - released[1];
    assert!(
        spread >= Duration::from_millis(6 * 100),
        "paced, not a burst: {released:?}"
    );
}

#[tokio::test]
async fn a_hold_longer_than_the_cap_fails_the_others_at_once_with_held() {
    let server = FaultServer::start([Fault::WithHeaders(
        429,
        vec![("Retry-After".into(), "3600".into())],
    )])
    .await;
    let provider = client(&server);
    let first = provider.call().await;
    assert!(matches!(first, Err(Error::Api(429, ..))), "{first:?}");
    let started = tokio::time::Instant::now();
    let Err(Error::Held(held)) = provider.call().await else {
        panic!("the second call did not wait an hour")
    };
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(server.requests(), 1, "the held call sent nothing");
    assert_eq!(
        (held.upstream(), held.reason()),
        ("test/model", HoldReason::ServerHint)
    );
    assert!(held.left() > Duration::from_secs(3590) && held.left() <= Duration::from_secs(3600));
    assert_eq!(
        held.retry_after(),
        Some(held.left()),
        "an outer layer may wait it"
    );
}

#[derive(Default)]
struct Seen {
    holds: Mutex<Vec<UpstreamEvent>>,
    waits: Mutex<Vec<(Option<Duration>, Option<WaitReason>)>>,
}

impl RetryObserver for Seen {
    fn on_event(&self, event: &RetryEvent) {
        let wait = (event.upstream_wait, event.wait_reason);
        self.waits.lock().unwrap().push(wait);
    }
    fn on_upstream(&self, event: &UpstreamEvent) {
        self.holds.lock().unwrap().push(event.clone());
    }
}

#[tokio::test]
async fn one_event_per_hold_and_the_waits_on_the_calls_events() {
    let server = FaultServer::start([window()]).await;
    let provider = client(&server);
    let seen = Arc::new(Seen::default());
    observe(
        seen.clone(),
        fan_out(6, held(&provider), || provider.call()),
    )
    .await;
    let holds = seen.holds.lock().unwrap().clone();
    assert_eq!(holds.len(), 1, "{holds:?}");
    assert_eq!(holds[0].upstream, "test/model");
    assert_eq!(holds[0].held_for, Duration::from_secs(2));
    assert_eq!(holds[0].reason, HoldReason::ServerHint);
    assert!(!holds[0].extended);
    // Only the call that got the 429 retried: its retry's event and its
    // recovery. The 5 callers that waited and then succeeded at once say
    // that they waited, and why (a first-attempt success, at DEBUG).
    let waits = seen.waits.lock().unwrap().clone();
    assert_eq!(waits.len(), 7, "{waits:?}");
    assert_eq!(
        waits[0],
        (None, None),
        "the 429 came on an attempt that did not wait"
    );
    let held = waits[1..]
        .iter()
        .filter(|(wait, reason)| wait.is_some() && *reason == Some(WaitReason::Held))
        .count();
    assert!(held >= 5, "{waits:?}");
}

/// One attempt that logs when it started.
#[retry(layer = "provider", upstream = upstream)]
async fn logged(
    upstream: &Upstream,
    starts: &Mutex<Vec<tokio::time::Instant>>,
) -> Result<(), Error> {
    starts.lock().unwrap().push(tokio::time::Instant::now());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn callers_released_and_spreading_out_look_again_before_they_start() {
    // The spread's draws seeded: with some seeds more than two of the nine
    // draw less than the 1 ms before the second hold (about 0.35 % of runs).
    nika_retry::engine::seed_thread_jitter(3);
    let upstream = Upstream::new("spread");
    let starts = Mutex::new(Vec::new());
    let t0 = tokio::time::Instant::now();
    upstream.hold_for(Duration::from_secs(1));
    let calls = futures_util::future::join_all((0..10).map(|_| logged(&upstream, &starts)));
    // The probe goes at 1 s and releases the others over 100 ms; 1 ms in,
    // the upstream is held again.
    let again = async {
        tokio::time::sleep(Duration::from_millis(1_001)).await;
        upstream.hold_for(Duration::from_secs(1));
    };
    let (results, ()) = tokio::join!(calls, again);
    assert!(results.iter().all(Result::is_ok));
    let starts: Vec<Duration> = starts.lock().unwrap().iter().map(|&at| at - t0).collect();
    assert_eq!(starts.len(), 10);
    let (second_hold, its_end) = (Duration::from_millis(1_001), Duration::from_millis(2_001));
    assert!(
        starts.iter().all(|&at| at <= second_hold || at >= its_end),
        "no start inside the second hold: {starts:?}"
    );
    assert!(
        starts.iter().filter(|&&at| at >= its_end).count() >= 8,
        "{starts:?}"
    );
}

/// A provider fn over an http fn, each on an upstream of its own (the
/// model's, the host's), answering from a script.
struct Stack {
    host: Upstream,
    model: Upstream,
    script: Mutex<std::collections::VecDeque<Error>>,
    sent: Mutex<Vec<tokio::time::Instant>>,
}

impl Stack {
    #[retry(layer = "http", upstream = self.host)]
    async fn send(&self) -> Result<(), Error> {
        self.sent.lock().unwrap().push(tokio::time::Instant::now());
        match self.script.lock().unwrap().pop_front() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    #[retry(layer = "provider", upstream = self.model)]
    async fn complete(&self) -> Result<(), Error> {
        self.send().await
    }
}

#[tokio::test(start_paused = true)]
async fn nested_layers_each_pass_and_hold_their_own_upstream() {
    let hint = Duration::from_secs(2);
    let stack = Stack {
        host: Upstream::new("api.example.com"),
        model: Upstream::new("example/model"),
        script: Mutex::new([Error::Api(429, ErrorCategory::RateLimited, Some(hint))].into()),
        sent: Mutex::new(Vec::new()),
    };
    let t0 = tokio::time::Instant::now();
    let first = stack.complete();
    // Started once the 429 is in: the model's hold keeps it back.
    let second = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (host, model) = (stack.host.held_for(), stack.model.held_for());
        (stack.complete().await, host, model)
    };
    let (first, (second, host, model)) = tokio::join!(first, second);
    assert!(first.is_ok() && second.is_ok(), "{first:?} {second:?}");
    // The 429's hint held both: http's call gave up on it, the provider's retried.
    let left = hint - Duration::from_millis(100);
    assert_eq!((host, model), (Some(left), Some(left)));
    let sent: Vec<Duration> = stack
        .sent
        .lock()
        .unwrap()
        .iter()
        .map(|&at| at - t0)
        .collect();
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert!(sent[1..].iter().all(|&at| at >= hint), "{sent:?}");

    // A hold of the model alone: the http fn called directly goes at once,
    // the provider fn waits it out.
    stack.model.hold_for(Duration::from_secs(1));
    let before = tokio::time::Instant::now();
    stack.send().await.unwrap();
    // Not held: paced at most one interval of the rate its 429 (without
    // headers) adapted it to.
    assert_eq!(stack.host.held_for(), None);
    let requests = stack.host.limits().requests.expect("adapted to the 429");
    assert_eq!(requests.source, LimitSource::Adapted);
    let interval = requests.window / u32::try_from(requests.limit).unwrap();
    // (tokio's timers round up to the millisecond)
    assert!(
        before.elapsed() <= interval + Duration::from_millis(1),
        "the host is not held: {:?}, one interval {interval:?}",
        before.elapsed()
    );
    stack.complete().await.unwrap();
    assert_eq!(before.elapsed(), Duration::from_secs(1), "the model is");
}

/// A provider fn on `upstream` whose first attempt fails with a 503
/// (transient, no hint: it holds nothing) and whose second succeeds.
#[retry(layer = "provider", upstream = upstream, jitter = 0.0)]
async fn fails_once(upstream: &Upstream, attempts: &AtomicU32) -> Result<u32, ProviderError> {
    match attempts.fetch_add(1, Ordering::SeqCst) + 1 {
        1 => Err(ProviderError::status(503)),
        n => Ok(n),
    }
}

/// What a call of [`fails_once`] under `policy` did, waiting at a held
/// upstream before each of its two attempts: its result, its events, and
/// `bucket`'s tokens during the first wait and during the second.
async fn waits_twice(
    policy: TaskPolicy,
    bucket: &TokenBucket,
) -> (Result<u32, ProviderError>, Vec<RetryEvent>, [u32; 2]) {
    let upstream = Upstream::new("waits");
    let attempts = AtomicU32::new(0);
    let log = Arc::new(Log::default());
    // Held 5 s: the first attempt goes at 5 s (the probe), fails, and its
    // retry is due at 6 s (the provider's 1 s backoff); a hold set at
    // 5.5 s for 3 s makes that retry wait again until 8.5 s.
    upstream.hold_for(Duration::from_secs(5));
    let call = observe(log.clone(), scope(policy, fails_once(&upstream, &attempts)));
    let meanwhile = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let first = bucket.available();
        tokio::time::sleep(Duration::from_millis(3_500)).await;
        upstream.hold_for(Duration::from_secs(3));
        tokio::time::sleep(Duration::from_secs(1)).await;
        [first, bucket.available()]
    };
    let (result, available) = tokio::join!(call, meanwhile);
    let events = log.0.lock().unwrap().split_off(0);
    (result, events, available)
}

#[derive(Default)]
struct Log(Mutex<Vec<RetryEvent>>);

impl RetryObserver for Log {
    fn on_event(&self, event: &RetryEvent) {
        self.0.lock().unwrap().push(event.clone());
    }
}

#[tokio::test(start_paused = true)]
async fn waits_at_a_held_upstream_spend_no_attempt_budget_and_no_token() {
    let no_bucket = TokenBucket::new(0);
    let t0 = tokio::time::Instant::now();
    // A budget of two attempts: the call's two attempts, its two waits free.
    let (result, events, _) = waits_twice(TaskPolicy::new().with_budget(2), &no_bucket).await;
    assert_eq!(result, Ok(2), "{events:#?}");
    assert_eq!(t0.elapsed(), Duration::from_millis(8_500));
    let seen: Vec<_> = events
        .iter()
        .map(|e| (e.outcome, e.attempt, e.total_attempts, e.upstream_wait))
        .collect();
    // `total_attempts` is one plus every retry taken (the retry's event
    // counts the retry): 2 at the end, not 4.
    assert_eq!(
        seen,
        [
            (Outcome::Retrying, 1, 2, Some(Duration::from_secs(5))),
            (Outcome::Recovered, 2, 2, Some(Duration::from_millis(2_500))),
        ]
    );
    // The budget binds attempts: one attempt's worth refuses the retry.
    let (result, events, _) = waits_twice(TaskPolicy::new().with_budget(1), &no_bucket).await;
    assert!(result.is_err());
    assert_eq!(
        events.iter().map(|e| e.reason).collect::<Vec<_>>(),
        [Some(GiveUp::BudgetExhausted)]
    );

    // A bucket that pays for exactly one retry: had either wait taken a
    // token, the retry would have found it short.
    let bucket = TokenBucket::new(5).with_retry_cost(5);
    let policy = TaskPolicy::new().with_token_bucket(Layer::Provider, bucket.clone());
    let (result, events, [first_wait, second_wait]) = waits_twice(policy, &bucket).await;
    assert_eq!(result, Ok(2), "{events:#?}");
    assert_eq!(first_wait, 5, "the first wait took nothing");
    assert_eq!(
        second_wait, 0,
        "the retry took its 5, its wait nothing more"
    );
    assert_eq!(bucket.available(), 5, "the retry's tokens given back");
    // And the bucket binds retries: one token short refuses it.
    let short = TokenBucket::new(4).with_retry_cost(5);
    let policy = TaskPolicy::new().with_token_bucket(Layer::Provider, short.clone());
    let (result, events, _) = waits_twice(policy, &short).await;
    assert!(result.is_err());
    assert_eq!(
        events.iter().map(|e| e.reason).collect::<Vec<_>>(),
        [Some(GiveUp::TokenBucketEmpty)]
    );
}

/// One attempt that succeeds at once.
#[retry(layer = "provider", upstream = upstream)]
async fn succeeds(upstream: &Upstream) -> Result<(), Error> {
    Ok(())
}

/// `F`, counting the times it is polled.
struct Polls<F> {
    inner: std::pin::Pin<Box<F>>,
    polls: Arc<AtomicU32>,
}

impl<F: std::future::Future> std::future::Future for Polls<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        self.inner.as_mut().poll(cx)
    }
}

const WAITERS: usize = 1_000;

/// `WAITERS` calls of `call` on `upstream`, held 10 s from now, each on a
/// task of its own (paused clock): how often each was polled, and when
/// each ended, in the order they were spawned (the first polled first).
async fn crowd<F, Fut>(upstream: &Upstream, call: F) -> (Vec<u32>, Vec<Duration>)
where
    F: Fn(Upstream) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>> + Send + 'static,
{
    let t0 = tokio::time::Instant::now();
    upstream.hold_for(Duration::from_secs(10));
    // One task each, so that no waker is shared and tokio's per-task
    // budget never makes a poll return early and ask to be polled again.
    let mut calls: Vec<_> = (0..WAITERS)
        .map(|_| {
            let polls = Arc::new(AtomicU32::new(0));
            let call = call(upstream.clone());
            let call = async move {
                call.await.unwrap();
                tokio::time::Instant::now()
            };
            let task = tokio::spawn(Polls {
                inner: Box::pin(call),
                polls: polls.clone(),
            });
            (task, polls)
        })
        .collect();
    let mut ends = Vec::new();
    for (task, _) in calls.iter_mut() {
        ends.push(task.await.unwrap() - t0);
    }
    let polls = calls
        .iter()
        .map(|(_, p)| p.load(Ordering::Relaxed))
        .collect();
    (polls, ends)
}

/// How many of `polls` are each number.
fn tally(polls: &[u32]) -> std::collections::BTreeMap<u32, usize> {
    polls.iter().fold(Default::default(), |mut counts, &n| {
        *counts.entry(n).or_default() += 1;
        counts
    })
}

#[tokio::test(start_paused = true)]
async fn a_release_wakes_each_of_1000_waiters_once() {
    let upstream = Upstream::new("crowd");
    let (polls, ends) = crowd(
        &upstream,
        |upstream| async move { succeeds(&upstream).await },
    )
    .await;
    // The first task polled takes the probe's turn: its first poll finds
    // the hold and sleeps to its end, the second (its timer) runs the
    // attempt, whose success releases the others: 2 polls.
    assert_eq!(polls[0], 2, "the probe");
    assert_eq!(ends[0], Duration::from_secs(10));
    // Every other waiter: its first poll finds the probe's turn taken and
    // waits for the outcome; the release wakes it once (it then sleeps its
    // share of the spread, a tenth of the 10 s hold: at most 1 s); its
    // timer wakes it once more and its attempt goes. 3 polls, whatever the
    // number of waiters: no waiter is woken by another's start.
    assert_eq!(tally(&polls[1..]), [(3, WAITERS - 1)].into());
    assert!(
        ends[1..]
            .iter()
            .all(|&at| at > Duration::from_secs(10) && at <= Duration::from_secs(11)),
        "released over the spread"
    );
}

/// One attempt that succeeds, unless it is the first of all the calls
/// given `pushed`: that one meets a 429 asking for 2 s.
#[retry(layer = "provider", upstream = upstream)]
async fn pushed_back_once(upstream: &Upstream, pushed: &AtomicBool) -> Result<(), Error> {
    first_pushed_back(pushed)
}

#[tokio::test(start_paused = true)]
async fn a_probe_pushed_back_again_wakes_each_waiter_once_more() {
    // A declared quota far above the crowd: its 429 holds, and turns no
    // adaptive rate on (that is for upstreams that know no limit).
    let upstream =
        Upstream::new("crowd").with_quota(Quota::per(Duration::from_secs(1)).requests(1_000_000));
    let pushed = Arc::new(AtomicBool::new(false));
    let (polls, ends) = crowd(&upstream, |upstream| {
        let pushed = pushed.clone();
        async move { pushed_back_once(&upstream, &pushed).await }
    })
    .await;
    // The probe's 429 holds the upstream to 12 s and wakes the waiters
    // once: the first of them takes the next probe's turn (sleeping to
    // 12 s, then releasing the others: 3 polls), the others wait again.
    // So each of those is polled once more than after a release at once:
    // its first poll, the 429's wake, the release's, its spread's timer.
    assert_eq!(polls[1], 3, "the second probe");
    assert_eq!(ends[1], Duration::from_secs(12));
    assert_eq!(tally(&polls[2..]), [(4, WAITERS - 2)].into());
    // The first probe's call retries at 12 s, after the 429's hint: as the
    // second probe's timer fires at the same instant, it goes at once (3
    // polls) or, polled first, waits for that probe's outcome (5).
    assert!(matches!(polls[0], 3 | 5), "{}", polls[0]);
    assert!(
        ends.iter()
            .all(|&at| at >= Duration::from_secs(12) && at <= Duration::from_millis(12_200)),
        "released over a tenth of the 2 s hold"
    );
}

/// One attempt of `script` per attempt of the call.
#[retry(layer = "provider", upstream = upstream)]
async fn scripted(upstream: &Upstream, script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn a_429_without_a_hint_holds_the_upstream_for_the_backoff_its_call_drew() {
    let upstream = Upstream::new("no-hint");
    let script = Script::new(1, ProviderError::rate_limited(None));
    let log = Arc::new(Log::default());
    let t0 = tokio::time::Instant::now();
    let call = observe(log.clone(), scripted(&upstream, &script));
    let other = async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let held = upstream.held_for();
        succeeds(&upstream).await.unwrap();
        (held, t0.elapsed())
    };
    let (result, (held, other_went)) = tokio::join!(call, other);
    assert_eq!(result, Ok(2));
    let events = log.0.lock().unwrap().clone();
    let backoff = events[0].delay.expect("retried after its backoff");
    assert!(!events[0].from_hint, "{events:?}");
    assert_eq!(
        held,
        Some(backoff - Duration::from_millis(1)),
        "held for it"
    );
    assert!(other_went >= backoff, "the other call waited it out too");
}

#[retry(layer = "provider", upstream = upstream)]
#[timeout(total = "2s")]
async fn within_2s(upstream: &Upstream, script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn a_hold_past_the_calls_total_fails_it_at_once_with_held() {
    let script = Script::new(0, ProviderError::status(500));
    // 5 s: well within the provider's cap, but past the call's 2 s total.
    let upstream = Upstream::new("total");
    upstream.hold_for(Duration::from_secs(5));
    let t0 = tokio::time::Instant::now();
    let result = within_2s(&upstream, &script).await;
    let Err(ProviderError::Held(held)) = result else {
        panic!("waited: {result:?}")
    };
    assert_eq!(t0.elapsed(), Duration::ZERO, "at once");
    assert_eq!(held.left(), Duration::from_secs(5));
    assert_eq!(script.attempts(), 0, "nothing sent");
    // A hold within the total is waited.
    let upstream = Upstream::new("total");
    upstream.hold_for(Duration::from_secs(1));
    assert_eq!(within_2s(&upstream, &script).await, Ok(1));
    assert_eq!(t0.elapsed(), Duration::from_secs(1));
}
