//! `#[timeout]` beside `#[retry]`: each limit has one meaning (docs/time-limits.md). `attempt` bounds one attempt, and an expired attempt is retried;
//! `total` bounds the whole call, retries and sleeps included, and is never
//! retried (no sleep is started that would end past it); `read` is
//! inactivity, restarted by every wake-up of the attempt's own, so a
//! streaming response runs past it and a stall is cut; `connect` bounds
//! connection set-up, through `nika_retry::connect` and through a reqwest
//! client built with `nika_retry::http::client_builder()`. Both attribute
//! orders, expression limits and the bare `#[timeout]` of the http layer.
//! Paused clock, except the streaming and connect tests (real sockets).

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Boundary, Classify, ErrorCategory, Layer, RetryConfig, TimeoutError};
use nika_retry::{retry, timeout};
use nika_retry_tests::ProviderError;
use nika_retry_tests::verb::HttpError;
use tokio::time::{Instant, sleep};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A task's `retry:` block with 3 attempts, 100 ms apart.
fn three_attempts() -> RetryConfig {
    serde_norway::from_str("{ max_attempts: 3, delay_ms: 100, backoff: constant, jitter: 0.0 }")
        .unwrap()
}

/// The `TimeoutError` an `io::Error` holds.
fn held(err: &io::Error) -> Option<&TimeoutError> {
    err.get_ref()?.downcast_ref()
}

// ---- `attempt` and `total`, in either order, as literals and expressions.

/// Sleeps `stall` on the attempts listed as slow, else answers at once.
struct Slow {
    attempts: AtomicU32,
    slow_attempts: u32,
    stall: Duration,
}

impl Slow {
    fn new(slow_attempts: u32, stall: Duration) -> Slow {
        Slow {
            attempts: AtomicU32::new(0),
            slow_attempts,
            stall,
        }
    }

    async fn attempt(&self) -> Result<u32, ProviderError> {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.slow_attempts {
            sleep(self.stall).await;
        }
        Ok(n)
    }

    fn attempts(&self) -> u32 {
        self.attempts.load(Ordering::SeqCst)
    }
}

#[retry(layer = "provider", jitter = 0.0)]
#[timeout(attempt = "2s")]
async fn retry_above(slow: &Slow) -> Result<u32, ProviderError> {
    slow.attempt().await
}

#[timeout(attempt = "2s")]
#[retry(layer = "provider", jitter = 0.0)]
async fn timeout_above(slow: &Slow) -> Result<u32, ProviderError> {
    slow.attempt().await
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_times_out_and_is_retried_in_either_order() {
    for order in ["retry above", "timeout above"] {
        let slow = Slow::new(1, secs(3600));
        let start = Instant::now();
        let result = match order {
            "retry above" => retry_above(&slow).await,
            _ => timeout_above(&slow).await,
        };
        assert_eq!(result, Ok(2), "{order}");
        // 2 s timeout, 1 s backoff, then an instant success.
        assert_eq!(start.elapsed(), secs(3), "{order}");
    }
}

#[tokio::test(start_paused = true)]
async fn every_attempt_timing_out_surfaces_the_timeout_error() {
    let slow = Slow::new(u32::MAX, secs(3600));
    let start = Instant::now();
    let err = retry_above(&slow).await.unwrap_err();
    let ProviderError::Timeout(timeout) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        timeout,
        &TimeoutError::new(Boundary::Attempt, secs(2), Layer::Provider)
    );
    assert_eq!(err.category(), ErrorCategory::Transient);
    assert_eq!(slow.attempts(), 3);
    // Three 2 s attempts, 1 s and 4 s apart.
    assert_eq!(start.elapsed(), secs(11));
}

#[retry(layer = "provider", jitter = 0.0)]
#[timeout(total = "4s")]
async fn with_total(slow: &Slow) -> Result<u32, ProviderError> {
    slow.attempt().await
}

#[tokio::test(start_paused = true)]
async fn total_cuts_a_running_attempt_and_is_not_retried() {
    let slow = Slow::new(u32::MAX, secs(3600));
    let start = Instant::now();
    let err = with_total(&slow).await.unwrap_err();
    assert_eq!(
        err,
        ProviderError::Timeout(TimeoutError::new(Boundary::Total, secs(4), Layer::Provider))
    );
    assert_eq!(err.category(), ErrorCategory::Permanent);
    assert_eq!((slow.attempts(), start.elapsed()), (1, secs(4)));
}

#[retry(layer = "provider", jitter = 0.0)]
#[timeout(total = "4500ms")]
async fn failing_with_total(n: &AtomicU32) -> Result<u32, ProviderError> {
    n.fetch_add(1, Ordering::SeqCst);
    Err(ProviderError::status(503))
}

#[tokio::test(start_paused = true)]
async fn no_sleep_is_started_that_would_pass_the_total_deadline() {
    let n = AtomicU32::new(0);
    let start = Instant::now();
    let err = failing_with_total(&n).await.unwrap_err();
    // Slept 1 s after the first attempt; the 4 s sleep would end at 5 s > 4.5 s,
    // so the call returns the last error at 1 s instead of sleeping.
    assert_eq!(err, ProviderError::status(503));
    assert_eq!((n.load(Ordering::SeqCst), start.elapsed()), (2, secs(1)));
}

#[retry(layer = "task")]
#[timeout(attempt = limit, total = total)]
async fn with_expr_limits(
    slow: &Slow,
    limit: Option<Duration>,
    total: Duration,
) -> Result<u32, ProviderError> {
    slow.attempt().await
}

#[tokio::test(start_paused = true)]
async fn expression_limits_apply_and_none_means_no_limit() {
    let slow = Slow::new(1, secs(100));
    let start = Instant::now();
    assert_eq!(with_expr_limits(&slow, None, secs(1000)).await, Ok(1));
    assert_eq!(start.elapsed(), secs(100));

    let slow = Slow::new(1, secs(100));
    let err = with_expr_limits(&slow, Some(secs(5)), secs(1000))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ProviderError::Timeout(TimeoutError::new(Boundary::Attempt, secs(5), Layer::Task))
    );

    let slow = Slow::new(1, secs(100));
    let err = with_expr_limits(&slow, Some(secs(50)), secs(7))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ProviderError::Timeout(TimeoutError::new(Boundary::Total, secs(7), Layer::Task))
    );
}

#[retry(layer = "http", jitter = 0.0)]
#[timeout]
async fn bare_http_timeout(connect_stall: Duration, read_stall: Duration) -> Result<(), HttpError> {
    nika_retry::connect(sleep(connect_stall)).await?;
    sleep(read_stall).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn bare_timeout_on_http_means_connect_10s_and_read_120s() {
    let start = Instant::now();
    let err = bare_http_timeout(secs(11), Duration::ZERO)
        .await
        .unwrap_err();
    let HttpError::Timeout(t) = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        t,
        TimeoutError::new(Boundary::Connect, secs(10), Layer::Http)
    );
    // Three attempts of 10 s each, 250 ms and 1 s apart.
    assert_eq!(start.elapsed(), Duration::from_millis(31_250));

    let start = Instant::now();
    let err = bare_http_timeout(secs(9), secs(200)).await.unwrap_err();
    let HttpError::Timeout(t) = err else {
        panic!("{err:?}")
    };
    assert_eq!(t, TimeoutError::new(Boundary::Read, secs(120), Layer::Http));
    // `read` is inactivity: each attempt's last progress is its connect, at
    // 9 s; cut 120 s later. Three attempts of 129 s, 250 ms and 1 s apart.
    assert_eq!(start.elapsed(), Duration::from_millis(388_250));

    let start = Instant::now();
    assert!(bare_http_timeout(secs(9), secs(110)).await.is_ok());
    assert_eq!(start.elapsed(), secs(119));
}

// ---- A tool fn returning `io::Error`, retried only inside a task that opts in.

/// A tool as tools are written: a shell-like step that returns `io::Error`.
struct Shell {
    runs: AtomicU32,
    timeout: Duration,
}

impl Shell {
    #[retry(layer = "tool")]
    #[timeout(attempt = self.timeout)]
    async fn run(&self, stall: Duration) -> Result<u32, io::Error> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        sleep(stall).await;
        Ok(7)
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_fn_returning_io_error_takes_timeout_and_the_task_scope() {
    let shell = Shell {
        runs: AtomicU32::new(0),
        timeout: ms(500),
    };
    // Alone: one attempt, cut at 500 ms, an io::Error holding the timeout.
    let start = Instant::now();
    let err = shell.run(ms(10_000)).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    assert_eq!(
        held(&err),
        Some(&TimeoutError::new(Boundary::Attempt, ms(500), Layer::Tool))
    );
    assert_eq!(err.category(), ErrorCategory::Transient);
    assert_eq!(
        (shell.runs.load(Ordering::SeqCst), start.elapsed()),
        (1, ms(500))
    );

    // Under a task that opts in: retried, 3 attempts in all.
    shell.runs.store(0, Ordering::SeqCst);
    let policy = TaskPolicy::new().with_retry(three_attempts());
    let start = Instant::now();
    let err = scope(policy, shell.run(ms(10_000))).await.unwrap_err();
    assert_eq!(
        held(&err).map(TimeoutError::boundary),
        Some(Boundary::Attempt)
    );
    assert_eq!(shell.runs.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), ms(3 * 500 + 2 * 100));

    // The task's own `timeout:` expires as an io::Error too, and is permanent.
    shell.runs.store(0, Ordering::SeqCst);
    let policy = TaskPolicy::new()
        .with_retry(three_attempts())
        .with_timeout(ms(800));
    let err = scope(policy, shell.run(ms(10_000))).await.unwrap_err();
    assert_eq!(
        held(&err),
        Some(&TimeoutError::new(Boundary::Total, ms(800), Layer::Task))
    );
    assert_eq!(err.category(), ErrorCategory::Permanent);
    assert_eq!(shell.runs.load(Ordering::SeqCst), 2);

    // A fast run succeeds.
    assert_eq!(shell.run(ms(10)).await.unwrap(), 7);
}

// ---- `read`: inactivity, over a real socket.

/// A loopback server that answers each request with a chunked `200` body of
/// 30 chunks, one every 100 ms (3 s in all); connection `n` (0-based) first
/// stalls `stall(n)` after its tenth chunk. At most 10 connections, 30 s.
struct Streamer {
    addr: std::net::SocketAddr,
    connections: std::sync::Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl Streamer {
    async fn start(stall: fn(u32) -> Duration) -> Streamer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = std::sync::Arc::new(AtomicU32::new(0));
        let count = connections.clone();
        let task = tokio::spawn(async move {
            let serve = async {
                for _ in 0..10 {
                    let Ok((mut socket, _)) = listener.accept().await else {
                        return;
                    };
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(async move {
                        let mut request = Vec::new();
                        let mut buf = [0u8; 1024];
                        while !request.ends_with(b"\r\n\r\n") {
                            match socket.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(k) => request.extend_from_slice(&buf[..k]),
                            }
                        }
                        let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                        if socket.write_all(head.as_bytes()).await.is_err() {
                            return;
                        }
                        for i in 0..30 {
                            if i == 10 {
                                sleep(stall(n)).await;
                            }
                            sleep(ms(100)).await;
                            if socket.write_all(b"1\r\nx\r\n").await.is_err() {
                                return;
                            }
                        }
                        let _ = socket.write_all(b"0\r\n\r\n").await;
                    });
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(30), serve).await;
        });
        Streamer {
            addr,
            connections,
            task,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/stream", self.addr)
    }

    fn connections(&self) -> u32 {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Streamer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads the whole streamed body, chunk by chunk.
async fn read_body(client: &reqwest::Client, url: &str) -> Result<usize, HttpError> {
    let mut response = client.get(url).send().await?;
    let mut len = 0;
    while let Some(chunk) = response.chunk().await? {
        len += chunk.len();
    }
    Ok(len)
}

/// [`read_body`] in 2 attempts.
#[retry(layer = "http", attempts = 2, backoff = "10ms", jitter = 0.0)]
#[timeout(read = "500ms")]
async fn stream_body(client: &reqwest::Client, url: &str) -> Result<usize, HttpError> {
    read_body(client, url).await
}

/// [`read_body`] in one attempt.
#[retry(layer = "http", attempts = 1)]
#[timeout(read = "500ms")]
async fn stream_once(client: &reqwest::Client, url: &str) -> Result<usize, HttpError> {
    read_body(client, url).await
}

fn read_timeout(err: &HttpError) -> Option<&TimeoutError> {
    match err {
        HttpError::Timeout(t) if t.boundary() == Boundary::Read => Some(t),
        _ => None,
    }
}

#[tokio::test]
async fn read_lets_a_streaming_response_run_past_it_and_cuts_a_stall() {
    let client = reqwest::Client::new();
    // 3 s of chunks 100 ms apart under a 500 ms read limit: no timeout.
    let server = Streamer::start(|_| Duration::ZERO).await;
    assert_eq!(stream_body(&client, &server.url()).await.unwrap(), 30);
    assert_eq!(server.connections(), 1);

    // Stalling 1 s after the tenth chunk: a read timeout.
    let server = Streamer::start(|_| Duration::from_secs(1)).await;
    let err = stream_once(&client, &server.url()).await.unwrap_err();
    assert_eq!(
        read_timeout(&err),
        Some(&TimeoutError::new(Boundary::Read, ms(500), Layer::Http)),
        "{err:?}"
    );
    assert_eq!(err.category(), ErrorCategory::Transient);

    // Retried: the first connection stalls, the second streams to the end.
    let server = Streamer::start(|n| {
        if n == 0 {
            Duration::from_secs(1)
        } else {
            Duration::ZERO
        }
    })
    .await;
    let log = std::sync::Arc::new(nika_retry_tests::EventLog::default());
    let body = nika_retry::events::observe(log.clone(), stream_body(&client, &server.url())).await;
    assert_eq!(body.unwrap(), 30);
    assert_eq!(server.connections(), 2);
    use nika_retry::events::Outcome;
    assert_eq!(
        attempts(&log),
        [
            (1, ErrorCategory::Transient, Outcome::Retrying),
            (2, ErrorCategory::Transient, Outcome::Recovered)
        ]
    );
}

#[tokio::test]
async fn a_stalled_attempt_beside_a_busy_sibling_in_join_times_out() {
    let client = reqwest::Client::new();
    // Stalls 20 s after its tenth chunk: only `read` can end it in time.
    let server = Streamer::start(|_| Duration::from_secs(20)).await;
    let ticks = AtomicU32::new(0);
    let stalled = async {
        let out = stream_once(&client, &server.url()).await;
        (out, ticks.load(Ordering::SeqCst))
    };
    // Busy for 3 s: woken every 10 ms, in the same task as the stalled call.
    let busy = async {
        for _ in 0..300 {
            sleep(ms(10)).await;
            ticks.fetch_add(1, Ordering::SeqCst);
        }
    };
    let ((out, ticks_then), ()) = tokio::join!(stalled, busy);
    let err = out.unwrap_err();
    assert!(read_timeout(&err).is_some(), "{err:?}");
    assert!(
        ticks_then < 300,
        "the stalled call ended while its sibling was still busy ({ticks_then} ticks of 300)"
    );
}

// ---- `connect` through a real reqwest client.

/// A loopback listener that never accepts, its accept queue filled until a
/// connect to it hangs (the kernel drops the SYN); the probes that filled it
/// and the one that hung show it.
async fn hanging_listener() -> (tokio::net::TcpListener, Vec<tokio::net::TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut filling = Vec::new();
    for _ in 0..16 {
        match tokio::time::timeout(ms(300), tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => filling.push(stream),
            Ok(Err(e)) => panic!("connect failed rather than hung: {e}"),
            Err(_) => return (listener, filling),
        }
    }
    panic!("the accept queue never filled");
}

/// One GET; 2 attempts, connect bounded to 200 ms.
#[retry(layer = "http", attempts = 2, backoff = "10ms", jitter = 0.0)]
#[timeout(connect = "200ms")]
async fn get(client: &reqwest::Client, url: &str) -> Result<String, HttpError> {
    Ok(client.get(url).send().await?.text().await?)
}

#[tokio::test]
async fn a_hanging_connect_through_reqwest_times_out_at_the_connect_limit_and_is_retried() {
    let (listener, _filling) = hanging_listener().await;
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let client = nika_retry::http::client_builder().build().unwrap();
    let log = std::sync::Arc::new(nika_retry_tests::EventLog::default());
    let start = std::time::Instant::now();
    let err = nika_retry::events::observe(log.clone(), get(&client, &url))
        .await
        .unwrap_err();
    let elapsed = start.elapsed();
    let HttpError::Request(request) = &err else {
        panic!("{err:?}")
    };
    assert!(request.is_connect(), "{request:?}");
    assert_eq!(
        TimeoutError::find(request),
        Some(&TimeoutError::new(Boundary::Connect, ms(200), Layer::Http))
    );
    assert_eq!(err.category(), ErrorCategory::Transient);
    use nika_retry::events::Outcome;
    assert_eq!(
        attempts(&log),
        [
            (1, ErrorCategory::Transient, Outcome::Retrying),
            (2, ErrorCategory::Transient, Outcome::GaveUp)
        ]
    );
    // Two attempts cut at 200 ms, not the kernel's SYN retries (a minute and more).
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
}

/// `(attempt, category, outcome)` of each event in `log`.
fn attempts(
    log: &nika_retry_tests::EventLog,
) -> Vec<(u32, ErrorCategory, nika_retry::events::Outcome)> {
    log.events()
        .iter()
        .map(|e| {
            (
                e.attempt,
                e.category.expect("each event here follows a failure"),
                e.outcome,
            )
        })
        .collect()
}
