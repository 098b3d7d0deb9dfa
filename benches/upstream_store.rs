//! What the upstream store costs an attempt (results in BENCHMARKS.md,
//! "A fleet on Redis"): a `#[retry(upstream = …)]` call whose attempt
//! returns at once, through
//!
//! - `no_store`: an open upstream in this process only (one atomic load);
//! - `in_process`: the upstream with an `InProcess` store;
//! - `redis`: the upstream with a `RedisStore` on a local `redis-server`
//!   (a unix socket; the harness starts it): one script round trip;
//! - `redis_attempt`: that round trip alone (`Store::attempt`).
//!
//! ```sh
//! cargo bench --features redis --bench upstream_store -- --warm-up-time 1 --measurement-time 3
//! ```

use std::hint::black_box;

use criterion::{Criterion, criterion_group};
use nika_retry::upstream::{Held, InProcess, RedisStore, Store, Upstream};
use nika_retry::{Classify, ErrorCategory, retry};
use nika_retry_tests::redis_server::RedisServer;

#[derive(Debug)]
struct Error;

impl Classify for Error {
    fn category(&self) -> ErrorCategory {
        ErrorCategory::Permanent
    }
}

impl From<Held> for Error {
    fn from(_: Held) -> Error {
        Error
    }
}

struct Client {
    upstream: Upstream,
}

impl Client {
    #[retry(layer = "provider", upstream = self.upstream)]
    async fn call(&self, n: u64) -> Result<u64, Error> {
        Ok(n + 1)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn benches(c: &mut Criterion) {
    let redis = RedisServer::start();
    let rt = runtime();
    let store = rt
        .block_on(RedisStore::connect(&redis.url()))
        .expect("a Redis URL");
    let clients = [
        ("no_store", Upstream::new("bench/model")),
        (
            "in_process",
            Upstream::new("bench/model").with_store(InProcess::default()),
        ),
        (
            "redis",
            Upstream::new("bench/model").with_store(store.clone()),
        ),
    ];
    let mut group = c.benchmark_group("upstream_store");
    for (name, upstream) in clients {
        let client = Client { upstream };
        group.bench_function(name, |b| {
            b.to_async(&rt)
                .iter(|| async { client.call(black_box(1)).await.map_err(drop) })
        });
    }
    group.bench_function("redis_attempt", |b| {
        b.to_async(&rt).iter(|| async {
            store
                .attempt(black_box("bench/model"), 1)
                .await
                .map_err(drop)
        })
    });
    group.finish();
    assert!(!store.is_down(), "the store answered throughout");
}

criterion_group!(upstream_store, benches);

fn main() {
    upstream_store();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
