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
    command.args(redis).stdout(std::process::Stdio::null());
    command
        .kill_on_drop(true)
        .spawn()
        .expect("a worker process")
}

/// Runs the fleet: one worker, and once its first request was answered
/// (with Redis: once its hold is in the store), the others. How many 429s
/// the fault server answered.
async fn fleet(redis: Option<&RedisServer>) -> usize {
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
    for mut worker in workers {
        let status = worker.wait().await.expect("a worker's exit");
        assert!(status.success(), "a worker failed: {status}");
    }
    let limited = server.limited();
    assert_eq!(
        server.requests() - limited,
        WORKERS * CALLS as usize,
        "every call answered 200 once"
    );
    limited
}

#[tokio::test]
async fn the_fleet_on_redis_meets_one_429_where_alone_each_process_meets_its_own() {
    let redis = RedisServer::start();
    assert_eq!(fleet(Some(&redis)).await, 1, "one 429 for the whole fleet");
    assert_eq!(
        fleet(None).await,
        WORKERS,
        "one per process without the store"
    );
}
