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
