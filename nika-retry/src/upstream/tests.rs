use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::*;
use crate::ErrorCategory;
use crate::events::{RetryEvent, RetryObserver, observe};

const S: Duration = Duration::from_secs(1);
const CAP: Duration = Duration::from_secs(60);

#[tokio::test(start_paused = true)]
async fn holds_only_ever_extend() {
    let u = Upstream::new("u");
    u.hold_for(10 * S);
    u.hold_for(2 * S);
    assert_eq!(u.held_for(), Some(10 * S));
    u.hold_for(30 * S);
    assert_eq!(u.held_for(), Some(30 * S));
    u.hold_for(Duration::MAX);
    assert_eq!(u.held_for(), Some(MAX_HOLD));
}

#[tokio::test(start_paused = true)]
async fn no_attempt_starts_while_held() {
    let u = Upstream::new("u");
    u.hold_for(20 * S);
    let start = Instant::now();
    let t = u.pass(None, CAP).await.unwrap();
    assert_eq!(start.elapsed(), 20 * S);
    assert!(t.is_probe());
    t.succeeded();
    assert!(u.is_open());
}

#[tokio::test(start_paused = true)]
async fn a_hold_past_the_cap_or_the_deadline_is_held_at_once() {
    let u = Upstream::new("u");
    u.hold_for(90 * S);
    let held = u.pass(None, CAP).await.unwrap_err();
    assert_eq!((held.upstream(), held.left()), ("u", 90 * S));
    let held = u
        .pass(Some(Instant::now() + 89 * S), 120 * S)
        .await
        .unwrap_err();
    assert_eq!(held.reason(), HoldReason::ByHand);
    // At the deadline exactly, it waits.
    let t = u.pass(Some(Instant::now() + 90 * S), 90 * S).await.unwrap();
    t.succeeded();
}

/// When each waiter was let through, and whether it was the probe.
type Passes = Arc<Mutex<Vec<(Duration, bool)>>>;

/// Spawns `n` waiters; each records when it was let through and whether it was the probe.
fn waiters(u: &Upstream, n: usize) -> (Passes, Vec<tokio::task::JoinHandle<()>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let tasks = (0..n)
        .map(|_| {
            let (u, log) = (u.clone(), log.clone());
            tokio::spawn(async move {
                let t = u.pass(None, CAP).await.unwrap();
                log.lock().unwrap().push((start.elapsed(), t.is_probe()));
                if t.is_probe() {
                    // The probe's attempt takes a second.
                    tokio::time::sleep(S).await;
                }
                t.succeeded();
            })
        })
        .collect();
    (log, tasks)
}

#[tokio::test(start_paused = true)]
async fn one_probe_then_the_rest_spread_over_a_tenth_of_the_hold() {
    let u = Upstream::new("u");
    u.hold_for(5 * S);
    let (log, tasks) = waiters(&u, 50);
    for t in tasks {
        t.await.unwrap();
    }
    let log = log.lock().unwrap();
    assert_eq!(log.iter().filter(|(_, p)| *p).count(), 1);
    let probe = log.iter().find(|(_, p)| *p).unwrap().0;
    assert_eq!(probe, 5 * S);
    let rest: Vec<_> = log.iter().filter(|(_, p)| !*p).map(|(at, _)| *at).collect();
    assert_eq!(rest.len(), 49);
    // Released after the probe's outcome (at 6 s), within half a second.
    assert!(
        rest.iter().all(|at| *at >= 6 * S && *at <= 6 * S + S / 2),
        "{rest:?}"
    );
    // Spread, not together.
    let distinct: std::collections::BTreeSet<_> = rest.iter().collect();
    assert!(distinct.len() > 10, "{distinct:?}");
}

#[tokio::test(start_paused = true)]
async fn a_probe_pushed_back_extends_the_hold() {
    let u = Upstream::new("u");
    u.hold_for(S);
    let probe = u.pass(None, CAP).await.unwrap();
    assert!(probe.is_probe());
    let other = {
        let u = u.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let t = u.pass(None, CAP).await.unwrap();
            (start.elapsed(), t.is_probe())
        })
    };
    tokio::time::sleep(S).await;
    probe.failed(ErrorCategory::RateLimited, Some(10 * S), None);
    let (waited, was_probe) = other.await.unwrap();
    assert!(was_probe);
    assert_eq!(waited, 11 * S);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_passes_its_turn() {
    let u = Upstream::new("u");
    u.hold_for(S);
    let first = u.pass(None, CAP).await.unwrap();
    assert!(first.is_probe());
    let second = {
        let u = u.clone();
        tokio::spawn(async move { u.pass(None, CAP).await.unwrap().is_probe() })
    };
    tokio::task::yield_now().await;
    drop(first);
    assert!(second.await.unwrap());
    // The second probe's ticket was dropped too: the turn is owed still, taken by the next.
    assert!(u.pass(None, CAP).await.unwrap().is_probe());
}

#[tokio::test(start_paused = true)]
async fn cancelled_waiters_strand_nothing() {
    let u = Upstream::new("u");
    u.hold_for(S);
    let waiting: Vec<_> = (0..10)
        .map(|_| {
            let u = u.clone();
            tokio::spawn(async move { u.pass(None, CAP).await.map(|t| t.succeeded()) })
        })
        .collect();
    tokio::time::sleep(S / 2).await;
    for w in &waiting {
        w.abort();
    }
    let start = Instant::now();
    u.pass(None, CAP).await.unwrap().succeeded();
    assert_eq!(start.elapsed(), S / 2);
    assert!(u.is_open());
}

#[tokio::test(start_paused = true)]
async fn hintless_rate_limit_holds_for_the_drawn_backoff_only() {
    let u = Upstream::new("u");
    u.open_pass().failed(ErrorCategory::RateLimited, None, None);
    assert_eq!(u.held_for(), None);
    u.open_pass()
        .failed(ErrorCategory::Transient, None, Some(3 * S));
    assert_eq!(u.held_for(), None);
    u.open_pass()
        .failed(ErrorCategory::RateLimited, None, Some(3 * S));
    assert_eq!(u.held_for(), Some(3 * S));
    // A 503's hint holds too.
    u.open_pass()
        .failed(ErrorCategory::Transient, Some(7 * S), None);
    assert_eq!(u.held_for(), Some(7 * S));
}

#[tokio::test(start_paused = true)]
async fn the_allowance_lets_so_many_start_before_its_reset() {
    let u = Upstream::new("u");
    u.observe(
        &[
            ("x-ratelimit-remaining-requests", "2"),
            ("x-ratelimit-reset-requests", "10s"),
        ][..],
    );
    assert_eq!(u.held_for(), None);
    let start = Instant::now();
    for _ in 0..2 {
        u.pass(None, CAP).await.unwrap().succeeded();
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
    let third = u.pass(None, CAP).await.unwrap();
    assert_eq!(start.elapsed(), 10 * S);
    third.succeeded();
    // A later response replaces the count.
    u.observe(&[("RateLimit", "\"d\";r=1;t=5")][..]);
    u.observe(&[("RateLimit", "\"d\";r=3;t=5")][..]);
    let start = Instant::now();
    for _ in 0..3 {
        u.pass(None, CAP).await.unwrap().succeeded();
    }
    assert_eq!(start.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn spent_limits_hold_garbage_changes_nothing() {
    let u = Upstream::new("u");
    for garbage in ["-1", "0.5", "", "\u{7f}"] {
        u.observe(
            &[
                ("x-ratelimit-remaining-requests", garbage),
                ("x-ratelimit-reset-requests", "9s"),
            ][..],
        );
    }
    assert!(u.is_open());
    u.observe(
        &[
            ("anthropic-ratelimit-tokens-remaining", "0"),
            ("anthropic-ratelimit-tokens-reset", "9999-12-31T23:59:59Z"),
        ][..],
    );
    assert_eq!(u.held_for(), Some(MAX_HOLD));
}

#[tokio::test(start_paused = true)]
async fn the_breaker_opens_after_consecutive_transient_failures() {
    let u = Upstream::new("u").with_breaker(3, 30 * S);
    for _ in 0..2 {
        u.open_pass().failed(ErrorCategory::Transient, None, None);
    }
    u.open_pass().succeeded();
    for _ in 0..2 {
        u.open_pass().failed(ErrorCategory::Transient, None, None);
    }
    assert_eq!(u.held_for(), None);
    u.open_pass().failed(ErrorCategory::Transient, None, None);
    assert_eq!(u.held_for(), Some(30 * S));
    let held = u.pass(None, 10 * S).await.unwrap_err();
    assert_eq!(held.reason(), HoldReason::Breaker);
    // Off by default.
    let plain = Upstream::new("p");
    for _ in 0..100 {
        plain
            .open_pass()
            .failed(ErrorCategory::Transient, None, None);
    }
    assert!(plain.is_open());
}

#[derive(Default)]
struct Holds(Mutex<Vec<UpstreamEvent>>);

impl RetryObserver for Holds {
    fn on_event(&self, _: &RetryEvent) {}
    fn on_upstream(&self, e: &UpstreamEvent) {
        self.0.lock().unwrap().push(e.clone());
    }
}

#[tokio::test(start_paused = true)]
async fn one_event_per_hold_that_starts_or_grows() {
    let holds = Arc::new(Holds::default());
    let u = Upstream::new("openai/gpt-4o");
    observe(holds.clone(), async {
        u.hold_for(5 * S);
        u.hold_for(S);
        u.hold_for(8 * S);
        let waiting: Vec<_> = (0..20).map(|_| u.pass(None, CAP)).collect();
        for t in futures_join(waiting).await {
            drop(t);
        }
    })
    .await;
    let seen: Vec<_> = holds
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|e| (e.held_for, e.extended))
        .collect();
    assert_eq!(seen, [(5 * S, false), (8 * S, true)]);
}

/// Awaits every future in turn (they make progress together: holds are timers).
async fn futures_join<F: core::future::Future>(fs: Vec<F>) -> Vec<F::Output> {
    let mut out = Vec::new();
    for f in fs {
        out.push(f.await);
    }
    out
}

#[test]
fn upstream_is_send_sync_clone_debug() {
    fn check<T: Send + Sync + Clone + fmt::Debug>() {}
    check::<Upstream>();
    check::<Held>();
    let u = Upstream::new("x");
    assert!(format!("{u:?}").contains("\"x\""));
}
