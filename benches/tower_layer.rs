//! The success path of `nika_retry::tower::RetryLayer` (results in
//! BENCHMARKS.md, "The tower layer"), side by side in one run with
//!
//! - `bare`: the inner service alone (`ready`, then `call`);
//! - `tower_retry`: `tower::retry::Retry` with a trivial policy (clones the
//!   request, never retries), tower's own retry at its cheapest;
//! - `retry_layer`: `RetryLayer::new(Layer::Http)`, the http layer's
//!   defaults (3 attempts, the RFC 9110 idempotence of the method).
//!
//! The inner service answers `200 OK` at once; the request is an
//! `http::Request<Bytes>` (its clone allocates nothing: an empty header
//! map, a static URI and body). Before criterion, a table of heap
//! allocations per call, counted by the `#[global_allocator]` below.
//!
//! ```sh
//! cargo bench --bench tower_layer -- --warm-up-time 1 --measurement-time 3
//! BENCH=tower_layer bash benches/instructions.sh '' tower/bare tower/tower_retry tower/retry_layer
//! ```

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::Bytes;
use criterion::Criterion;
use http::{Request, Response};
use nika_retry::tower::RetryLayer;
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer, TimeoutError};
use tokio::runtime::Runtime;
use tower::{Layer as _, Service, ServiceExt};

#[path = "support/bench_run.rs"]
mod bench_run;
#[path = "support/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::ALLOCS;

/// The inner service's error, as the layer needs it; never made.
#[derive(Debug, Classify)]
enum Error {
    #[category(transparent)]
    Timeout(TimeoutError),
    #[category(transparent)]
    Held(Held),
}

impl From<TimeoutError> for Error {
    fn from(e: TimeoutError) -> Error {
        Error::Timeout(e)
    }
}

impl From<Held> for Error {
    fn from(e: Held) -> Error {
        Error::Held(e)
    }
}

impl From<Infallible> for Error {
    fn from(e: Infallible) -> Error {
        match e {}
    }
}

/// Answers `200 OK` at once, always ready.
#[derive(Clone, Copy)]
struct Ok200;

impl Service<Request<Bytes>> for Ok200 {
    type Response = Response<Bytes>;
    type Error = Error;
    type Future = Ready<Result<Response<Bytes>, Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        black_box(&request);
        ready(Ok(Response::new(Bytes::new())))
    }
}

/// tower's retry at its cheapest: clones the request, never retries.
#[derive(Clone, Copy)]
struct Never;

impl tower::retry::Policy<Request<Bytes>, Response<Bytes>, Error> for Never {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _: &mut Request<Bytes>,
        _: &mut Result<Response<Bytes>, Error>,
    ) -> Option<Ready<()>> {
        None
    }

    fn clone_request(&mut self, request: &Request<Bytes>) -> Option<Request<Bytes>> {
        Some(request.clone())
    }
}

fn request() -> Request<Bytes> {
    Request::get("http://localhost/")
        .body(Bytes::from_static(b"ping"))
        .expect("a valid request")
}

/// One request through `service`, its status.
async fn send<S>(service: &mut S) -> u16
where
    S: Service<Request<Bytes>, Response = Response<Bytes>, Error = Error>,
{
    let Ok(ready) = service.ready().await else {
        panic!("not ready")
    };
    match ready.call(black_box(request())).await {
        Ok(response) => response.status().as_u16(),
        Err(e) => panic!("{e:?}"),
    }
}

/// Runs `calls` requests through the contender `name`.
fn run(rt: &Runtime, name: &str, calls: u32) {
    macro_rules! calls {
        ($service:expr) => {{
            let mut service = $service;
            rt.block_on(async {
                for _ in 0..calls {
                    assert_eq!(send(&mut service).await, 200);
                }
            })
        }};
    }
    match name {
        "bare" => calls!(Ok200),
        "tower_retry" => calls!(tower::retry::Retry::new(Never, Ok200)),
        "retry_layer" => calls!(RetryLayer::new(Layer::Http).layer(Ok200)),
        other => panic!("no contender {other}"),
    }
}

const CONTENDERS: [&str; 3] = ["bare", "tower_retry", "retry_layer"];

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
}

fn print_allocations(rt: &Runtime) {
    const CALLS: u32 = 10_000;
    println!("\n## Heap allocations per request ({CALLS} after 1000 warm-up)\n");
    println!("| contender | allocations per request |\n|---|---:|");
    for name in CONTENDERS {
        run(rt, name, 1_000);
        let before = ALLOCS.load(Ordering::SeqCst);
        run(rt, name, CALLS);
        let per = (ALLOCS.load(Ordering::SeqCst) - before) as f64 / f64::from(CALLS);
        println!("| {name} | {per:.2} |");
    }
    println!();
}

fn main() {
    let rt = runtime();
    if let Some((contender, calls)) = bench_run::requested() {
        let name = contender.strip_prefix("tower/").unwrap_or(&contender);
        run(&rt, name, calls);
        return;
    }
    print_allocations(&rt);
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("tower");
    for name in CONTENDERS {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let calls = u32::try_from(iters).unwrap_or(u32::MAX);
                let started = std::time::Instant::now();
                run(&rt, name, calls);
                started.elapsed()
            })
        });
    }
    group.finish();
    criterion.final_summary();
}
