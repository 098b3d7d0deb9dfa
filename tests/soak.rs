//! Fault soak and the fleet view, against the loopback fault server: many
//! concurrent calls through provider-over-http, every fault kind mixed in,
//! and a round of streamed calls with stalls and cuts before and after the
//! first token. Bounded: a few hundred calls, a few seconds, loopback only.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Boundary, Layer, RetryConfig};
use nika_retry_tests::fault::{Fault, FaultServer, LIFETIME, Step};
use nika_retry_tests::verb::{Provider, ProviderError, RequestOptions, Transport};
use tokio::time::Instant;

const CALLS: usize = 200;

/// The two tests count the process's tasks and sockets: they run one at a
/// time, each on its own runtime, shut down before the other starts.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serially<F: std::future::Future>(test: F) -> F::Output {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(test)
}

fn fast_http() -> RequestOptions {
    let retry = RetryConfig::for_layer(Layer::Http)
        .with_initial_backoff(Duration::from_millis(10))
        .unwrap();
    RequestOptions {
        read_timeout: Duration::from_millis(200),
        retry: Some(retry),
        ..RequestOptions::default()
    }
}

/// The task's `retry:` for the provider layer: 3 attempts, 20 ms apart.
fn provider_retry() -> TaskPolicy {
    let yaml = "retry: { max_attempts: 3, delay_ms: 20, backoff: constant }";
    serde_norway::from_str(yaml).unwrap()
}

/// [`provider_retry`], the task bounded to 3 s.
fn task_policy() -> TaskPolicy {
    provider_retry().with_timeout(Duration::from_secs(3))
}

/// Requests the server saw, by request body: each call sends its own.
fn requests_by_call(server: &FaultServer) -> HashMap<String, usize> {
    let mut calls = HashMap::new();
    for hit in server.hits() {
        *calls.entry(hit.body).or_insert(0) += 1;
    }
    calls
}

/// Requests the server saw, by `Idempotency-Key`: one key per http-layer
/// call, which makes at most its 3 attempts.
fn requests_by_key(server: &FaultServer) -> HashMap<String, usize> {
    let mut keys = HashMap::new();
    for hit in server.hits() {
        let key = hit.idempotency_key.expect("every request carries its key");
        *keys.entry(key).or_insert(0) += 1;
    }
    keys
}

/// The largest `total_attempts` any event of a call reported.
#[derive(Default)]
struct MaxAttempts(AtomicU32);

impl RetryObserver for MaxAttempts {
    fn on_event(&self, event: &RetryEvent) {
        self.0.fetch_max(event.total_attempts, Ordering::Relaxed);
    }
}

fn every_fault() -> Vec<Fault> {
    let cycle = [
        Fault::ok("ok"),
        Fault::UnavailableFor(0),
        Fault::Reset,
        Fault::Stall(Duration::from_millis(400), "late".into()),
        Fault::Status(500),
        Fault::RateLimited { retry_after_ms: 30 },
        Fault::Hang,
        Fault::ok("ok"),
        Fault::Status(401),
        Fault::Status(404),
        Fault::UnavailableUntil(Duration::from_secs(0)),
        Fault::ok("ok"),
    ];
    cycle.iter().cycle().take(CALLS * 9).cloned().collect()
}

/// One round of `CALLS` concurrent tasks under `policy`; returns (ok,
/// failed, worst elapsed, worst attempts).
async fn round(server: &FaultServer, policy: TaskPolicy) -> (usize, usize, Duration, u32) {
    let outcomes = calls(server, policy).await;
    for call in &outcomes {
        if let Err(ProviderError::Timeout(t)) = &call.result {
            if t.boundary() == Boundary::Total {
                assert!(call.elapsed >= t.limit(), "{:?} < {t}", call.elapsed);
            }
        }
    }
    let ok = outcomes.iter().filter(|o| o.result.is_ok()).count();
    let worst = outcomes.iter().map(|o| o.elapsed).max();
    let most = outcomes.iter().map(|o| o.attempts).max();
    (
        ok,
        CALLS - ok,
        worst.unwrap_or_default(),
        most.unwrap_or_default(),
    )
}

/// How one call of a round ended.
struct CallOutcome {
    result: Result<String, ProviderError>,
    elapsed: Duration,
    /// The largest `total_attempts` of its events.
    attempts: u32,
}

/// `CALLS` concurrent calls through provider-over-http, each in its own task scope.
async fn calls(server: &FaultServer, policy: TaskPolicy) -> Vec<CallOutcome> {
    let provider = Arc::new(Provider::new(Transport::new(server.url(""), fast_http())));
    let calls: Vec<_> = (0..CALLS)
        .map(|i| {
            let (provider, policy) = (provider.clone(), policy.clone());
            tokio::spawn(async move {
                let counter = Arc::new(MaxAttempts::default());
                let start = Instant::now();
                let prompt = format!("prompt {i}");
                let result =
                    observe(counter.clone(), scope(policy, provider.complete(&prompt))).await;
                CallOutcome {
                    result,
                    elapsed: start.elapsed(),
                    attempts: counter.0.load(Ordering::Relaxed),
                }
            })
        })
        .collect();
    let mut outcomes = Vec::with_capacity(CALLS);
    for call in calls {
        outcomes.push(call.await.unwrap());
    }
    outcomes
}

/// A round where the task's `timeout:` is what stops every call: the server
/// never answers, and the 9 attempts of 200 ms read timeouts that the budget
/// allows would take 1.8 s, far past the 400 ms deadline.
async fn deadline_round() {
    const DEADLINE: Duration = Duration::from_millis(400);
    let server = FaultServer::start_bounded([Fault::Hang], CALLS * 9 + 1, LIFETIME).await;
    let policy = task_policy().with_timeout(DEADLINE);
    let outcomes = calls(&server, policy).await;
    let mut worst = Duration::ZERO;
    for call in &outcomes {
        let Err(ProviderError::Timeout(timeout)) = &call.result else {
            panic!("{:?}", call.result);
        };
        assert_eq!(
            (timeout.boundary(), timeout.limit(), timeout.layer()),
            (Boundary::Total, DEADLINE, Layer::Task)
        );
        // Cut during its attempts: before the ninth, and not before the deadline.
        assert!(call.attempts < 9, "{}", call.attempts);
        assert!(call.elapsed >= DEADLINE, "{:?}", call.elapsed);
        worst = worst.max(call.elapsed);
    }
    let requests = server.requests();
    let by_call = requests_by_call(&server);
    let worst_call = by_call.values().max().copied().unwrap_or(0);
    println!(
        "deadline round: {CALLS} calls cut at {DEADLINE:?}, {requests} requests, worst call {worst:?}, most requests for a call {worst_call}"
    );
    // Fewer requests than the attempts the calls were allowed, call by call.
    assert!((1..CALLS * 9).contains(&requests), "{requests}");
    assert!(
        worst_call < 9,
        "a call reached its ninth request: {by_call:?}"
    );
}

// The leak checks read /proc; where it cannot be read they fail rather than
// compare two zeros.

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("the leak check reads /proc/self/fd")
        .count()
}

fn rss_kib() -> u64 {
    let statm =
        std::fs::read_to_string("/proc/self/statm").expect("the leak check reads /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no resident page count in /proc/self/statm: {statm:?}"));
    pages * 4
}

#[test]
fn soak_200_concurrent_calls_through_every_fault() {
    serially(soak())
}

async fn soak() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();
    let fds_before = open_fds();
    let mut rss = vec![];
    for _ in 0..2 {
        // Counts one request past the budget of every call, so that the
        // bound below can fail.
        let server = FaultServer::start_bounded(every_fault(), CALLS * 9 + 1, LIFETIME).await;
        let (ok, failed, worst, most) = round(&server, task_policy()).await;
        // Each call within its budget of 9 requests, each http call within
        // its 3 attempts: a call making 20 requests cannot hide in the total.
        let by_call = requests_by_call(&server);
        let worst_call = by_call.values().max().copied().unwrap_or(0);
        let worst_key = requests_by_key(&server).into_values().max().unwrap_or(0);
        println!(
            "soak round: {ok} ok, {failed} failed, {} requests, worst call {worst:?}, most attempts {most}, most requests for a call {worst_call} and for a key {worst_key}, rss {} KiB",
            server.requests(),
            rss_kib()
        );
        assert_eq!(ok + failed, CALLS);
        assert!(ok > 0 && failed > 0, "the mix has both outcomes");
        assert!(most <= 9, "a call exceeded its attempt budget: {most}");
        assert!(by_call.len() <= CALLS, "{}", by_call.len());
        assert!(
            (1..=9).contains(&worst_call),
            "{worst_call} requests for one call"
        );
        // One idempotency key per logical request, across both layers.
        assert_eq!(
            worst_key, worst_call,
            "a key per call: {worst_key} requests for one key, {worst_call} for one call"
        );
        // No upper bound on `worst`: how late a task is scheduled after its
        // deadline fires is the loaded machine's, not the library's (worst
        // seen: 3.006 s of 3 s). The deadline round below shows the deadline
        // is what stops calls.
        assert!(server.requests() <= CALLS * 9, "{}", server.requests());
        drop(server);
        rss.push(rss_kib());
    }
    deadline_round().await;
    // Every spawned call and every server connection is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while metrics.num_alive_tasks() > tasks_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(metrics.num_alive_tasks(), tasks_before, "leaked tasks");
    // Every socket, the client's and the server's, is closed again.
    while open_fds() > fds_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(open_fds(), fds_before, "leaked sockets");
    // The second round does not grow memory beyond noise.
    assert!(
        rss[1] <= rss[0] + 16 * 1024,
        "rss grew from {} to {} KiB",
        rss[0],
        rss[1]
    );
}

/// Requests the server saw for each of 100 calls into a provider that
/// fails every request (each call sends its own body, `call {i}`).
async fn requests_per_call(
    policy: Option<TaskPolicy>,
    http: RequestOptions,
    single: bool,
) -> Vec<usize> {
    const N: usize = 100;
    let server = FaultServer::start([Fault::Status(503)]).await;
    let provider = Arc::new(Provider::new(Transport::new(server.url(""), http)));
    let calls: Vec<_> = (0..N)
        .map(|i| {
            let (provider, policy) = (provider.clone(), policy.clone());
            tokio::spawn(async move {
                let prompt = format!("call {i}");
                if single {
                    let _ = provider_once(&provider, &prompt).await;
                    return;
                }
                let _ = match policy {
                    Some(p) => scope(p, provider.complete(&prompt)).await,
                    None => provider.complete(&prompt).await,
                };
            })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    let by_call = requests_by_call(&server);
    (0..N)
        .map(|i| by_call.get(&format!("call {i}")).copied().unwrap_or(0))
        .collect()
}

/// The mean of `counts`, and the one count every call made, if they agree.
fn per_call(counts: &[usize]) -> (f64, Option<usize>) {
    let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
    let first = counts.first().copied();
    (mean, first.filter(|f| counts.iter().all(|n| n == f)))
}

/// "No framework": one plain request per call.
async fn provider_once(provider: &Provider, prompt: &str) -> Result<String, ProviderError> {
    let once = RetryConfig::for_layer(Layer::Task);
    scope(
        TaskPolicy::new().with_retry(once),
        provider.complete(prompt),
    )
    .await
}

#[test]
fn amplification_under_a_full_outage() {
    serially(amplification())
}

async fn amplification() {
    // No `timeout:`: 100 concurrent calls of 9 requests share 2 threads, and
    // a task deadline would stop the slow ones early, whatever the policy.
    let fast_provider = |budget: u32| provider_retry().with_budget(budget);
    // No read timeout within reach: on a loaded machine a 200 ms one can
    // expire before the server has read the request, which then goes
    // uncounted.
    let patient_http = || RequestOptions {
        read_timeout: Duration::from_secs(30),
        ..fast_http()
    };
    let single_http = || RequestOptions {
        retry: Some(
            RetryConfig::for_layer(Layer::Http)
                .with_max_attempts(1)
                .unwrap(),
        ),
        ..patient_http()
    };
    let no_framework = requests_per_call(None, single_http(), true).await;
    let unbounded = requests_per_call(Some(fast_provider(1_000)), patient_http(), false).await;
    let budget_default = requests_per_call(Some(fast_provider(9)), patient_http(), false).await;
    let budget_5 = requests_per_call(Some(fast_provider(5)), patient_http(), false).await;
    let rows = [
        ("no framework (one attempt)", &no_framework, 1),
        ("provider 3 × http 3, no budget", &unbounded, 9),
        ("same, cumulative budget 9 (default)", &budget_default, 9),
        ("same, cumulative budget 5", &budget_5, 5),
    ];
    println!("| configuration | requests per call |");
    println!("|---|---|");
    for (configuration, counts, _) in rows {
        println!("| {configuration} | {:.2} |", per_call(counts).0);
    }
    // Every call made exactly the requests its configuration allows: nested
    // layers multiply (3 × 3), the default budget admits exactly that, and
    // a budget of 5 bounds each call.
    for (configuration, counts, expected) in rows {
        assert_eq!(
            per_call(counts),
            (expected as f64, Some(expected)),
            "{configuration}: {counts:?}"
        );
    }
}

// ---- Streamed calls.

const STREAMS: usize = 300;

/// The read limit of the streamed calls: what cuts a stall, before the first
/// token (the attempt is retried) and after it (the stream ends).
const STREAM_READ: Duration = Duration::from_millis(300);

/// The streamed scripts of the round, drawn in a fixed pseudo-random order.
/// A stall is a `Stall` (nothing more is ever sent), never a long wait
/// followed by a token, so that a token the server wrote was one the client
/// was still reading; the waits of a live stream are far below the read
/// limit.
fn stream_faults(n: usize) -> Vec<Fault> {
    let kinds = [
        // Content, then the end.
        Fault::stream(Step::tokens(3)),
        Fault::steady(Duration::from_millis(20), 5),
        Fault::stream([Step::Meta("usage".into()), Step::Event("t1".into())]),
        // Before the first token: retried.
        Fault::stream([Step::Stall]),
        Fault::stream([Step::Meta("ping".into()), Step::Stall]),
        Fault::stream([Step::Cut]),
        Fault::stream([Step::Meta("usage".into()), Step::Cut]),
        Fault::stream([Step::Reset]),
        Fault::Status(503),
        // After it: the caller's, never retried.
        Fault::stream(Step::tokens(2).chain([Step::Cut])),
        Fault::stream(Step::tokens(1).chain([Step::Stall])),
        Fault::stream(Step::tokens(1).chain([Step::Wait(Duration::from_millis(20)), Step::Stall])),
    ];
    // xorshift64, seeded: the same draw on every run.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            kinds[(state % kinds.len() as u64) as usize].clone()
        })
        .collect()
}

/// How one streamed call ended.
#[derive(Debug, PartialEq)]
enum StreamEnd {
    /// The call failed before any token (its retries spent).
    Failed,
    /// Every token, then the end.
    Complete,
    /// Tokens, then one timeout item, then the end.
    TimedOut,
    /// Tokens, then one error item, then the end.
    Broken,
}

/// What the caller of one streamed call saw.
struct Streamed {
    end: StreamEnd,
    /// The tokens it read.
    tokens: usize,
    /// The retries the call had made when it returned.
    retries: u32,
}

/// Counts a call's retries.
#[derive(Default)]
struct Retries(AtomicU32);

impl RetryObserver for Retries {
    fn on_event(&self, event: &RetryEvent) {
        if event.outcome == nika_retry::events::Outcome::Retrying {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One streamed call: opened under the task's `retry:`, read to its end.
async fn streamed_call(provider: &Provider) -> Streamed {
    let retry = "retry: { max_attempts: 3, delay_ms: 20, backoff: constant }";
    let policy: TaskPolicy = serde_norway::from_str(retry).unwrap();
    let counter = Arc::new(Retries::default());
    let opened = observe(counter.clone(), scope(policy, provider.stream("prompt"))).await;
    let retries = counter.0.load(Ordering::Relaxed);
    let Ok(mut stream) = opened else {
        let end = StreamEnd::Failed;
        return Streamed {
            end,
            tokens: 0,
            retries,
        };
    };
    let mut tokens = 0;
    let mut end = StreamEnd::Complete;
    while let Some(item) = stream.next().await {
        assert_eq!(
            end,
            StreamEnd::Complete,
            "an item after the error: {item:?}"
        );
        match item {
            Ok(chunk) => tokens += usize::from(chunk.is_token()),
            Err(ProviderError::Timeout(t)) => {
                assert_eq!(
                    (t.boundary(), t.limit(), t.layer()),
                    (Boundary::Read, STREAM_READ, Layer::Provider)
                );
                end = StreamEnd::TimedOut;
            }
            Err(_) => end = StreamEnd::Broken,
        }
    }
    assert!(tokens > 0, "a stream starts with a token");
    Streamed {
        end,
        tokens,
        retries,
    }
}

#[test]
fn soak_300_concurrent_streamed_calls_with_stalls_and_cuts() {
    serially(stream_soak())
}

async fn stream_soak() {
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();
    let fds_before = open_fds();
    let faults = stream_faults(STREAMS * 3);
    let server = FaultServer::start_bounded(faults, STREAMS * 3 + 1, LIFETIME).await;
    let start = Instant::now();
    let calls: Vec<_> = (0..STREAMS)
        .map(|i| {
            // A provider per call, its path naming the call, so that the
            // server's requests can be told apart per call.
            let options = RequestOptions {
                read_timeout: STREAM_READ,
                ..RequestOptions::default()
            };
            let base = server.url(&format!("/call/{i}"));
            let provider = Provider::new(Transport::new(base, options));
            tokio::spawn(async move {
                // A stream that never ends fails here, not at the server's lifetime.
                tokio::time::timeout(Duration::from_secs(30), streamed_call(&provider))
                    .await
                    .expect("every stream ends")
            })
        })
        .collect();
    let mut calls_seen = Vec::with_capacity(STREAMS);
    for call in calls {
        calls_seen.push(call.await.unwrap());
    }
    let elapsed = start.elapsed();
    let hits = server.hits();
    let of_call = |i: usize| {
        let path = format!("/call/{i}/");
        let mine: Vec<_> = hits.iter().filter(|h| h.path.starts_with(&path)).collect();
        mine
    };
    let retry_count = |hit: &nika_retry_tests::fault::Hit| -> u32 {
        hit.retry_count.as_deref().unwrap().parse().unwrap()
    };
    // Tokens the server wrote to an attempt that `read` then cut before it
    // had read them: the client's attempt and the server's write crossed.
    let mut unread = 0;
    for (i, call) in calls_seen.iter().enumerate() {
        let requests = of_call(i);
        // An attempt cut while it connects never reaches the server.
        assert!((0..=3).contains(&requests.len()), "call {i}: {requests:?}");
        let most = requests.iter().map(|h| retry_count(h)).max();
        if call.end == StreamEnd::Failed {
            assert!(most.unwrap_or(0) <= 2, "call {i}: {requests:?}");
            continue;
        }
        // Nothing after content is retried: no request of a later attempt
        // than the one that returned the stream.
        assert!(most.unwrap() <= call.retries, "call {i}: {requests:?}");
        let last = requests.iter().find(|h| retry_count(h) == call.retries);
        let last = last.unwrap_or_else(|| panic!("call {i}: {requests:?}"));
        // What the caller saw came from that attempt's request.
        assert!(call.tokens <= last.events_sent, "call {i}: {requests:?}");
        unread += requests
            .iter()
            .filter(|h| retry_count(h) < call.retries && h.events_sent > 0)
            .count();
    }
    let count = |end: StreamEnd| calls_seen.iter().filter(|c| c.end == end).count();
    let retried = calls_seen.iter().filter(|c| c.retries > 0).count();
    println!(
        "streamed round: {STREAMS} calls in {elapsed:?}: {} complete, {} cut by read after content, \
         {} broken after content, {} failed before content; {retried} retried before content, \
         {} requests, {} hang-ups seen by the server, {unread} tokens written to an attempt read had cut",
        count(StreamEnd::Complete),
        count(StreamEnd::TimedOut),
        count(StreamEnd::Broken),
        count(StreamEnd::Failed),
        hits.len(),
        server.hangups(),
    );
    for end in [StreamEnd::Complete, StreamEnd::TimedOut, StreamEnd::Broken] {
        assert!(count(end) > 0, "the mix has every ending");
    }
    assert!(retried > 0);
    // Every client is gone with its task: so is every connection, the
    // server's and the client's, and every task.
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.open_connections() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(server.open_connections(), 0, "connections left open");
    drop(server);
    while metrics.num_alive_tasks() > tasks_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(metrics.num_alive_tasks(), tasks_before, "leaked tasks");
    while open_fds() > fds_before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(open_fds(), fds_before, "leaked sockets");
}
