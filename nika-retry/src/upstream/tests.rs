//! Upstreams that share a store: the probe's turn and the allowance across
//! them, on paused time with the in-process store (the Redis store's own
//! tests run against a real server: tests/fleet.rs).

use core::time::Duration;

use super::{HoldReason, InProcess, PROBE_LEASE, Patience, Store, Upstream};

const PATIENT: Patience = Patience {
    cap: Duration::from_secs(60),
    deadline: None,
};

fn pair(store: &InProcess) -> (Upstream, Upstream) {
    let a = Upstream::new("u").with_store(store.clone());
    let b = Upstream::new("u").with_store(store.clone());
    (a, b)
}

#[tokio::test(start_paused = true)]
async fn one_probe_for_upstreams_that_share_a_store() {
    let store = InProcess::default();
    let (a, b) = pair(&store);
    store.hold("u", Duration::from_secs(1), HoldReason::ByHand);
    let mut probe = a.pass(PATIENT).await.expect("a waits the hold out");
    assert!(probe.probe, "a goes first");
    let waiting = tokio::time::timeout(Duration::from_secs(3), b.pass(PATIENT)).await;
    assert!(waiting.is_err(), "b waits for a's probe");
    probe.settle(None, None);
    let mut turn = b.pass(PATIENT).await.expect("released");
    assert!(turn.probe, "b's own first attempt after the release");
    turn.settle(None, None);
    let turn = b.pass(PATIENT).await.expect("open");
    assert!(!turn.probe);
}

#[tokio::test(start_paused = true)]
async fn a_probe_that_never_comes_back_holds_the_others_only_for_its_lease() {
    let store = InProcess::default();
    let (_, b) = pair(&store);
    store.hold("u", Duration::from_secs(1), HoldReason::ByHand);
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Another process's probe took the turn, then crashed.
    assert_eq!(store.probe("u", 7).await.unwrap(), super::ProbeTurn::Go);
    let started = tokio::time::Instant::now();
    let mut turn = b.pass(PATIENT).await.expect("after the lease");
    assert!(started.elapsed() >= PROBE_LEASE - Duration::from_millis(200));
    assert!(started.elapsed() <= PROBE_LEASE + Duration::from_millis(200));
    turn.settle(None, None);
}

#[tokio::test(start_paused = true)]
async fn a_probe_pushed_back_again_holds_the_other_upstream_too() {
    let store = InProcess::default();
    let (a, b) = pair(&store);
    store.hold("u", Duration::from_secs(1), HoldReason::ByHand);
    let mut probe = a.pass(PATIENT).await.expect("a first");
    a.hold_for(Duration::from_secs(3600));
    probe.settle(None, None);
    let held = b.pass(PATIENT).await.err().expect("held past b's patience");
    assert_eq!(held.reason(), HoldReason::ByHand);
    assert!(held.left() > Duration::from_secs(3590));
}

#[tokio::test(start_paused = true)]
async fn an_allowance_observed_by_one_is_spent_by_the_other() {
    let store = InProcess::default();
    let (a, b) = pair(&store);
    a.observe(
        &[
            ("x-ratelimit-remaining-requests", "2"),
            ("x-ratelimit-reset-requests", "60s"),
        ][..],
    );
    for _ in 0..2 {
        b.pass(PATIENT).await.expect("allowed").settle(None, None);
    }
    let short = Patience {
        cap: Duration::from_secs(10),
        deadline: None,
    };
    let held = b.pass(short).await.err().expect("none left");
    assert_eq!(held.reason(), HoldReason::RateLimitHeaders);
}

#[tokio::test(start_paused = true)]
async fn a_paced_reading_leaves_no_allowance_to_hold_the_others() {
    // With the requests' limit known, the buckets count what is left: an
    // allowance in the store would hold every process for the whole reset
    // once spent, though a rolling window frees its oldest admissions
    // long before it (the fleet's slow runs on the rolling server).
    let store = InProcess::default();
    let (a, b) = pair(&store);
    a.observe(
        &[
            ("x-ratelimit-limit-requests", "20"),
            ("x-ratelimit-remaining-requests", "1"),
            ("x-ratelimit-reset-requests", "60s"),
        ][..],
    );
    let started = tokio::time::Instant::now();
    for _ in 0..2 {
        b.pass(PATIENT).await.expect("not held").settle(None, None);
    }
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "b waited for a reset"
    );
    assert_eq!(b.held_for(), None);
}

/// `upstream.pass(patience)` on a task of its own: whether its turn was the
/// probe's (`Err` if it gave up with `Held`), and when it ended.
fn spawn_pass(
    upstream: &Upstream,
    patience: Patience,
) -> tokio::task::JoinHandle<(Result<bool, super::Held>, tokio::time::Instant)> {
    let upstream = upstream.clone();
    tokio::spawn(async move {
        let turn = upstream.pass(patience).await;
        let probe = turn.as_ref().map(|turn| turn.probe).map_err(Clone::clone);
        if let Ok(mut turn) = turn {
            turn.settle(None, None);
        }
        (probe, tokio::time::Instant::now())
    })
}

fn patience(secs: u64) -> Patience {
    Patience {
        cap: Duration::from_secs(secs),
        deadline: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_will_not_wait_leaves_the_probes_turn_to_the_next() {
    let upstream = Upstream::new("u");
    let t0 = tokio::time::Instant::now();
    upstream.hold_for(Duration::from_secs(10));
    // First in line: its turn would be the probe's, but 10 s is past its cap.
    let held = upstream.pass(patience(1)).await.err().expect("not waited");
    assert_eq!(held.left(), Duration::from_secs(10));
    // A caller willing to wait takes the turn and goes when the hold ends
    // (bounded: a turn left "out" would strand it for ever).
    let patient = spawn_pass(&upstream, PATIENT);
    let (probe, ended) = tokio::time::timeout(Duration::from_secs(60), patient)
        .await
        .expect("not stranded")
        .unwrap();
    assert_eq!(probe.ok(), Some(true), "its turn is the probe's");
    assert_eq!(ended - t0, Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn a_turn_passed_on_to_a_caller_that_will_not_wait_reaches_the_one_behind() {
    let upstream = Upstream::new("u");
    let t0 = tokio::time::Instant::now();
    upstream.hold_for(Duration::from_secs(10));
    let first = spawn_pass(&upstream, PATIENT);
    tokio::time::sleep(Duration::from_millis(1)).await;
    // Waiting for the probe's outcome: one with a 20 s cap, one with 60 s.
    let short = spawn_pass(&upstream, patience(20));
    tokio::time::sleep(Duration::from_millis(1)).await;
    let long = spawn_pass(&upstream, PATIENT);
    tokio::time::sleep(Duration::from_millis(1)).await;
    // Held longer meanwhile, and the probe cancelled: its turn goes to the
    // first waiter, which will not wait 30 s and passes it on in turn.
    upstream.hold_for(Duration::from_secs(30));
    first.abort();
    let bound = Duration::from_secs(120);
    let (short, _) = tokio::time::timeout(bound, short).await.unwrap().unwrap();
    assert!(short.is_err(), "30 s is past its cap: {short:?}");
    let (long, ended) = tokio::time::timeout(bound, long)
        .await
        .expect("the turn reached it")
        .unwrap();
    assert_eq!(long.ok(), Some(true), "the probe's turn");
    assert_eq!(
        ended - t0,
        Duration::from_secs(30) + Duration::from_millis(3)
    );
}

#[tokio::test(start_paused = true)]
async fn a_released_probe_lets_the_other_upstream_go_at_once_not_after_its_lease() {
    let store = InProcess::default();
    let (a, b) = pair(&store);
    store.hold("u", Duration::from_secs(1), HoldReason::ByHand);
    let mut probe = a.pass(PATIENT).await.expect("a first");
    assert!(probe.probe);
    // a's probe is out: b's own probe waits for its outcome in the store.
    let waiting = spawn_pass(&b, PATIENT);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "b waits for a's probe");
    let released = tokio::time::Instant::now();
    probe.settle(None, None);
    let (turn, ended) = waiting.await.unwrap();
    assert!(turn.is_ok());
    // b asks the store about every 100 ms (± half): within two of those,
    // nowhere near the 5 s lease.
    assert!(
        ended - released <= Duration::from_millis(300),
        "{:?}",
        ended - released
    );
}

#[tokio::test(start_paused = true)]
async fn a_probe_whose_hold_grows_past_its_patience_gives_up_and_the_waiters_too() {
    let upstream = Upstream::new("u");
    let t0 = tokio::time::Instant::now();
    upstream.hold_for(Duration::from_secs(10));
    let probe = spawn_pass(&upstream, PATIENT);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let waiter = spawn_pass(&upstream, PATIENT);
    tokio::time::sleep(Duration::from_secs(5)).await;
    // An hour: past both callers' 60 s cap.
    upstream.hold_for(Duration::from_secs(3600));
    let bound = Duration::from_secs(100);
    for call in [probe, waiter] {
        let (turn, ended) = tokio::time::timeout(bound, call)
            .await
            .expect("not waited an hour")
            .unwrap();
        let held = turn.expect_err("Held");
        assert_eq!(held.left(), Duration::from_millis(3_595_001));
        assert_eq!(
            ended - t0,
            Duration::from_secs(10),
            "when the first hold ended"
        );
    }
}
