//! The four time limits, one meaning each (DESIGN.md "`#[timeout]`"): a
//! tool fn returning `io::Error`, `#[timeout]` alone, `read` as an
//! inactivity limit and `connect` through a real reqwest client.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::task::{TaskPolicy, scope};
use nika_retry::{Boundary, Classify, ErrorCategory, Layer, RetryConfig, TimeoutError};
use nika_retry::{retry, timeout};
use tokio::time::{Instant, sleep};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
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

#[derive(Debug, thiserror::Error, Classify)]
enum HttpError {
    #[error(transparent)]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
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

/// An agent loop as ADR-019 has it: a total limit, no retry.
struct Agent {
    turns: AtomicU32,
    max_duration: Duration,
}

#[derive(Debug, thiserror::Error, Classify)]
enum AgentError {
    #[error("tool failed")]
    #[category(transient)]
    Tool,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

impl Agent {
    #[timeout(layer = "task", total = self.max_duration)]
    async fn run(&self, turn: Duration) -> Result<u32, AgentError> {
        loop {
            let n = self.turns.fetch_add(1, Ordering::SeqCst) + 1;
            sleep(turn).await;
            if n == 100 {
                return Err(AgentError::Tool);
            }
        }
    }
}

#[timeout(layer = "task", total = "1s")]
async fn task_body(runs: &AtomicU32) -> Result<(), AgentError> {
    runs.fetch_add(1, Ordering::SeqCst);
    sleep(Duration::from_secs(3600)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn timeout_alone_runs_once_even_in_a_task_scope_that_retries() {
    let runs = AtomicU32::new(0);
    let policy = TaskPolicy::new().with_retry(three_attempts());
    let start = Instant::now();
    let err = scope(policy, task_body(&runs)).await.unwrap_err();
    let AgentError::Timeout(t) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        t,
        &TimeoutError::new(Boundary::Total, ms(1000), Layer::Task)
    );
    assert_eq!(err.category(), ErrorCategory::Permanent);
    assert_eq!(
        (runs.load(Ordering::SeqCst), start.elapsed()),
        (1, ms(1000))
    );
}

#[tokio::test(start_paused = true)]
async fn an_agent_loop_is_bounded_in_total_and_its_own_error_is_not_retried() {
    let agent = Agent {
        turns: AtomicU32::new(0),
        max_duration: Duration::from_secs(10),
    };
    let err = agent.run(Duration::from_secs(3)).await.unwrap_err();
    assert!(matches!(err, AgentError::Timeout(ref t) if t.boundary() == Boundary::Total));
    assert_eq!(agent.turns.load(Ordering::SeqCst), 4);

    // The body's own transient error comes back after one run: no retry.
    let agent = Agent {
        turns: AtomicU32::new(0),
        max_duration: Duration::from_secs(1000),
    };
    let policy = TaskPolicy::new().with_retry(three_attempts());
    let err = scope(policy, agent.run(ms(1))).await.unwrap_err();
    assert!(matches!(err, AgentError::Tool), "{err:?}");
    assert_eq!(agent.turns.load(Ordering::SeqCst), 100);
}

/// A tool fn with its own per-call timeout and no retry, returning io::Error.
struct Command {
    timeout: Duration,
}

impl Command {
    #[timeout(layer = "tool", attempt = self.timeout)]
    async fn exec(&self, script: String) -> Result<usize, io::Error> {
        // Moves an argument: fine, the body runs once.
        let owned: String = script;
        sleep(ms(owned.len() as u64 * 100)).await;
        Ok(owned.len())
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_fn_alone_returns_an_io_error_holding_an_attempt_timeout() {
    let cmd = Command { timeout: ms(500) };
    assert_eq!(cmd.exec("ls".into()).await.unwrap(), 2);
    let err = cmd.exec("sleep 10".into()).await.unwrap_err();
    assert_eq!(
        held(&err),
        Some(&TimeoutError::new(Boundary::Attempt, ms(500), Layer::Tool))
    );
    assert_eq!(err.category(), ErrorCategory::Transient);
}

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

/// `#[timeout]` alone on the shapes `#[retry]` takes.
mod shapes {
    use super::*;

    type Res<T> = Result<T, io::Error>;

    pub struct Counter {
        pub n: u32,
    }

    impl Counter {
        /// `&mut self`, a `Result` alias, `?` and an early `return`.
        #[timeout(layer = "tool", attempt = "1s")]
        pub async fn bump(&mut self, by: u32) -> Res<u32> {
            if by == 0 {
                return Err(io::Error::other("zero"));
            }
            let parsed: u32 = "1".parse().map_err(io::Error::other)?;
            self.n += by * parsed;
            Ok(self.n)
        }

        /// A coercing return: `&String` to `&str`.
        #[timeout(layer = "tool", attempt = "1s")]
        pub async fn name(&self, names: &[String]) -> Res<usize> {
            let first: &str = names.first().map_or("", |s| s);
            Ok(first.len())
        }
    }

    /// Generics with a where-clause.
    #[timeout(layer = "task", total = "1s")]
    pub async fn sum<T>(items: Vec<T>) -> Res<u64>
    where
        T: Into<u64> + Send,
    {
        Ok(items.into_iter().map(Into::into).sum())
    }

    #[async_trait::async_trait]
    pub trait Tool {
        async fn call(&self, input: String) -> Res<String>;
    }

    pub struct Echo;

    #[async_trait::async_trait]
    impl Tool for Echo {
        #[timeout(layer = "tool", attempt = "100ms")]
        async fn call(&self, input: String) -> Res<String> {
            if input == "slow" {
                sleep(Duration::from_secs(5)).await;
            }
            Ok(input)
        }
    }

    fn assert_send<F: std::future::Future + Send>(f: F) -> F {
        f
    }

    #[tokio::test(start_paused = true)]
    async fn timeout_alone_keeps_the_fn_as_written() {
        let mut c = Counter { n: 0 };
        assert_eq!(assert_send(c.bump(2)).await.unwrap(), 2);
        assert!(c.bump(0).await.is_err());
        assert_eq!(c.name(&["abc".to_owned()]).await.unwrap(), 3);
        assert_eq!(assert_send(sum(vec![1u8, 2, 3])).await.unwrap(), 6);
        let tool: &dyn Tool = &Echo;
        assert_eq!(tool.call("hi".into()).await.unwrap(), "hi");
        let err = tool.call("slow".into()).await.unwrap_err();
        assert_eq!(
            held(&err).map(TimeoutError::boundary),
            Some(Boundary::Attempt)
        );
    }
}

/// `(attempt, category, outcome)` of each event in `log`.
fn attempts(
    log: &nika_retry_tests::EventLog,
) -> Vec<(u32, ErrorCategory, nika_retry::events::Outcome)> {
    log.events()
        .iter()
        .map(|e| (e.attempt, e.category, e.outcome))
        .collect()
}
