//! The fan-out benchmark's fleet: 4 worker processes (the bench's own
//! binary, run again with [`WORKER`] set) share the upstream through
//! `RedisStore` on a `redis-server` of the bench's own (a unix socket),
//! as `tests/fleet_processes.rs` starts them. Each worker connects, says
//! `ready`, waits for `go` on its stdin, makes its share of the calls at
//! once, and prints `done FAILED`.

use std::process::Stdio;
use std::time::Duration;

use nika_retry::upstream::{RedisStore, Upstream};
use nika_retry_tests::fault::quota::QuotaServer;
use nika_retry_tests::redis_server::RedisServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use tokio::process::Command;
use tokio::time::Instant;

use super::{CALLS, Provider};

/// The variable that makes the bench a worker: `URL REDIS UPSTREAM CALLS`,
/// tab-separated.
pub const WORKER: &str = "NIKA_FANOUT_WORKER";

const PROCESSES: u32 = 4;

/// The bench's `redis-server`.
pub struct Redis(RedisServer);

impl Redis {
    pub fn start() -> Redis {
        Redis(RedisServer::start())
    }

    /// The calls of one run, shared out among the processes (an upstream
    /// name of the run's own, so that nothing of an earlier run is left in
    /// Redis): how many failed, and the makespan from `go`.
    pub async fn fleet(&self, server: &QuotaServer, seed: u64, body: &str) -> (usize, Duration) {
        let exe = std::env::current_exe().expect("the bench's binary");
        let upstream = format!("fanout/fleet-{seed}-{}", server.url(""));
        let mut workers = Vec::new();
        for i in 0..PROCESSES {
            let calls = CALLS / PROCESSES + u32::from(i < CALLS % PROCESSES);
            let job = [server.url("/v1/complete"), self.0.url(), upstream.clone()];
            let mut child = Command::new(&exe)
                .env(WORKER, format!("{}\t{calls}\t{body}", job.join("\t")))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("a worker process");
            let stdout = BufReader::new(child.stdout.take().expect("piped")).lines();
            workers.push((child, stdout, calls));
        }
        for (_, lines, _) in &mut workers {
            let ready = lines.next_line().await.expect("a worker's line");
            assert_eq!(ready.as_deref(), Some("ready"), "a worker did not start");
        }
        let started = Instant::now();
        for (child, _, _) in &mut workers {
            let stdin = child.stdin.as_mut().expect("piped");
            stdin.write_all(b"go\n").await.expect("a worker's stdin");
        }
        let mut failed = 0;
        for (mut child, mut lines, calls) in workers {
            let done = lines.next_line().await.ok().flatten().unwrap_or_default();
            failed += match done.strip_prefix("done ") {
                Some(n) => n.parse().unwrap_or(calls as usize),
                None => calls as usize,
            };
            let _ = child.wait().await;
        }
        (failed, started.elapsed())
    }
}

/// A worker's life: the exit code.
pub fn worker(job: &str) -> i32 {
    let fields: Vec<&str> = job.splitn(5, '\t').collect();
    let [url, redis, upstream, calls, body] = fields[..] else {
        eprintln!("{WORKER}: URL REDIS UPSTREAM CALLS BODY, tab-separated");
        return 2;
    };
    let calls: u32 = calls.parse().unwrap_or(0);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let store = match runtime.block_on(RedisStore::connect(redis)) {
        Ok(store) => store,
        Err(e) => {
            eprintln!("fanout worker: {e}");
            return 2;
        }
    };
    let upstream = Upstream::new(upstream.to_owned()).with_store(store);
    let provider = Provider::new(url.to_owned(), upstream);
    println!("ready");
    let mut go = String::new();
    let _ = std::io::stdin().read_line(&mut go);
    let all = (0..calls).map(|_| provider.shared_cost(body));
    let results = runtime.block_on(futures_util::future::join_all(all));
    println!("done {}", results.iter().filter(|r| r.is_err()).count());
    0
}
