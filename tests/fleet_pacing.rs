//! The fleet's pacing buckets in Redis, on a real `redis-server` (Debian's
//! package; each test starts its own on a unix socket): the `ADMIT` and
//! `LEARN` scripts through two stores (two processes of a fleet), the
//! fan-out of 4 worker processes (`fleet-fanout`) against the quota
//! server, Redis killed mid-run, and calls of the fleet paced past their
//! total or by a window another process read. Run with
//! `cargo test --features redis --test fleet_pacing`.
#![cfg(feature = "redis")]

use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use nika_retry::upstream::{Admission, Quota, Reading, RedisStore, Spend, Store, Upstream};
use nika_retry::{retry, timeout};
use nika_retry_tests::fault::quota::{Config, Kind, QuotaServer};
use nika_retry_tests::fleet::Provider;
use nika_retry_tests::redis_server::RedisServer;
use nika_retry_tests::{ProviderError, Script};
use redis::Commands as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const UP: &str = "fleet/paced";

/// Long enough for a loaded machine's server on the same host (the
/// default, 50 ms, passes a slow answer over: not what these are about).
const PATIENT: Duration = Duration::from_secs(2);

async fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::connect(&redis.url())
        .await
        .expect("a Redis URL")
        .with_wait(PATIENT)
}

fn raw(redis: &RedisServer) -> redis::Connection {
    redis::Client::open(redis.url())
        .and_then(|client| client.get_connection())
        .expect("a connection to the test's redis-server")
}

/// Redis's clock (`TIME`), the one its scripts read.
fn redis_time(conn: &mut redis::Connection) -> Duration {
    let (seconds, micros): (u64, u64) = redis::cmd("TIME").query(conn).expect("TIME");
    Duration::from_secs(seconds) + Duration::from_micros(micros)
}

fn pace_key(upstream: &str) -> String {
    format!("nika-retry:upstream:{{{upstream}}}:pace")
}

/// 4 requests per 2 s, one request an attempt; tokens not paced.
fn four_per_2s() -> [Spend; 2] {
    [Spend::new(4, Duration::from_secs(2), 1), Spend::default()]
}

async fn bounded<F: std::future::Future>(test: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(90), test)
        .await
        .expect("the test ended within 90 s")
}

#[tokio::test]
async fn two_stores_on_one_redis_spend_one_bucket() {
    bounded(async {
        let redis = RedisServer::start();
        let (a, b) = (store(&redis).await, store(&redis).await);
        for store in [&a, &b, &a, &b] {
            let admitted = store.admit(UP, 1, four_per_2s()).await.unwrap();
            assert_eq!(admitted, Admission::Go, "4 of 4, whichever process");
        }
        for store in [&a, &b] {
            match store.admit(UP, 2, four_per_2s()).await.unwrap() {
                // One request refills in 500 ms.
                Admission::Ready(after) => assert!(
                    after > Duration::ZERO && after <= Duration::from_millis(500),
                    "{after:?}"
                ),
                other => panic!("the 5th of 4 went: {other:?}"),
            }
        }
        // Nothing spent by the attempts told to wait: one refill, one goes.
        tokio::time::sleep(Duration::from_millis(520)).await;
        assert_eq!(b.admit(UP, 2, four_per_2s()).await.unwrap(), Admission::Go);
        assert!(matches!(
            a.admit(UP, 1, four_per_2s()).await.unwrap(),
            Admission::Ready(_)
        ));
        // Another upstream has a bucket of its own.
        let other = a.admit("fleet/other", 1, four_per_2s()).await.unwrap();
        assert_eq!(other, Admission::Go);
    })
    .await;
}

#[tokio::test]
async fn every_dimension_must_hold_its_cost_and_nothing_is_spent_otherwise() {
    bounded(async {
        let redis = RedisServer::start();
        let a = store(&redis).await;
        let window = Duration::from_secs(60);
        let spend = [Spend::new(100, window, 1), Spend::new(1_000, window, 600)];
        assert_eq!(a.admit(UP, 1, spend).await.unwrap(), Admission::Go);
        // 400 tokens left: the next 600 waits, its request not spent.
        assert!(matches!(
            a.admit(UP, 1, spend).await.unwrap(),
            Admission::Ready(after) if after > Duration::from_secs(10)
        ));
        let small = [Spend::new(100, window, 1), Spend::new(1_000, window, 400)];
        assert_eq!(a.admit(UP, 1, small).await.unwrap(), Admission::Go);
        let level: f64 = raw(&redis)
            .hget(pace_key(UP), "rv")
            .expect("the requests' level");
        assert!((97.9..=98.1).contains(&level), "2 requests spent: {level}");
    })
    .await;
}

#[tokio::test]
async fn the_buckets_count_on_the_redis_servers_clock() {
    bounded(async {
        let redis = RedisServer::start();
        let a = store(&redis).await;
        assert_eq!(a.admit(UP, 1, four_per_2s()).await.unwrap(), Admission::Go);
        let mut conn = raw(&redis);
        let at: u64 = conn.hget(pace_key(UP), "ra").expect("when it was counted");
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut conn).unwrap();
        let server_now = secs * 1_000_000 + micros;
        assert!(
            at <= server_now && server_now - at < 5_000_000,
            "counted at {at} µs of the server's clock, now {server_now}"
        );
        // A level counted "in the future" (another clock than the server's)
        // is counted as of now: it neither refills backwards nor stalls.
        let _: () = conn
            .hset(pace_key(UP), "ra", (server_now + 3_600_000_000).to_string())
            .unwrap();
        let _: () = conn.hset(pace_key(UP), "rv", "0").unwrap();
        match a.admit(UP, 1, four_per_2s()).await.unwrap() {
            Admission::Ready(after) => assert!(after <= Duration::from_millis(500), "{after:?}"),
            other => panic!("an empty bucket let it go: {other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn a_limit_learned_by_one_process_paces_the_others_and_remaining_lowers_the_level() {
    bounded(async {
        let redis = RedisServer::start();
        let (a, b) = (store(&redis).await, store(&redis).await);
        let unknown = [Spend::new(0, Duration::ZERO, 1), Spend::default()];
        assert_eq!(
            b.admit(UP, 2, unknown).await.unwrap(),
            Admission::Local,
            "no limit anywhere: paced in the process"
        );
        // a read 10 per 10 s, 1 left.
        a.learned(
            UP,
            [
                Reading::new(10, Duration::from_secs(10), Some(1)),
                Reading::default(),
            ],
        );
        let mut shared = None;
        for _ in 0..100 {
            match b.admit(UP, 2, unknown).await.unwrap() {
                Admission::Local => tokio::time::sleep(Duration::from_millis(20)).await,
                other => {
                    shared = Some(other);
                    break;
                }
            }
        }
        assert_eq!(shared, Some(Admission::Go), "b paces with a's limit");
        match b.admit(UP, 2, unknown).await.unwrap() {
            Admission::Ready(after) => assert!(
                after > Duration::from_millis(500) && after <= Duration::from_secs(1),
                "one of 10 per 10 s: {after:?}"
            ),
            other => panic!("past what the server said is left: {other:?}"),
        }
        // A longer window read for the same limit leaves the shorter one.
        b.learned(
            UP,
            [
                Reading::new(10, Duration::from_secs(40), None),
                Reading::default(),
            ],
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let window: u64 = raw(&redis).hget(pace_key(UP), "rw").unwrap();
        assert_eq!(window, 10_000_000, "the shortest window read");
    })
    .await;
}

#[tokio::test]
async fn absurd_values_and_garbage_never_panic_nor_fail() {
    bounded(async {
        let redis = RedisServer::start();
        let a = store(&redis).await;
        let absurd = [
            [
                Spend::new(u64::MAX, Duration::MAX, u64::MAX),
                Spend::new(1, Duration::from_nanos(1), u64::MAX),
            ],
            [
                Spend::new(1, Duration::MAX, u64::MAX),
                Spend::new(u64::MAX, Duration::ZERO, 1),
            ],
            [Spend::default(), Spend::new(0, Duration::MAX, u64::MAX)],
        ];
        for spend in absurd {
            let admitted = a.admit(UP, u64::MAX, spend).await;
            assert!(admitted.is_ok(), "{spend:?}: {admitted:?}");
            if let Ok(Admission::Ready(after)) = admitted {
                assert!(after <= nika_retry::upstream::MAX_HOLD, "{after:?}");
            }
            a.learned(
                UP,
                [
                    Reading::new(u64::MAX, Duration::MAX, Some(u64::MAX)),
                    Reading::new(1, Duration::from_nanos(1), Some(0)),
                ],
            );
        }
        // Another program's garbage: a string where the hash is, then
        // fields that are no numbers.
        let mut conn = raw(&redis);
        let _: () = conn.set(pace_key(UP), "garbage").unwrap();
        assert!(a.admit(UP, 1, four_per_2s()).await.is_ok());
        for (field, value) in [("rv", "nan"), ("ra", "-inf"), ("rl", "-5"), ("rw", "1e999")] {
            let _: () = conn.hset(pace_key(UP), field, value).unwrap();
            assert!(
                a.admit(UP, 1, four_per_2s()).await.is_ok(),
                "{field}={value}"
            );
        }
        assert!(!a.is_down(), "every script answered");
    })
    .await;
}

/// A prompt of 200 tokens (as the fan-out benchmark's).
fn prompt() -> String {
    let text = "Summarize this chapter. ".repeat(17);
    format!(r#"{{"prompt":"{}","max_tokens":100}}"#, &text[..400])
}

const CALLS: u32 = 50;
const PROCESSES: u32 = 4;

/// The fan-out of 4 processes on one Redis against `server`: how many of
/// the calls failed, and how many stores met an outage.
async fn fan_out(server: &QuotaServer, redis: &RedisServer, upstream: &str) -> (usize, u64) {
    let body = prompt();
    let mut workers = Vec::new();
    for i in 0..PROCESSES {
        let calls = CALLS / PROCESSES + u32::from(i < CALLS % PROCESSES);
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fleet-fanout"))
            .arg(server.url("/v1/complete"))
            .arg(redis.url())
            .arg(upstream)
            .arg(calls.to_string())
            .arg(&body)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("a worker process");
        let lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        workers.push((child, lines));
    }
    for (_, lines) in &mut workers {
        let ready = lines.next_line().await.expect("a worker's line");
        assert_eq!(ready.as_deref(), Some("ready"), "a worker did not start");
    }
    for (child, _) in &mut workers {
        let stdin = child.stdin.as_mut().expect("piped");
        stdin.write_all(b"go\n").await.expect("a worker's stdin");
    }
    let (mut failed, mut outages) = (0, 0);
    for (mut child, mut lines) in workers {
        let done = lines.next_line().await.ok().flatten().unwrap_or_default();
        let mut fields = done.split(' ').skip(1).map(|n| n.parse::<u64>());
        match (done.starts_with("done "), fields.next(), fields.next()) {
            (true, Some(Ok(f)), Some(Ok(o))) => {
                failed += f as usize;
                outages += o;
            }
            _ => panic!("a worker's report: {done:?}"),
        }
        assert!(child.wait().await.expect("its exit").success());
    }
    (failed, outages)
}

fn quota(kind: Kind) -> Config {
    Config::per(Duration::from_secs(2))
        .requests(20)
        .tokens(3_000)
        .kind(kind)
}

/// The goals' fan-out through the fleet (50 calls of 200 tokens over 4
/// processes, 3 000 tokens per 2 s): the buckets in Redis keep the fleet
/// under one limit. Measured (BENCHMARKS.md, "Fleet pacing"): 50
/// requests in every run on this server; before the buckets were shared,
/// 85–87. Asserted with room for a loaded machine: 4 more, and 5 more per
/// store passed over at least once (its process then paces alone).
#[tokio::test]
async fn four_processes_share_one_limit_through_redis() {
    bounded(async {
        let redis = RedisServer::start();
        let server = QuotaServer::start(quota(Kind::Refill)).await;
        let (failed, outages) = fan_out(&server, &redis, "fleet/fanout").await;
        let counts = server.counts();
        assert_eq!(failed, 0, "{counts:?}");
        assert_eq!(counts.admitted, CALLS as usize, "{counts:?}");
        let bound = 54 + 5 * outages as usize;
        assert!(
            counts.requests <= bound,
            "{} requests for {CALLS} calls (at most {bound}; {outages} outages): {counts:?}",
            counts.requests
        );
    })
    .await;
}

/// Anthropic's reset instants, answers in 50–150 ms, a rolling window:
/// each process gives the fleet the window bounded from when its request
/// left (from the response, it was shorter by the answer's time, and the
/// fleet's log freed what it sent early: 3–6 429s in each of 2 runs of the
/// bench; none since).
#[tokio::test]
async fn the_fleet_bounds_an_instants_window_from_when_the_request_left() {
    bounded(async {
        let redis = RedisServer::start();
        let config = quota(Kind::Rolling)
            .dialect(nika_retry_tests::fault::quota::Dialect::Anthropic)
            .generation(Duration::from_millis(50), Duration::from_millis(150));
        let server = QuotaServer::start(config).await;
        let (failed, outages) = fan_out(&server, &redis, "fleet/anthropic").await;
        let counts = server.counts();
        assert_eq!(failed, 0, "{counts:?}");
        assert!(
            counts.limited <= 1 + outages as usize,
            "{outages} outages: {counts:?}"
        );
    })
    .await;
}

/// Redis killed while 2 upstreams (2 processes of a fleet) fan out through
/// it: no call fails; they go on with their own pacing.
#[tokio::test]
async fn redis_killed_mid_run_fails_no_call() {
    bounded(async {
        let mut redis = RedisServer::start();
        let server = QuotaServer::start(quota(Kind::Rolling)).await;
        let body = prompt();
        let mut providers = Vec::new();
        for _ in 0..2 {
            let upstream = Upstream::new("fleet/killed").with_store(store(&redis).await);
            providers.push(Provider::new(&server.url("/v1/complete"), upstream));
        }
        let calls = providers
            .iter()
            .flat_map(|p| (0..15).map(|_| p.complete(&body)))
            .collect::<Vec<_>>();
        let run = futures_util::future::join_all(calls);
        tokio::pin!(run);
        let results = tokio::select! {
            results = &mut run => results,
            () = tokio::time::sleep(Duration::from_millis(1500)) => {
                redis.kill();
                run.await
            }
        };
        assert!(!redis.answers(), "killed mid-run");
        let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        assert!(failed.is_empty(), "{failed:?}; {:?}", server.counts());
        assert_eq!(server.counts().admitted, 30);
    })
    .await;
}

/// A process whose last call was a probe exits as soon as that call
/// returns, before its store's writer sent the probe's outcome: its store,
/// dropped, gives the lease back, so that no other process waits out
/// `PROBE_LEASE` (5 s) for a probe that is over.
#[tokio::test]
async fn a_store_dropped_right_after_its_probe_gives_the_lease_back() {
    bounded(async {
        let redis = RedisServer::start();
        let b = store(&redis).await;
        for released in [true, false] {
            // Neither a lease nor a released probe's word left by the last round.
            let _: () = raw(&redis)
                .del(format!("nika-retry:upstream:{{{UP}}}:probe"))
                .unwrap();
            let a = store(&redis).await;
            assert_eq!(
                a.probe(UP, 1).await.unwrap(),
                nika_retry::upstream::ProbeTurn::Go
            );
            assert_eq!(
                b.probe(UP, 2).await.unwrap(),
                nika_retry::upstream::ProbeTurn::Wait,
                "a's probe is out"
            );
            // Its outcome queued; the process ends before the writer runs.
            a.probed(UP, 1, released);
            drop(a);
            assert_eq!(
                b.probe(UP, 2).await.unwrap(),
                nika_retry::upstream::ProbeTurn::Go,
                "given back (released: {released})"
            );
        }
    })
    .await;
}

/// A reading whose reset is much later than a refill of what is missing
/// would take (1 of 4 per 2 s missing, whole again in 2 s: a refill would
/// take 0.5 s) marks the limit as a window: from then on the admissions of
/// the last window are counted, each for the window and a margin for its
/// way to the server (a fortieth of the window, at most 40 ms: 40 ms
/// here), and nothing frees before the oldest leaves it, where a refilled
/// bucket would let one go every half second.
#[tokio::test]
async fn a_limit_read_as_a_window_frees_nothing_until_its_oldest_admission_leaves() {
    bounded(async {
        let redis = RedisServer::start();
        let window = Duration::from_secs(2);
        let reading = Reading::new(4, window, Some(3)).with_reset(window);
        let (earliest, latest) = oldest_frees(&redis, reading, four_per_2s()).await;
        assert!(
            latest >= Duration::from_millis(2039) && earliest <= Duration::from_millis(2041),
            "the oldest leaves {earliest:?}–{latest:?} after it went, not 2.04 s"
        );
    })
    .await;
}

/// Two stores learn `reading` (of the requests), admit 4 attempts
/// spending `spend` in turn, and 700 ms later ask for a fifth: how long
/// after it went the log's oldest admission frees, on Redis's clock, which
/// the script reads (the fifth's admission is between two reads of
/// `TIME`: the earliest and the latest it can be). The caller's clock
/// would see the oldest go up to a round trip late, which on a loaded
/// machine hides a 40 ms margin.
async fn oldest_frees(
    redis: &RedisServer,
    reading: Reading,
    spend: [Spend; 2],
) -> (Duration, Duration) {
    let (a, b) = (store(redis).await, store(redis).await);
    a.learned(UP, [reading, Reading::default()]);
    for _ in 0..100 {
        let win: Option<String> = raw(redis).hget(pace_key(UP), "rwin").unwrap();
        if win.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for store in [&a, &b, &a, &b] {
        assert_eq!(store.admit(UP, 1, spend).await.unwrap(), Admission::Go);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut conn = raw(redis);
    let before = redis_time(&mut conn);
    let admission = b.admit(UP, 2, spend).await.unwrap();
    let answered = redis_time(&mut conn);
    let log = format!("nika-retry:upstream:{{{UP}}}:log:requests");
    let oldest: Vec<(String, f64)> = conn.zrange_withscores(&log, 0, 0).unwrap();
    let oldest = Duration::from_micros(oldest.first().expect("logged").1 as u64);
    match admission {
        Admission::Ready(after) => (before + after - oldest, answered + after - oldest),
        other => panic!("a window's 5th of 4 went: {other:?}"),
    }
}

/// One attempt of `script`.
#[retry(layer = "provider", upstream = upstream)]
async fn scripted(upstream: &Upstream, script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

/// The same within a total of 1 s.
#[retry(layer = "provider", upstream = upstream)]
#[timeout(total = "1s")]
async fn within_1s(upstream: &Upstream, script: &Script) -> Result<u32, ProviderError> {
    script.attempt()
}

/// One request per 10 s, declared by each process of the fleet.
fn one_per_10s() -> Quota {
    Quota::per(Duration::from_secs(10)).requests(1)
}

#[tokio::test]
async fn a_fleet_pace_past_the_calls_total_fails_it_at_once_with_held() {
    bounded(async {
        let redis = RedisServer::start();
        let name = "fleet/deadline";
        let a = Upstream::new(name)
            .with_quota(one_per_10s())
            .with_store(store(&redis).await);
        let b = Upstream::new(name)
            .with_quota(one_per_10s())
            .with_store(store(&redis).await);
        let script = Script::new(0, ProviderError::status(500));
        assert_eq!(scripted(&a, &script).await, Ok(1));
        // The fleet's one request is spent for 10 s: past b's 1 s total.
        let result = within_1s(&b, &script).await;
        let Err(ProviderError::Held(held)) = result else {
            panic!("waited: {result:?}")
        };
        assert!(held.left() > Duration::from_secs(1), "{held:?}");
        assert_eq!(script.attempts(), 1, "nothing sent");
    })
    .await;
}

/// One attempt that notes when it started.
#[retry(layer = "provider", upstream = upstream)]
async fn noted(
    upstream: &Upstream,
    starts: &Mutex<Vec<std::time::Instant>>,
) -> Result<(), ProviderError> {
    starts.lock().unwrap().push(std::time::Instant::now());
    Ok(())
}

/// Waits (at most 3 s) until the fleet's pace in `redis` has taken in a
/// reading of `upstream`'s requests as a window's (`LEARN` runs on the
/// store's writer, after `observe` returns).
async fn window_shared(redis: &RedisServer, upstream: &str) {
    for _ in 0..150 {
        let win: Option<String> = raw(redis).hget(pace_key(upstream), "rwin").unwrap();
        if win.is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_window_read_by_one_process_paces_the_others_by_the_window() {
    bounded(async {
        let redis = RedisServer::start();
        let name = "fleet/window";
        let quota = Quota::per(Duration::from_secs(2)).requests(4);
        let a = Upstream::new(name)
            .with_quota(quota)
            .with_store(store(&redis).await);
        let b = Upstream::new(name)
            .with_quota(quota)
            .with_store(store(&redis).await);
        // As a window server writes them as it admits the first of a
        // window: 1 of 4 spent, whole again in 2 s (a refill would be whole
        // in 500 ms).
        a.observe(
            &[
                ("x-ratelimit-limit-requests", "4"),
                ("x-ratelimit-remaining-requests", "3"),
                ("x-ratelimit-reset-requests", "2s"),
            ][..],
        );
        window_shared(&redis, name).await;
        let starts = Mutex::new(Vec::new());
        let t0 = std::time::Instant::now();
        let calls = (0..5).map(|_| noted(&b, &starts));
        let results = futures_util::future::join_all(calls).await;
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let mut starts = starts.into_inner().unwrap();
        starts.sort();
        // The fifth of 4 waits for the oldest to leave the window (2 s and
        // its 40 ms margin from its admission, after `t0`), not for a
        // refill's 500 ms. (Redis counts on its own clock: 40 ms allowed
        // for the two clocks' drift.)
        let fifth = starts[4] - t0;
        assert!(fifth >= Duration::from_millis(2000), "{fifth:?}");
    })
    .await;
}

/// Waits (at most 3 s) until the fleet's pace in `redis` knows `upstream`'s
/// requests' limit (`LEARN` runs on the store's writer, after `observe`
/// returns).
async fn limit_shared(redis: &RedisServer, upstream: &str) {
    for _ in 0..150 {
        let limit: Option<String> = raw(redis).hget(pace_key(upstream), "rl").unwrap();
        if limit.is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the reading never reached the store");
}

/// The IETF's `t` is whole seconds, rounded up: a refill whole in 100 ms
/// reads `t=1`. That is no window (it would pace a refilling server by
/// windows, a third slower); a reset a second later than any rounding
/// explains still is.
#[tokio::test]
async fn a_reset_in_whole_seconds_is_no_window_unless_its_rounding_cannot_explain_it() {
    bounded(async {
        let redis = RedisServer::start();
        let policy = (
            "RateLimit-Policy",
            r#""requests";q=20;w=2, "tokens";q=3000;w=2"#,
        );
        // A refill: 1 of 20 requests and 200 of 3 000 tokens missing.
        let refill = Upstream::new("fleet/ietf-refill").with_store(store(&redis).await);
        let state = ("RateLimit", r#""requests";r=19;t=1, "tokens";r=2800;t=1"#);
        refill.observe(&[policy, state][..]);
        limit_shared(&redis, "fleet/ietf-refill").await;
        for d in ["rwin", "twin"] {
            let win: Option<String> = raw(&redis).hget(pace_key("fleet/ietf-refill"), d).unwrap();
            assert_eq!(win, None, "{d}: a rounded refill read as a window");
        }
        // A rolling window: as much missing, whole again only in 2 s.
        let rolling = Upstream::new("fleet/ietf-rolling").with_store(store(&redis).await);
        let state = ("RateLimit", r#""requests";r=19;t=2, "tokens";r=2800;t=2"#);
        rolling.observe(&[policy, state][..]);
        window_shared(&redis, "fleet/ietf-rolling").await;
        let win: Option<String> = raw(&redis)
            .hget(pace_key("fleet/ietf-rolling"), "rwin")
            .unwrap();
        assert_eq!(win.as_deref(), Some("1"), "a window's reset");
    })
    .await;
}

/// One attempt answered after 300 ms, with Anthropic's headers: 1 of 20
/// requests spent, whole again in 100 ms (an RFC 3339 instant).
#[retry(layer = "provider", upstream = upstream)]
async fn answered_late(upstream: &Upstream) -> Result<(), ProviderError> {
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reset = std::time::SystemTime::now() + Duration::from_millis(100);
    let reset = humantime::format_rfc3339_millis(reset).to_string();
    upstream.observe(
        &[
            ("anthropic-ratelimit-requests-limit", "20"),
            ("anthropic-ratelimit-requests-remaining", "19"),
            ("anthropic-ratelimit-requests-reset", reset.as_str()),
        ][..],
    );
    Ok(())
}

/// An instant's reset is shared counted from when the request left (the
/// window log counts that long), up to the answer's time later than the
/// server counted it: a refill whole 100 ms after a 300 ms answer is no
/// window (it would be paced by windows, a third slower).
#[tokio::test]
async fn an_instant_read_after_a_slow_answer_is_no_window() {
    bounded(async {
        let redis = RedisServer::start();
        let name = "fleet/slow-refill";
        let upstream = Upstream::new(name)
            .with_quota(Quota::per(Duration::from_secs(2)).requests(20))
            .with_store(store(&redis).await);
        assert_eq!(answered_late(&upstream).await, Ok(()));
        limit_shared(&redis, name).await;
        let win: Option<String> = raw(&redis).hget(pace_key(name), "rwin").unwrap();
        assert_eq!(win, None, "a slow refill's reading read as a window");
    })
    .await;
}

/// A window's admissions count for the longest reset read (an instant's
/// counted from when its request left), even where the window read from
/// the responses is shorter (short by the answer's time: 1.9 s here, the
/// reset 2 s): counted for the shorter, a fixed window's first admissions
/// left the log 60 ms before the window ended, and their successors met
/// 429s.
#[tokio::test]
async fn a_window_counts_for_its_longest_reset_past_a_shorter_window_read() {
    bounded(async {
        let redis = RedisServer::start();
        let read = Duration::from_millis(1_900);
        let reading = Reading::new(4, read, Some(3)).with_reset(Duration::from_secs(2));
        let spend = [Spend::new(4, read, 1), Spend::default()];
        let (_, latest) = oldest_frees(&redis, reading, spend).await;
        assert!(
            latest >= Duration::from_millis(2_040),
            "the oldest leaves {latest:?} after it went: counted for the shorter window"
        );
    })
    .await;
}
