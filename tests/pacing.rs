//! An upstream that paces (paused clock): a declared quota spends each
//! dimension as a bucket refilling over its window, waiters start in the
//! order they came, a cancelled waiter strands nobody, headers teach and
//! correct the limits, a cold upstream sends one scout first, a 429
//! without headers turns the adaptive rate on, and a call that waited says
//! why.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nika_retry::events::{Outcome, RetryEvent, RetryObserver, WaitReason, observe};
use nika_retry::upstream::{Held, LimitSource, Quota, Upstream};
use nika_retry::{Classify, ErrorCategory, retry, timeout};
use nika_retry_tests::{ProviderError, Script};
use tokio::time::Instant;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("rate limited")]
    #[category(rate_limited)]
    RateLimited,
    /// A failure for good (a 400): never retried.
    #[error("bad request")]
    #[category(permanent)]
    Bad,
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

type Starts = Arc<Mutex<Vec<(usize, Duration)>>>;

/// One attempt that notes when it started (`i`: the caller), then takes
/// `busy`.
#[retry(layer = "provider", upstream = upstream, cost = cost)]
async fn costing(
    upstream: &Upstream,
    cost: u32,
    i: usize,
    starts: &Starts,
    t0: Instant,
    busy: Duration,
) -> Result<(), Error> {
    starts.lock().unwrap().push((i, t0.elapsed()));
    tokio::time::sleep(busy).await;
    Ok(())
}

/// The callers of one test: each spawned `costing` call (caller `i`)
/// notes when it started, counted from now, in `starts`.
fn callers(
    upstream: Upstream,
    cost: u32,
    busy: Duration,
) -> (
    Starts,
    impl Fn(usize) -> tokio::task::JoinHandle<Result<(), Error>>,
) {
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    let noted = starts.clone();
    let spawn = move |i: usize| {
        let (upstream, starts) = (upstream.clone(), noted.clone());
        tokio::spawn(async move { costing(&upstream, cost, i, &starts, t0, busy).await })
    };
    (starts, spawn)
}

/// The same without `cost`: its attempts spend the mean cost learned.
#[retry(layer = "provider", upstream = upstream)]
async fn plain(
    upstream: &Upstream,
    i: usize,
    starts: &Starts,
    t0: Instant,
    headers: &[(&str, &str)],
) -> Result<(), Error> {
    starts.lock().unwrap().push((i, t0.elapsed()));
    tokio::time::sleep(Duration::from_millis(10)).await;
    upstream.observe(headers);
    Ok(())
}

/// `n` calls of `costing` started in order (each polled once before the
/// next is spawned), and when each started.
async fn fan_out(
    upstream: &Upstream,
    n: usize,
    cost: u32,
    busy: Duration,
) -> Vec<(usize, Duration)> {
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..n {
        let (upstream, starts) = (upstream.clone(), starts.clone());
        tasks.push(tokio::spawn(async move {
            costing(&upstream, cost, i, &starts, t0, busy).await
        }));
        tokio::task::yield_now().await;
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let mut starts = starts.lock().unwrap().clone();
    starts.sort_by_key(|&(_, at)| at);
    starts
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(start_paused = true)]
async fn a_declared_quota_lets_its_burst_go_then_one_per_refill_in_arrival_order() {
    let upstream =
        Upstream::new("quota").with_quota(Quota::per(Duration::from_secs(1)).requests(2));
    let starts = fan_out(&upstream, 6, 1, ms(5)).await;
    let at: Vec<Duration> = starts.iter().map(|s| s.1).collect();
    // Each waiter a fortieth of the window (25 ms) after its refill: the
    // server's refill counts from when the requests before reached it.
    assert_eq!(at, [ms(0), ms(0), ms(525), ms(1025), ms(1525), ms(2025)]);
    let order: Vec<usize> = starts.iter().map(|s| s.0).collect();
    assert_eq!(order, [0, 1, 2, 3, 4, 5], "first come, first served");
    let requests = upstream.limits().requests.unwrap();
    assert_eq!(requests.in_flight, 0, "every attempt's cost given back");
}

#[tokio::test(start_paused = true)]
async fn tokens_are_paced_by_each_calls_cost() {
    let upstream =
        Upstream::new("tokens").with_quota(Quota::per(Duration::from_secs(1)).tokens(1000));
    let starts = fan_out(&upstream, 4, 400, ms(5)).await;
    let at: Vec<Duration> = starts.iter().map(|s| s.1).collect();
    // 1 000 whole: 400 and 400 at once; then 400 more each 400 ms (and
    // the 25 ms margin).
    assert_eq!(at, [ms(0), ms(0), ms(225), ms(625)]);
    assert_eq!(
        upstream.limits().tokens.unwrap().in_flight,
        0,
        "every attempt's tokens given back when it ended"
    );
}

#[tokio::test(start_paused = true)]
async fn requests_and_tokens_both_hold_before_an_attempt_starts() {
    let quota = Quota::per(Duration::from_secs(1)).requests(10).tokens(300);
    let upstream = Upstream::new("both").with_quota(quota);
    // Tokens bind: 100 each, 300 a second.
    let starts = fan_out(&upstream, 5, 100, ms(1)).await;
    let at: Vec<Duration> = starts.iter().map(|s| s.1).collect();
    assert_eq!(at[..3], [ms(0), ms(0), ms(0)]);
    assert!(at[3] >= ms(358) && at[3] <= ms(359), "{at:?}");
    assert!(at[4] >= ms(691) && at[4] <= ms(692), "{at:?}");
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_strands_nobody() {
    let upstream =
        Upstream::new("cancel").with_quota(Quota::per(Duration::from_secs(1)).requests(1));
    let (starts, spawn) = callers(upstream.clone(), 1, ms(1));
    let first = spawn(0);
    tokio::task::yield_now().await;
    let second = spawn(1);
    tokio::task::yield_now().await;
    let third = spawn(2);
    tokio::task::yield_now().await;
    tokio::time::sleep(ms(300)).await;
    second.abort();
    first.await.unwrap().unwrap();
    third.await.unwrap().unwrap();
    assert!(second.await.unwrap_err().is_cancelled());
    let starts = starts.lock().unwrap().clone();
    assert_eq!(
        starts,
        [(0, ms(0)), (2, ms(1025))],
        "the third, next in the queue, took the refill the second left"
    );
    // The cancelled head gave its place back, and no double start came of
    // it; nothing of it is counted as in flight.
    assert_eq!(upstream.limits().requests.unwrap().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_comes_while_others_queue_goes_behind_them() {
    let quota = Quota::per(Duration::from_secs(1)).requests(10).tokens(1000);
    let upstream = Upstream::new("queue").with_quota(quota);
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    let spawn = |i: usize, cost: u32| {
        let (upstream, starts) = (upstream.clone(), starts.clone());
        tokio::spawn(async move { costing(&upstream, cost, i, &starts, t0, ms(1)).await })
    };
    // The tokens of a window each: one goes, two queue for the refills.
    let mut calls = Vec::new();
    for i in 0..3 {
        calls.push(spawn(i, 1000));
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(ms(100)).await;
    // One that spends no tokens: the requests have room for it now, but
    // it came after the two waiting, and goes after them.
    calls.push(spawn(3, 0));
    for call in calls {
        call.await.unwrap().unwrap();
    }
    let order: Vec<usize> = starts.lock().unwrap().iter().map(|s| s.0).collect();
    assert_eq!(order, [0, 1, 2, 3], "first come, first served");
}

/// A first call spends the whole of its upstream's one dimension (`cost`);
/// a second, waiting for the refill, is cancelled at 300 ms; a third comes
/// at 400 ms. When each started.
async fn a_cancelled_waiters_place(upstream: &Upstream, cost: u32) -> Vec<(usize, Duration)> {
    let (starts, spawn) = callers(upstream.clone(), cost, ms(1));
    let first = spawn(0);
    tokio::task::yield_now().await;
    let second = spawn(1);
    tokio::time::sleep(ms(300)).await;
    second.abort();
    assert!(second.await.unwrap_err().is_cancelled());
    tokio::time::sleep(ms(100)).await;
    let third = spawn(2);
    first.await.unwrap().unwrap();
    third.await.unwrap().unwrap();
    starts.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_gives_its_request_back() {
    let upstream =
        Upstream::new("cancel").with_quota(Quota::per(Duration::from_secs(1)).requests(1));
    let starts = a_cancelled_waiters_place(&upstream, 1).await;
    // The last reservation gave its refill back: the third takes its
    // place (the refill and its 25 ms margin), not the one after it.
    assert_eq!(starts, [(0, ms(0)), (2, ms(1025))]);
    assert_eq!(upstream.limits().requests.unwrap().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_gives_its_tokens_back() {
    let upstream =
        Upstream::new("cancel").with_quota(Quota::per(Duration::from_secs(1)).tokens(1000));
    let starts = a_cancelled_waiters_place(&upstream, 1000).await;
    assert_eq!(starts, [(0, ms(0)), (2, ms(1025))]);
    assert_eq!(
        upstream.limits().tokens.unwrap().in_flight,
        0,
        "nothing of the cancelled reservation is still counted"
    );
}

const OPENAI: [(&str, &str); 6] = [
    ("x-ratelimit-limit-requests", "4"),
    ("x-ratelimit-remaining-requests", "3"),
    ("x-ratelimit-reset-requests", "250ms"),
    ("x-ratelimit-limit-tokens", "1000"),
    ("x-ratelimit-remaining-tokens", "800"),
    ("x-ratelimit-reset-tokens", "200ms"),
];

#[tokio::test(start_paused = true)]
async fn limits_learned_from_openais_headers() {
    let upstream = Upstream::new("openai/gpt-4o");
    upstream.observe(&OPENAI[..]);
    let limits = upstream.limits();
    let requests = limits.requests.unwrap();
    assert_eq!((requests.limit, requests.level), (4, 3));
    assert_eq!(requests.window, Duration::from_secs(1), "250 ms for 1 of 4");
    assert_eq!(requests.refill, 4.0);
    assert_eq!(requests.source, LimitSource::Learned);
    let tokens = limits.tokens.unwrap();
    assert_eq!((tokens.limit, tokens.level), (1000, 800));
    // 200 ms for 200 of 1 000, read as 199 and a bit (a server that rounds
    // what is left down): at most 1.005 s.
    assert_eq!(tokens.window, Duration::from_nanos(1_005_025_125));
    assert_eq!(limits.mean_cost, Some(200), "200 tokens for one request");
    assert!(!limits.cold_start);
}

#[tokio::test(start_paused = true)]
async fn the_servers_remaining_corrects_the_estimate() {
    let upstream = Upstream::new("corrected");
    upstream.observe(&OPENAI[..]);
    // The server says that only one request is left now (a rolling window).
    upstream.observe(
        &[
            ("x-ratelimit-limit-requests", "4"),
            ("x-ratelimit-remaining-requests", "1"),
            ("x-ratelimit-reset-requests", "750ms"),
        ][..],
    );
    let starts = fan_out(&upstream, 3, 0, ms(1)).await;
    let at: Vec<Duration> = starts.iter().map(|s| s.1).collect();
    // One left, then the refill: 3 missing, whole in 750 ms, may be 2 and
    // a bit (what is left rounded down): a window of at most 1.5 s.
    assert_eq!(at, [ms(0), ms(375), ms(750)], "one left, then the refill");
    // A later response says that all 4 are back (a fixed window that reset).
    upstream.observe(
        &[
            ("x-ratelimit-limit-requests", "4"),
            ("x-ratelimit-remaining-requests", "4"),
            ("x-ratelimit-reset-requests", "0s"),
        ][..],
    );
    assert_eq!(upstream.limits().requests.unwrap().level, 4);
}

#[tokio::test(start_paused = true)]
async fn headers_lower_a_declared_quota_never_raise_it() {
    let upstream =
        Upstream::new("declared").with_quota(Quota::per(Duration::from_secs(1)).requests(2));
    upstream.observe(&OPENAI[..]);
    let requests = upstream.limits().requests.unwrap();
    assert_eq!(
        (requests.limit, requests.source),
        (2, LimitSource::Declared)
    );
    upstream.observe(
        &[
            ("x-ratelimit-limit-requests", "1"),
            ("x-ratelimit-remaining-requests", "1"),
        ][..],
    );
    let requests = upstream.limits().requests.unwrap();
    assert_eq!((requests.limit, requests.source), (1, LimitSource::Learned));
}

#[tokio::test(start_paused = true)]
async fn calls_without_cost_spend_the_mean_learned_from_the_token_headers() {
    let upstream = Upstream::new("mean");
    upstream.observe(&OPENAI[..]);
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    // Enough requests (4 a second); tokens bind: 800 left, 200 per attempt.
    let headers: &'static [(&str, &str)] = &[];
    let calls = (0..6).map(|i| plain(&upstream, i, &starts, t0, headers));
    for r in futures_util::future::join_all(calls).await {
        r.unwrap();
    }
    let mut at: Vec<Duration> = starts.lock().unwrap().iter().map(|s| s.1).collect();
    at.sort();
    // Requests: 3 left, then one each 250 ms; tokens: 4 of 200 left, then
    // one each 200 ms. The requests bind first.
    assert_eq!(at[..3], [ms(0), ms(0), ms(0)], "{at:?}");
    assert!(at[3] >= ms(200), "{at:?}");
    assert!(at[5] >= ms(600), "{at:?}");
}

#[tokio::test(start_paused = true)]
async fn a_cold_upstream_sends_one_scout_and_the_rest_after_its_headers() {
    let upstream = Upstream::new("cold");
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    let calls = (0..5).map(|i| plain(&upstream, i, &starts, t0, &OPENAI));
    futures_util::future::join_all(calls).await;
    let mut at: Vec<Duration> = starts.lock().unwrap().iter().map(|s| s.1).collect();
    at.sort();
    assert_eq!(at[0], ms(0), "the scout");
    assert!(
        at[1..].iter().all(|&t| t >= ms(10)),
        "the others after its headers (10 ms): {at:?}"
    );
    assert!(!upstream.limits().cold_start);
}

#[tokio::test(start_paused = true)]
async fn a_cold_start_waits_at_most_its_max_and_ends_with_the_scout() {
    // The scout takes 5 s and reads no headers: the others go at 1 s.
    let upstream = Upstream::new("slow scout");
    let starts = fan_out(&upstream, 3, 0, Duration::from_secs(5)).await;
    let at: Vec<Duration> = starts.iter().map(|s| s.1).collect();
    assert_eq!(at, [ms(0), ms(1000), ms(1000)]);
    // A scout that ends without headers ends the cold start at once.
    let upstream = Upstream::new("quick scout").with_cold_start(Duration::from_secs(30));
    let starts = fan_out(&upstream, 3, 0, ms(40)).await;
    let at: Vec<Duration> = starts.iter().map(|s| s.1).collect();
    assert_eq!(at, [ms(0), ms(40), ms(40)]);
    // Off: all at once.
    let upstream = Upstream::new("no cold start").with_cold_start(Duration::ZERO);
    let starts = fan_out(&upstream, 3, 0, ms(40)).await;
    assert!(starts.iter().all(|s| s.1 == ms(0)), "{starts:?}");
    let limits = upstream.limits();
    assert_eq!(
        (limits.requests, limits.cold_start),
        (None, false),
        "paces nothing"
    );
}

/// A first attempt that fails with a header-less 429, then succeeds.
#[retry(layer = "provider", upstream = upstream, backoff = "10ms")]
async fn limited_once(upstream: &Upstream, failed: &Mutex<bool>) -> Result<(), Error> {
    let mut failed = failed.lock().unwrap();
    if !*failed {
        *failed = true;
        return Err(Error::RateLimited);
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_429_without_headers_turns_the_adaptive_rate_on() {
    let upstream = Upstream::new("silent").with_cold_start(Duration::ZERO);
    assert_eq!(upstream.limits().requests, None);
    limited_once(&upstream, &Mutex::new(false)).await.unwrap();
    let requests = upstream.limits().requests.unwrap();
    assert_eq!(requests.source, LimitSource::Adapted);
    assert!(requests.refill >= 0.5, "{requests:?}");
    // A server that sends headers is followed, not adapted to.
    let upstream = Upstream::new("talkative").with_cold_start(Duration::ZERO);
    upstream.observe(&OPENAI[..]);
    limited_once(&upstream, &Mutex::new(false)).await.unwrap();
    assert_eq!(
        upstream.limits().requests.unwrap().source,
        LimitSource::Learned
    );
}

/// An event's outcome, attempt, wait at the upstream and why.
type Wait = (
    Outcome,
    u32,
    Option<ErrorCategory>,
    Option<Duration>,
    Option<WaitReason>,
);

#[derive(Default)]
struct Waits(Mutex<Vec<Wait>>, Mutex<Vec<String>>);

impl RetryObserver for Waits {
    fn on_event(&self, e: &RetryEvent) {
        let seen = (
            e.outcome,
            e.attempt,
            e.category,
            e.upstream_wait,
            e.wait_reason,
        );
        self.0.lock().unwrap().push(seen);
        self.1.lock().unwrap().push(e.to_string());
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_that_waited_says_why_when_its_first_attempt_succeeds() {
    let upstream =
        Upstream::new("visible").with_quota(Quota::per(Duration::from_secs(1)).requests(1));
    let waits = Arc::new(Waits::default());
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    let both = async {
        let first = costing(&upstream, 0, 0, &starts, t0, ms(1));
        let second = costing(&upstream, 0, 1, &starts, t0, ms(1));
        let (a, b) = tokio::join!(first, second);
        a.and(b)
    };
    observe(waits.clone(), both).await.unwrap();
    let lines = waits.1.lock().unwrap().clone();
    assert!(
        lines[0].ends_with("after waiting 1s 25ms at its upstream (paced to its limits)"),
        "{lines:?}"
    );
    let waits = waits.0.lock().unwrap().clone();
    assert_eq!(
        waits,
        [(
            Outcome::Recovered,
            1,
            None,
            Some(ms(1025)),
            Some(WaitReason::Paced)
        )],
        "one event, of the call that waited, with no failure's category"
    );
}

#[tokio::test(start_paused = true)]
async fn a_scout_cancelled_mid_attempt_lets_the_others_go_at_once() {
    let upstream = Upstream::new("cancelled scout");
    let (starts, spawn) = callers(upstream.clone(), 0, ms(500));
    let scout = spawn(0);
    tokio::task::yield_now().await;
    let others = [spawn(1), spawn(2)];
    tokio::task::yield_now().await;
    tokio::time::sleep(ms(100)).await;
    scout.abort();
    for other in others {
        other.await.unwrap().unwrap();
    }
    let mut starts = starts.lock().unwrap().clone();
    starts.sort();
    assert_eq!(
        starts,
        [(0, ms(0)), (1, ms(100)), (2, ms(100))],
        "not the 1 s max"
    );
    assert!(!upstream.limits().cold_start);
}

/// The server's headers as it admitted the reading attempt: 4 requests a
/// second, 3 left (it counted that attempt's own request alone).
const OWN_ONLY: [(&str, &str); 3] = [
    ("x-ratelimit-limit-requests", "4"),
    ("x-ratelimit-remaining-requests", "3"),
    ("x-ratelimit-reset-requests", "250ms"),
];

#[tokio::test(start_paused = true)]
async fn the_reading_attempts_own_request_is_counted_once() {
    let upstream = Upstream::new("own").with_quota(Quota::per(Duration::from_secs(1)).requests(4));
    let starts: Starts = Arc::default();
    plain(&upstream, 0, &starts, Instant::now(), &OWN_ONLY)
        .await
        .unwrap();
    // The server counted the reader's request, which was in flight as it
    // read: 3 are left, not 2.
    assert_eq!(upstream.limits().requests.unwrap().level, 3);
    let starts = fan_out(&upstream, 3, 0, ms(1)).await;
    assert!(starts.iter().all(|s| s.1 == ms(0)), "{starts:?}");
}

/// One attempt that notes its start and takes 100 ms; the scout's (caller
/// 0) succeeds without a word of the limits, the others' fail for good.
#[retry(layer = "provider", upstream = upstream)]
async fn scout_then_refused(
    upstream: &Upstream,
    i: usize,
    starts: &Starts,
    t0: Instant,
) -> Result<(), Error> {
    starts.lock().unwrap().push((i, t0.elapsed()));
    tokio::time::sleep(ms(100)).await;
    if i == 0 { Ok(()) } else { Err(Error::Bad) }
}

#[tokio::test(start_paused = true)]
async fn a_failed_attempt_gives_its_ramp_slot_back_and_widens_nothing() {
    let upstream = Upstream::new("ramp");
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    let calls = (0..9).map(|i| scout_then_refused(&upstream, i, &starts, t0));
    let results = futures_util::future::join_all(calls).await;
    assert!(results[0].is_ok() && results[1..].iter().all(Result::is_err));
    let mut at: Vec<Duration> = starts.lock().unwrap().iter().map(|s| s.1).collect();
    at.sort();
    // The scout, then the ramp's 2 out at once: each failure gives its
    // slot to the next, where a success would open one more (2, 4, 8).
    assert_eq!(
        at,
        [0, 100, 100, 200, 200, 300, 300, 400, 400].map(ms),
        "{at:?}"
    );
}

/// One attempt, refused by a 429 that says nothing (no hint, no
/// rate-limit headers), and not retried.
#[retry(layer = "provider", upstream = upstream, attempts = 1)]
async fn refused(upstream: &Upstream) -> Result<(), Error> {
    Err(Error::RateLimited)
}

#[tokio::test(start_paused = true)]
async fn an_adapted_rate_paces_at_its_rate_whatever_429s_it_meets() {
    let upstream = Upstream::new("adapted").with_cold_start(Duration::ZERO);
    // Nothing sent for 10 s, then a 429: the slowest rate, one each 2 s.
    tokio::time::sleep(Duration::from_secs(10)).await;
    refused(&upstream).await.unwrap_err();
    // An attempt admitted at that rate meets a 429 too: the rate, not a
    // margin for the way to a server that counts, is what it adapts.
    refused(&upstream).await.unwrap_err();
    let requests = upstream.limits().requests.unwrap();
    assert_eq!(requests.source, LimitSource::Adapted);
    let interval = requests.window / u32::try_from(requests.limit).unwrap();
    let starts = fan_out(&upstream, 1, 0, ms(1)).await;
    assert_eq!(
        starts[0].1, interval,
        "one interval after the last, no more"
    );
}

#[tokio::test(start_paused = true)]
async fn an_attempt_paced_into_a_hold_waits_for_the_hold_to_end() {
    let upstream = Upstream::new("paced, then held")
        .with_quota(Quota::per(Duration::from_secs(1)).requests(1));
    let (starts, spawn) = callers(upstream.clone(), 1, ms(1));
    let first = spawn(0);
    tokio::task::yield_now().await;
    // Paced to 1 025 ms; held at 500 ms until 2 500 ms.
    let second = spawn(1);
    tokio::time::sleep(ms(500)).await;
    upstream.hold_for(Duration::from_secs(2));
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts[0], (0, ms(0)));
    assert!(
        starts[1].1 >= ms(2500),
        "started inside the hold: {starts:?}"
    );
}

#[retry(layer = "provider", upstream = upstream)]
#[timeout(total = "500ms")]
async fn within_500ms(upstream: &Upstream, script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

#[tokio::test(start_paused = true)]
async fn a_pace_past_the_calls_total_fails_it_at_once_with_held() {
    let upstream =
        Upstream::new("deadline").with_quota(Quota::per(Duration::from_secs(1)).requests(1));
    let script = Script::new(0, ProviderError::status(500));
    assert_eq!(within_500ms(&upstream, &script).await, Ok(1));
    // The next request is a second away: past the call's 500 ms total.
    let t0 = Instant::now();
    let result = within_500ms(&upstream, &script).await;
    let Err(ProviderError::Held(held)) = result else {
        panic!("waited: {result:?}")
    };
    assert_eq!(t0.elapsed(), Duration::ZERO, "at once");
    assert!(held.left() > ms(500), "{held:?}");
    assert_eq!(script.attempts(), 1, "nothing sent");
}

/// One attempt that notes its start and takes 100 ms; caller 0 reads
/// `headers` 10 ms in, as its response's.
#[retry(layer = "provider", upstream = upstream)]
async fn first_reads(
    upstream: &Upstream,
    i: usize,
    starts: &Starts,
    t0: Instant,
    headers: &[(&str, &str)],
) -> Result<(), Error> {
    starts.lock().unwrap().push((i, t0.elapsed()));
    tokio::time::sleep(ms(10)).await;
    if i == 0 {
        upstream.observe(headers);
    }
    tokio::time::sleep(ms(90)).await;
    Ok(())
}

/// As a window server writes them when it admits the first of a burst:
/// 1 of 4 spent, whole again when the window ends in 1 s (a refill would
/// be whole in 250 ms).
const WINDOW_OF_ONE: [(&str, &str); 3] = [
    ("x-ratelimit-limit-requests", "4"),
    ("x-ratelimit-remaining-requests", "3"),
    ("x-ratelimit-reset-requests", "1s"),
];

#[tokio::test(start_paused = true)]
async fn a_window_read_mid_burst_counts_the_attempts_still_in_flight() {
    let upstream =
        Upstream::new("window").with_quota(Quota::per(Duration::from_secs(1)).requests(4));
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    // 3 at once; the first reads, 10 ms in, that the server counts by
    // window, and that it counted that one: the other 2 are on their way.
    let burst = (0..3).map(|i| first_reads(&upstream, i, &starts, t0, &WINDOW_OF_ONE));
    let later = async {
        tokio::time::sleep(ms(20)).await;
        let calls = (3..6).map(|i| first_reads(&upstream, i, &starts, t0, &WINDOW_OF_ONE));
        futures_util::future::join_all(calls).await
    };
    let (burst, later) = tokio::join!(futures_util::future::join_all(burst), later);
    assert!(burst.iter().chain(&later).all(Result::is_ok));
    let mut at: Vec<Duration> = starts.lock().unwrap().iter().map(|s| s.1).collect();
    at.sort();
    // The server's window holds 4 from the first start.
    let in_first_window = at.iter().filter(|&&t| t < Duration::from_secs(1)).count();
    assert!(in_first_window <= 4, "{at:?}");
    assert_eq!(at.len(), 6);
}
