//! A fleet of worker processes (`fleet-worker`, this package's binary) on
//! one provider key against the fault server: with the upstream in Redis,
//! the first worker's 429 holds every worker that starts after it, and the
//! fleet meets one 429; each process alone meets one of its own. Run with
//! `cargo test --features redis --test fleet_processes` (needs Debian's
//! package `redis-server`).
#![cfg(feature = "redis")]

use std::time::Duration;

use nika_retry::upstream::{RedisStore, Store};
use nika_retry_tests::fault::{Fault, FaultServer};
use nika_retry_tests::fleet::UPSTREAM;
use nika_retry_tests::redis_server::RedisServer;
use tokio::process::{Child, Command};

const WORKERS: usize = 4;
const CALLS: u32 = 3;

/// A 5 s limit opened by the first request; its 429s ask for 5 s. Long
/// enough for every worker to start inside it.
fn window() -> Fault {
    Fault::LimitWindow {
        window: Duration::from_secs(5),
        retry_after: 5,
    }
}

fn worker(server: &FaultServer, redis: Option<&str>) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fleet-worker"));
    command.arg(server.url("/v1/chat")).arg(CALLS.to_string());
    command.args(redis).stdout(std::process::Stdio::piped());
    command
        .kill_on_drop(true)
        .spawn()
        .expect("a worker process")
}

/// Runs the fleet: one worker, and once its first request was answered
/// (with Redis: once its hold is in the store), the others. How many 429s
/// the fault server answered, and how many workers had their store passed
/// over at least once (slower than `STORE_WAIT` on a loaded machine: such
/// a worker goes on its own state, and may meet a 429 of its own).
async fn fleet(redis: Option<&RedisServer>) -> (usize, usize) {
    let server = FaultServer::start([window()]).await;
    let url = redis.map(RedisServer::url);
    let mut workers = vec![worker(&server, url.as_deref())];
    let watch = match &url {
        Some(url) => Some(RedisStore::connect(url).await.expect("a Redis URL")),
        None => None,
    };
    for _ in 0..400 {
        let answered = match &watch {
            Some(store) => matches!(store.held_for(UPSTREAM).await, Ok(Some(_))),
            None => server.requests() > 0,
        };
        if answered {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(server.requests() > 0, "the first worker sent nothing");
    workers.extend((1..WORKERS).map(|_| worker(&server, url.as_deref())));
    let mut passed_over = 0;
    for worker in workers {
        let output = worker.wait_with_output().await.expect("a worker's exit");
        assert!(
            output.status.success(),
            "a worker failed: {}",
            output.status
        );
        let said = String::from_utf8_lossy(&output.stdout);
        let outages: u64 = said
            .split(", ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a worker's report: {said:?}"));
        passed_over += usize::from(outages > 0);
    }
    let limited = server.limited();
    assert_eq!(
        server.requests() - limited,
        WORKERS * CALLS as usize,
        "every call answered 200 once"
    );
    (limited, passed_over)
}

#[tokio::test]
async fn the_fleet_on_redis_meets_one_429_where_alone_each_process_meets_its_own() {
    // Bounded: a regression fails rather than hangs CI.
    let bound = Duration::from_secs(120);
    let test = async {
        let redis = RedisServer::start();
        let (limited, passed_over) = fleet(Some(&redis)).await;
        // One 429 for the whole fleet; a worker whose store was passed over
        // meets at most one of its own (its hold then keeps it back).
        assert!(
            limited >= 1 && limited <= 1 + passed_over,
            "{limited} 429s, {passed_over} workers passed their store over"
        );
        if passed_over == 0 {
            assert_eq!(limited, 1, "one 429 for the whole fleet");
        }
        let (alone, _) = fleet(None).await;
        assert_eq!(alone, WORKERS, "one per process without the store");
    };
    tokio::time::timeout(bound, test)
        .await
        .expect("the fleet ended within 120 s");
}
