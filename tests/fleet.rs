//! The upstream store on a real `redis-server` (Debian's package; the
//! harness starts one on a unix socket): two stores on one server are two
//! processes of a fleet. Run with `cargo test --features redis --test fleet`.
#![cfg(feature = "redis")]

use std::sync::OnceLock;
use std::time::Duration;

use nika_retry::upstream::{HoldReason, PROBE_OUT, ProbeTurn, RedisStore, Store, Upstream};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::fleet::{Error, Provider, UPSTREAM};
use nika_retry_tests::logs::Captured;
use nika_retry_tests::redis_server::RedisServer;
use redis::Commands as _;

const HOUR: Duration = Duration::from_secs(3600);

/// What this binary logs: one global subscriber (a scoped one per test
/// can miss events of callsites another test's thread registered first).
/// Each test reads the lines about its own server.
fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the one global subscriber");
        captured
    })
}

/// The log lines about the server at `at` (a store's `Display`) that say `what`.
fn said(at: &str, what: &str) -> usize {
    logs()
        .text()
        .lines()
        .filter(|line| line.contains(at) && line.contains(what))
        .count()
}

/// How long the tests' stores wait for each answer, where `STORE_WAIT`
/// (50 ms) is the default: on a loaded machine a server on the same host
/// can take longer, and the store is then passed over (the upstream goes on
/// its own state, as documented), which is not what those tests are about.
const PATIENT: Duration = Duration::from_secs(2);

/// A store on the test's server that waits up to [`PATIENT`].
async fn store(redis: &RedisServer) -> RedisStore {
    quick(redis).await.with_wait(PATIENT)
}

/// A store with the default wait, for the tests of a slow server.
async fn quick(redis: &RedisServer) -> RedisStore {
    RedisStore::connect(&redis.url())
        .await
        .expect("a Redis URL")
}

/// A connection of another program, for keys written by hand.
fn raw(redis: &RedisServer) -> redis::Connection {
    redis::Client::open(redis.url())
        .and_then(|client| client.get_connection())
        .expect("a connection to the test's redis-server")
}

fn key(part: &str) -> String {
    format!("nika-retry:upstream:{{{UPSTREAM}}}:{part}")
}

/// Waits (real time, at most 10 s) until `store` sees `upstream` held;
/// writes reach the server in the background.
async fn seen(store: &RedisStore, upstream: &str) -> (Duration, HoldReason) {
    for _ in 0..200 {
        if let Ok(Some(held)) = store.held_for(upstream).await {
            return held;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{upstream} never held in {store}")
}

/// Keeps `redis` busy for `busy` from `after` on (another client's script
/// that spins: the server answers nobody meanwhile); joins to its result.
fn busy(redis: &RedisServer, after: Duration, busy: Duration) -> std::thread::JoinHandle<i64> {
    let mut other = raw(redis);
    std::thread::spawn(move || {
        std::thread::sleep(after);
        redis::cmd("EVAL")
            .arg(
                "local t0 = redis.call('TIME') while true do local t = redis.call('TIME') \
                  if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > tonumber(ARGV[1]) then return 1 end end",
            )
            .arg(0)
            .arg(busy.as_micros().to_string())
            .query::<i64>(&mut other)
            .expect("the busy script")
    })
}

/// Each test's bound: a regression fails it rather than hang CI.
async fn bounded<F: std::future::Future>(test: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), test)
        .await
        .expect("the test ended within 60 s")
}

fn held(result: Result<String, Error>) -> nika_retry::upstream::Held {
    match result {
        Err(Error::Held(held)) => held,
        other => panic!("not held: {other:?}"),
    }
}

#[tokio::test]
async fn a_hold_set_by_one_process_is_seen_by_anothers_next_attempt() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let server = FaultServer::start([Fault::ok("ok")]).await;
        let a = Upstream::new(UPSTREAM).with_store(store(&redis).await);
        let b_store = store(&redis).await;
        let b = Provider::new(
            &server.url("/v1"),
            Upstream::new(UPSTREAM).with_store(b_store.clone()),
        );
        assert_eq!(b.call().await.unwrap(), "ok");

        a.hold_for(HOUR);
        seen(&b_store, UPSTREAM).await;
        let held = held(b.call().await);
        assert_eq!(
            (held.upstream(), held.reason()),
            (UPSTREAM, HoldReason::ByHand)
        );
        assert!(held.left() > HOUR - Duration::from_secs(10), "{held}");
        assert_eq!(server.requests(), 1, "the held attempt sent nothing");
    })
    .await;
}

#[tokio::test]
async fn holds_only_ever_extend_across_processes() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let a = store(&redis).await;
        let b_store = store(&redis).await;
        let b = Upstream::new(UPSTREAM).with_store(b_store.clone());
        a.hold(UPSTREAM, Duration::from_secs(60), HoldReason::ServerHint);
        seen(&b_store, UPSTREAM).await;

        b.hold_for(Duration::from_secs(5));
        // After b's shorter hold in b's queue: a marker, to know it was sent.
        b_store.hold("marker", HOUR, HoldReason::ByHand);
        seen(&b_store, "marker").await;
        let (left, reason) = b_store.held_for(UPSTREAM).await.unwrap().unwrap();
        assert!(left > Duration::from_secs(50), "shortened to {left:?}");
        assert_eq!(reason, HoldReason::ServerHint);

        b.hold_for(HOUR);
        let a_view = loop {
            let (left, reason) = seen(&a, UPSTREAM).await;
            if left > Duration::from_secs(60) {
                break (left, reason);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(a_view.1, HoldReason::ByHand, "extended by b, seen by a");
    })
    .await;
}

#[tokio::test]
async fn one_probe_goes_for_the_whole_fleet() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        // The probe is pushed back for an hour: longer than any call waits.
        let server = FaultServer::start([
            Fault::WithHeaders(429, vec![("Retry-After".into(), "3600".into())]),
            Fault::ok("ok"),
        ])
        .await;
        let url = server.url("/v1");
        let a_store = store(&redis).await;
        let b_store = store(&redis).await;
        let a = Provider::new(&url, Upstream::new(UPSTREAM).with_store(a_store.clone()));
        let b = Provider::new(&url, Upstream::new(UPSTREAM).with_store(b_store.clone()));
        a_store.hold(UPSTREAM, Duration::from_millis(500), HoldReason::ByHand);
        seen(&b_store, UPSTREAM).await;

        let calls = (0..6).map(|i| if i % 2 == 0 { a.call() } else { b.call() });
        let results = futures_util::future::join_all(calls).await;
        // One probe for both processes while the store answers within
        // `STORE_WAIT`; a store passed over (slow under load: an outage
        // counted) leaves a process its own probe, as documented.
        let probes = if a_store.outages() + b_store.outages() == 0 {
            1
        } else {
            2
        };
        let requests = server.requests();
        assert!(
            (1..=probes).contains(&requests),
            "{requests} probes for both processes: {results:?}"
        );
        let pushed_back = results
            .iter()
            .filter(|r| matches!(r, Err(Error::Api(429, ..))))
            .count();
        assert_eq!(pushed_back, requests, "{results:?}");
        for result in results {
            if let Err(Error::Held(held)) = result {
                assert_eq!(
                    held.reason(),
                    HoldReason::ServerHint,
                    "the probe's 429 held them"
                );
            } else {
                assert!(matches!(result, Err(Error::Api(429, ..))), "{result:?}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn an_attempt_that_arrives_while_another_process_probes_waits_for_its_outcome() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let server = FaultServer::start([Fault::ok("ok")]).await;
        let a = store(&redis).await;
        let b = Provider::new(
            &server.url("/v1"),
            Upstream::new(UPSTREAM).with_store(store(&redis).await),
        );
        // Another process's probe is out (its hold is over): b never saw the hold.
        assert_eq!(a.probe(UPSTREAM, 7).await.unwrap(), ProbeTurn::Go);
        let call = b.call();
        tokio::pin!(call);
        let early = tokio::time::timeout(Duration::from_millis(500), &mut call).await;
        assert!(early.is_err(), "b went while the probe was out: {early:?}");
        assert_eq!(server.requests(), 0);
        a.probed(UPSTREAM, 7, true);
        // Within a few polls, nowhere near the 5 s lease.
        let released = tokio::time::timeout(Duration::from_secs(2), call).await;
        let released = released.expect("released when the probe ended, not when its lease expired");
        assert_eq!(released.unwrap(), "ok", "released by the probe's outcome");
        assert_eq!(server.requests(), 1);
    })
    .await;
}

/// `Store::attempt` is the trait's (an upstream asks `admit`, which
/// `RedisStore` answers with its own script): a `Store` of the user's that
/// wraps a `RedisStore` and forwards `attempt` reaches it through the
/// trait's default `admit`.
#[tokio::test]
async fn the_stores_attempt_waits_while_another_processes_probe_is_out() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let a = store(&redis).await;
        let b = store(&redis).await;
        assert_eq!(b.attempt(UPSTREAM, 8).await.unwrap(), None, "nothing held");
        // Another process's probe is out: b's attempt waits for its outcome.
        assert_eq!(a.probe(UPSTREAM, 7).await.unwrap(), ProbeTurn::Go);
        let out = Some((PROBE_OUT, HoldReason::ServerHint));
        assert_eq!(b.attempt(UPSTREAM, 8).await.unwrap(), out);
        // The probe came back without a new hold (written in the
        // background): b's attempts start again.
        a.probed(UPSTREAM, 7, true);
        for _ in 0..200 {
            if b.attempt(UPSTREAM, 8).await.unwrap().is_none() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("still held after the probe came back");
    })
    .await;
}

#[tokio::test]
async fn the_allowance_is_shared() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let server = FaultServer::start([Fault::ok("ok")]).await;
        let a = Upstream::new(UPSTREAM).with_store(store(&redis).await);
        let b = Provider::new(
            &server.url("/v1"),
            Upstream::new(UPSTREAM).with_store(store(&redis).await),
        );
        let headers = [
            ("x-ratelimit-remaining-requests", "2"),
            ("x-ratelimit-reset-requests", "60m0s"),
        ];
        a.observe(&headers[..]);
        let mut other = raw(&redis);
        for _ in 0..200 {
            if other
                .get::<_, Option<String>>(key("allowance"))
                .unwrap()
                .is_some()
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(b.call().await.unwrap(), "ok");
        assert_eq!(
            b.call().await.unwrap(),
            "ok",
            "the last one a's response allowed"
        );
        let held = held(b.call().await);
        assert_eq!(held.reason(), HoldReason::RateLimitHeaders);
        assert!(
            held.left() > Duration::from_secs(3500),
            "until the reset: {held}"
        );
        assert_eq!(server.requests(), 2);
    })
    .await;
}

#[tokio::test]
async fn redis_killed_costs_no_call_and_back_it_is_shared_again() {
    bounded(async {
        logs();
        let mut redis = RedisServer::start();
        let server = FaultServer::start([Fault::ok("ok")]).await;
        let a_store = store(&redis).await;
        let b_store = store(&redis).await;
        let a = Provider::new(
            &server.url("/v1"),
            Upstream::new(UPSTREAM).with_store(a_store.clone()),
        );
        let b = Provider::new(
            &server.url("/v1"),
            Upstream::new(UPSTREAM).with_store(b_store.clone()),
        );
        assert_eq!(b.call().await.unwrap(), "ok");

        redis.kill();
        for _ in 0..10 {
            assert_eq!(b.call().await.unwrap(), "ok", "Redis down fails no call");
        }
        // On its own state meanwhile: a's hold holds a, not b.
        a.upstream.hold_for(HOUR);
        assert!(matches!(a.call().await, Err(Error::Held(_))));
        assert_eq!(b.call().await.unwrap(), "ok");
        assert!(b_store.is_down());
        assert_eq!((a_store.outages(), b_store.outages()), (1, 1));
        let at = b_store.to_string();
        assert_eq!(said(&at, "does not answer"), 2, "once per store");

        redis.restart();
        for store in [&a_store, &b_store] {
            for _ in 0..100 {
                if store.held_for(UPSTREAM).await.is_ok() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            assert!(!store.is_down(), "{store} answers again");
        }
        Upstream::new(UPSTREAM)
            .with_store(a_store.clone())
            .hold_for(HOUR);
        seen(&b_store, UPSTREAM).await;
        assert!(
            matches!(b.call().await, Err(Error::Held(_))),
            "shared again"
        );
        assert_eq!(said(&at, "answers again"), 2);
        assert_eq!(said(&at, "does not answer"), 2, "one outage each");
    })
    .await;
}

#[tokio::test]
async fn a_slow_redis_is_passed_over_and_used_again_when_it_answers() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let server = FaultServer::start([Fault::ok("ok")]).await;
        let b_store = quick(&redis).await;
        let b = Provider::new(
            &server.url("/v1"),
            Upstream::new(UPSTREAM).with_store(b_store.clone()),
        );
        assert_eq!(b.call().await.unwrap(), "ok");
        // Another client keeps the server busy for 1.5 s (a script that spins):
        // it answers nobody meanwhile.
        let mut other = raw(&redis);
        let busy = std::thread::spawn(move || {
            redis::cmd("EVAL")
                .arg(
                    "local t0 = redis.call('TIME') while true do local t = redis.call('TIME') \
                  if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 1500000 then return 1 end end",
                )
                .arg(0)
                .query::<i64>(&mut other)
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        for _ in 0..5 {
            assert_eq!(b.call().await.unwrap(), "ok", "a slow store fails no call");
        }
        assert!(b_store.is_down(), "passed over while it is slow");
        assert_eq!(
            busy.join().expect("the busy client").expect("its script"),
            1
        );
        for _ in 0..100 {
            if b_store.held_for(UPSTREAM).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(!b_store.is_down(), "used again once it answers");
        assert_eq!(b_store.outages(), 1);
    })
    .await;
}

#[tokio::test]
async fn garbage_in_the_keys_is_never_obeyed_and_is_repaired() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let server = FaultServer::start([Fault::ok("ok")]).await;
        let b = Provider::new(
            &server.url("/v1"),
            Upstream::new(UPSTREAM).with_store(store(&redis).await),
        );
        let mut other = raw(&redis);
        let exists = |other: &mut redis::Connection, part: &str| -> bool {
            other.exists(key(part)).unwrap()
        };

        // The wrong types.
        let _: () = other.rpush(key("hold"), "x").unwrap();
        let _: () = other.hset(key("allowance"), "a", "b").unwrap();
        assert_eq!(b.call().await.unwrap(), "ok");
        assert!(!exists(&mut other, "hold") && !exists(&mut other, "allowance"));

        // Holds without expiry, or longer than any an upstream sets.
        let _: () = other.set(key("hold"), "by-hand").unwrap();
        assert_eq!(b.call().await.unwrap(), "ok", "no endless hold");
        assert!(!exists(&mut other, "hold"));
        let _: () = redis::cmd("SET")
            .arg(key("hold"))
            .arg("server-hint")
            .arg("PX")
            .arg(10 * 24 * 3600 * 1000_u64)
            .query(&mut other)
            .unwrap();
        assert_eq!(b.call().await.unwrap(), "ok", "ten days is garbage");
        assert!(!exists(&mut other, "hold"));

        // Allowances that are no count.
        for garbage in ["many", "-5", "1.5", ""] {
            let _: () = other.set_ex(key("allowance"), garbage, 60).unwrap();
            assert_eq!(b.call().await.unwrap(), "ok", "allowance {garbage:?}");
            assert!(!exists(&mut other, "allowance"), "allowance {garbage:?}");
        }
        let _: () = other.set(key("allowance"), "3").unwrap();
        assert_eq!(b.call().await.unwrap(), "ok", "a count without expiry");
        assert!(!exists(&mut other, "allowance"));

        // A probe's lease no process took, without expiry: overwritten.
        let _: () = other.set(key("probe"), "someone").unwrap();
        let _: () = other.pset_ex(key("hold"), "by-hand", 300).unwrap();
        b.upstream.hold_for(Duration::from_millis(300));
        assert_eq!(
            b.call().await.unwrap(),
            "ok",
            "the garbage lease held nobody"
        );

        // A hold whose value is garbage is still a hold: a server hint.
        let _: () = other
            .pset_ex(key("hold"), b"\xff\x00?".as_slice(), 3_600_000)
            .unwrap();
        let held = held(b.call().await);
        assert_eq!(held.reason(), HoldReason::ServerHint);
        assert_eq!(server.requests(), 9, "every call but the held one");
    })
    .await;
}

#[tokio::test]
async fn names_are_used_as_given_and_bounded() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let a = store(&redis).await;
        let b = store(&redis).await;
        let odd = "tenant}{7\n/model: \u{1F980} \u{0}";
        let long = "x".repeat(10_000);
        let longer = format!("{long}y");
        a.hold(odd, HOUR, HoldReason::ByHand);
        a.hold(&long, HOUR, HoldReason::Breaker);
        assert_eq!(seen(&b, odd).await.1, HoldReason::ByHand);
        assert_eq!(seen(&b, &long).await.1, HoldReason::Breaker);
        assert_eq!(
            b.held_for(&longer).await.unwrap(),
            None,
            "a longer name is another upstream"
        );
        assert_eq!(b.held_for("tenant").await.unwrap(), None);
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut raw(&redis)).unwrap();
        assert!(
            keys.iter().all(|k| k.starts_with(b"nika-retry:upstream:{")),
            "{keys:?}"
        );
        assert!(keys.iter().all(|k| k.len() < 300), "bounded keys");
    })
    .await;
}

#[tokio::test]
async fn a_password_never_shows() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let secret = "hunter2-s3cret";

        // A server with no password refuses it; a port nobody listens on.
        let on_socket = format!("{}?pass={secret}", redis.url());
        let nobody = format!("redis://:{secret}@127.0.0.1:1/0");
        for url in [on_socket, nobody] {
            let store = RedisStore::connect(&url).await.expect("a Redis URL");
            let _ = store.held_for(UPSTREAM).await;
            assert_eq!(said(&store.to_string(), "does not answer"), 1, "{store}");
            let error = store.held_for(UPSTREAM).await.unwrap_err();
            for text in [store.to_string(), format!("{store:?}"), error.to_string()] {
                assert!(!text.contains(secret), "{text}");
            }
            assert!(store.is_down(), "{store:?}");
        }
        let error = RedisStore::connect(&format!("http://:{secret}@example.com"))
            .await
            .unwrap_err();
        assert!(!error.to_string().contains(secret), "{error}");
        let text = logs().text();
        assert!(!text.contains(secret), "{text}");
    })
    .await;
}

#[tokio::test]
async fn a_probe_waiting_for_another_processes_probe_goes_when_redis_dies() {
    bounded(async {
        logs();
        let mut redis = RedisServer::start();
        let server = FaultServer::start([Fault::ok("ok")]).await;
        let a = store(&redis).await;
        let b = Provider::new(
            &server.url("/v1"),
            Upstream::new(UPSTREAM).with_store(store(&redis).await),
        );
        assert_eq!(a.probe(UPSTREAM, 7).await.unwrap(), ProbeTurn::Go);
        let call = b.call();
        tokio::pin!(call);
        let early = tokio::time::timeout(Duration::from_millis(300), &mut call).await;
        assert!(early.is_err(), "b went while the probe was out: {early:?}");
        redis.kill();
        // The store is passed over: b's probe goes on its own, well before the
        // other's lease (5 s) would have expired, and never polls a dead store.
        let went = tokio::time::timeout(Duration::from_secs(3), call).await;
        assert_eq!(went.expect("failed open").unwrap(), "ok");
        assert_eq!(server.requests(), 1);
    })
    .await;
}

/// Issue 41's stall: a probe whose lease the server lent late (it was busy:
/// the probe went on without its answer, the store then passed over) gave
/// its lease back while the store was passed over; the release was dropped,
/// and every other process waited out the 5 s lease while nothing held the
/// upstream. Now the release is sent again until the server takes it.
#[tokio::test]
async fn a_probes_lease_lent_late_is_given_back_once_the_store_answers() {
    bounded(async {
        logs();
        let redis = RedisServer::start();
        let server = FaultServer::start([Fault::ok("ok")]).await;
        let url = server.url("/v1");
        // a's store waits the default 50 ms: its probe's lease request,
        // answered late, is what this test is about.
        let a_store = quick(&redis).await;
        let a = Provider::new(&url, Upstream::new(UPSTREAM).with_store(a_store.clone()));
        let b_store = store(&redis).await;
        let b = Provider::new(&url, Upstream::new(UPSTREAM).with_store(b_store.clone()));
        // The lease script loaded on the server, as in any fleet that has
        // probed once (a first `EVALSHA` answered late would find it
        // missing and take no lease).
        assert_eq!(b_store.probe("warm-up", 1).await.unwrap(), ProbeTurn::Go);
        b_store.hold(UPSTREAM, Duration::from_secs(2), HoldReason::ByHand);
        seen(&b_store, UPSTREAM).await;
        // Busy from about 0.3 s to 3 s: a's probe asks for its lease at the
        // hold's end (at most 2 s) and gets no answer in time.
        let busy = busy(
            &redis,
            Duration::from_millis(300),
            Duration::from_millis(2_700),
        );
        // a's own hold too, whatever its store answered: its call is the probe.
        a.upstream.hold_for(Duration::from_secs(2));
        let a_started = tokio::time::Instant::now();
        assert_eq!(a.call().await.unwrap(), "ok", "a's probe went on its own");
        assert!(
            a_started.elapsed() >= Duration::from_millis(1_500),
            "a probed"
        );
        assert!(
            a_store.is_down(),
            "the store did not answer the probe in time"
        );
        // Waited for without blocking the runtime: its tasks (the store's
        // writer) run meanwhile, as in any process.
        while !busy.is_finished() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(busy.join().expect("the busy client"), 1);
        // Nothing holds the upstream now: b goes within a few polls.
        let started = tokio::time::Instant::now();
        assert_eq!(b.call().await.unwrap(), "ok");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "b waited {:?} for a lease nobody holds",
            started.elapsed()
        );
        assert_eq!(server.requests(), 2);
    })
    .await;
}
