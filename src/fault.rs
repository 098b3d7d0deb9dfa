//! A loopback HTTP/1.1 server that fails on purpose, one scripted fault per
//! request: for the integration tests and the demo.
//!
//! It binds `127.0.0.1:0`, serves at most `max_requests` requests, and stops
//! by itself when its lifetime ends or when it is dropped.
//!
//! A [`Fault::Stream`] answers with server-sent events played from a script
//! of [`Step`]s (see [`sse`]); the server then also sees a client that hangs
//! up mid-stream ([`Hit::hung_up`]).
//!
//! For calls with side effects, a request can take effect and lose its
//! answer ([`Fault::CommitThenDrop`]), and the server can refuse the
//! connections that follow one ([`Fault::ThenRefuse`],
//! [`FaultServer::refuse_for`]); [`FaultServer::effects`] counts what took
//! effect.
//!
//! For calls that share a rate limit, [`quota::QuotaServer`] is a model
//! server that counts requests and tokens per window, as a provider does.

mod gate;
pub mod quota;
pub mod resumable;
pub mod sse;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use sse::Step;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What the server does with one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// `200 OK` with this body.
    Ok(String),
    /// This status with an empty body (401, 404, 400, 500, …).
    Status(u16),
    /// `503 Service Unavailable` with `Retry-After: <seconds>`.
    UnavailableFor(u64),
    /// `503 Service Unavailable` with `Retry-After: <HTTP-date>` this far ahead.
    UnavailableUntil(Duration),
    /// `503 Service Unavailable` with this `Retry-After` value, verbatim.
    UnavailableRaw(String),
    /// `429 Too Many Requests` with a provider-style JSON body carrying
    /// `retry_after_ms` (and no header: the provider crate reads the body).
    RateLimited {
        /// The wait asked for.
        retry_after_ms: u64,
    },
    /// `429 Too Many Requests` as OpenAI sends it when the key's quota or
    /// credit is spent: `insufficient_quota` in the JSON body, with a
    /// `Retry-After` that waiting would not help.
    QuotaExhausted,
    /// Starts a `200` response, then resets the connection mid-body.
    Reset,
    /// Starts a `200` response, then closes the connection mid-body (a FIN:
    /// the client sees an unexpected end of file).
    Truncated,
    /// This status with these headers and an empty body (`x-should-retry`, …).
    WithHeaders(u16, Vec<(String, String)>),
    /// Waits this long, then answers `200 OK` with this body.
    Stall(Duration, String),
    /// Accepts the request and never answers.
    Hang,
    /// `200 OK` with `content-type: text/event-stream` and a chunked body
    /// of server-sent events played from this script (see [`Step`]).
    Stream(Vec<Step>),
    /// A rate limit: the first request served this fault opens a window of
    /// `window`; every request inside it is answered `429` with
    /// `Retry-After: retry_after` (whole seconds), every one after it
    /// `200 OK` with the body `ok`. The hit records which it got.
    LimitWindow {
        /// How long the limit lasts from the first request.
        window: Duration,
        /// The `Retry-After` the 429s carry, in seconds.
        retry_after: u64,
    },
    /// Commits, then drops the acknowledgement: the server takes the
    /// request (it counts as an effect, [`Hit::took_effect`]), then closes
    /// the connection without answering, as a mail server that took the
    /// mail and crashed before it said so.
    CommitThenDrop,
    /// Serves the inner fault with `Connection: close`, then refuses every
    /// connection for this long (tokio's clock; `Duration::MAX`: until
    /// [`FaultServer::listen_again`]): the next attempt's connect is refused
    /// and its request never leaves.
    ThenRefuse(Box<Fault>, Duration),
    /// Streamed answers that break and resume, by cursor or by
    /// continuation ([`resumable`]): the fault of every request of a soak.
    Resumable(resumable::Resumable),
}

impl Fault {
    /// `200 OK` with `body`.
    pub fn ok(body: &str) -> Fault {
        Fault::Ok(body.to_owned())
    }

    /// `fault`, then connections refused for `period` ([`Fault::ThenRefuse`]).
    pub fn then_refuse(fault: Fault, period: Duration) -> Fault {
        Fault::ThenRefuse(Box::new(fault), period)
    }

    /// Whether a request served this fault took effect on the server: it
    /// was answered `200 OK`, or committed before its answer was dropped.
    pub fn takes_effect(&self) -> bool {
        match self {
            Fault::Ok(_) | Fault::Stall(..) | Fault::CommitThenDrop => true,
            Fault::ThenRefuse(inner, _) => inner.takes_effect(),
            _ => false,
        }
    }

    /// A streamed response playing `steps`.
    pub fn stream(steps: impl IntoIterator<Item = Step>) -> Fault {
        Fault::Stream(steps.into_iter().collect())
    }

    /// A slow, steady stream: `n` content events (`t1` to `tn`), each after
    /// waiting `every`, then the end of the body.
    pub fn steady(every: Duration, n: usize) -> Fault {
        Fault::stream(Step::tokens(n).flat_map(|event| [Step::Wait(every), event]))
    }
}

/// One request the server saw.
#[derive(Clone, Debug)]
pub struct Hit {
    /// When it arrived (tokio's clock).
    pub at: Instant,
    /// The request path.
    pub path: String,
    /// Its `Idempotency-Key` header, if it had one.
    pub idempotency_key: Option<String>,
    /// Its `X-Retry-Count` header, if it had one.
    pub retry_count: Option<String>,
    /// Its headers as they came, names lowercased ([`Hit::header`]).
    pub headers: Vec<(String, String)>,
    /// Its body (read as UTF-8, lossily; a chunked one decoded): what a
    /// test sends to tell its calls apart.
    pub body: String,
    /// The fault served.
    pub fault: Fault,
    /// For a [`Fault::Stream`]: the content events written so far.
    pub events_sent: usize,
    /// For a [`Fault::Stream`]: when the server saw the client close the
    /// connection before the script was over (a dropped stream).
    pub hung_up: Option<Instant>,
    /// When its answer was written whole, if it was (tokio's clock).
    pub answered: Option<Instant>,
}

impl Hit {
    /// Whether the request took effect on the server ([`Fault::takes_effect`]).
    pub fn took_effect(&self) -> bool {
        self.fault.takes_effect()
    }

    /// The value of its header `name` (any case), if it had one.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find_map(|(n, v)| (*n == name).then_some(v.as_str()))
    }
}

/// What the server reads of a request.
struct Request {
    path: String,
    idempotency_key: Option<String>,
    retry_count: Option<String>,
    headers: Vec<(String, String)>,
    body: String,
}

/// A running fault server.
pub struct FaultServer {
    addr: SocketAddr,
    gate: gate::Gate,
    hits: Arc<Mutex<Vec<Hit>>>,
    open: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

/// How long a server lives at most.
pub const LIFETIME: Duration = Duration::from_secs(60);

impl FaultServer {
    /// Starts a server that serves `script` in order, then repeats its last
    /// fault; at most 1 000 requests and [`LIFETIME`].
    pub async fn start(script: impl IntoIterator<Item = Fault>) -> FaultServer {
        FaultServer::start_bounded(script, 1_000, LIFETIME).await
    }

    /// Like [`start`](FaultServer::start) with explicit bounds.
    pub async fn start_bounded(
        script: impl IntoIterator<Item = Fault>,
        max_requests: usize,
        lifetime: Duration,
    ) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let gate = gate::Gate::new(listener).expect("the listener's address");
        let script: Vec<Fault> = script.into_iter().collect();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(AtomicUsize::new(0));
        let state = Arc::new(State {
            script,
            hits: hits.clone(),
            max_requests,
            window_opened: Mutex::new(None),
            gate: gate.clone(),
        });
        let counter = open.clone();
        let accepting = gate.clone();
        let task = tokio::spawn(async move {
            let accept = async {
                let mut connections = tokio::task::JoinSet::new();
                while let Ok(stream) = std::future::poll_fn(|cx| accepting.poll_accept(cx)).await {
                    let open = Open::new(counter.clone());
                    connections.spawn(serve(stream, state.clone(), open));
                    if state.served() >= state.max_requests {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(lifetime, accept).await;
        });
        FaultServer {
            addr,
            gate,
            hits,
            open,
            task,
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The requests seen so far.
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().expect("hits").clone()
    }

    /// How many requests arrived.
    pub fn requests(&self) -> usize {
        self.hits.lock().expect("hits").len()
    }

    /// How many requests met a rate limit: answered `429` with headers, as
    /// a [`Fault::LimitWindow`] answers inside its window.
    pub fn limited(&self) -> usize {
        let hits = self.hits.lock().expect("hits");
        hits.iter()
            .filter(|h| matches!(h.fault, Fault::WithHeaders(429, _)))
            .count()
    }

    /// Refuses every connection from now for `period` (tokio's clock), then
    /// listens again on the same port; a connection already open is kept.
    pub fn refuse_for(&self, period: Duration) {
        self.gate.refuse_for(period);
    }

    /// Refuses every connection from now until
    /// [`listen_again`](FaultServer::listen_again): a test that must not
    /// depend on how fast the machine is ends the refusal on an event (say,
    /// the retry of the refused attempt) rather than after a period.
    pub fn refuse(&self) {
        self.gate.refuse_for(Duration::MAX);
    }

    /// Listens again on the same port now, if connections are refused.
    pub fn listen_again(&self) {
        self.gate.listen_again();
    }

    /// How many periods of refused connections there were
    /// ([`refuse_for`](FaultServer::refuse_for), [`Fault::ThenRefuse`]).
    pub fn refusal_periods(&self) -> usize {
        self.gate.closings()
    }

    /// How many requests took effect ([`Hit::took_effect`]).
    pub fn effects(&self) -> usize {
        let hits = self.hits.lock().expect("hits");
        hits.iter().filter(|h| h.took_effect()).count()
    }

    /// How many streamed responses the client abandoned mid-script (see
    /// [`Hit::hung_up`]).
    pub fn hangups(&self) -> usize {
        let hits = self.hits.lock().expect("hits");
        hits.iter().filter(|h| h.hung_up.is_some()).count()
    }

    /// How many connections the server holds open now (accepted, not yet
    /// closed by either side).
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

/// One open connection, counted while it lives (however its task ends:
/// returned or aborted with the server).
struct Open(Arc<AtomicUsize>);

impl Open {
    fn new(counter: Arc<AtomicUsize>) -> Open {
        counter.fetch_add(1, Ordering::SeqCst);
        Open(counter)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An address on 127.0.0.1 where nothing listens: connecting is refused.
pub async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    addr
}

/// An address on 127.0.0.1 where connecting hangs: a listener with a
/// backlog of one whose accept queue is filled and never drained, so the
/// kernel drops further SYNs. Keep it alive while connecting. Real clock.
pub struct HangingPort {
    listener: TcpListener,
    _filling: Vec<TcpStream>,
}

impl HangingPort {
    /// Binds and fills the queue: connects until one connect hangs (300 ms).
    pub async fn start() -> HangingPort {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind 127.0.0.1:0");
        let listener = socket.listen(1).expect("listen");
        let addr = listener.local_addr().expect("local addr");
        let mut filling = Vec::new();
        for _ in 0..16 {
            match tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => filling.push(stream),
                Ok(Err(e)) => panic!("connect failed rather than hung: {e}"),
                Err(_) => {
                    return HangingPort {
                        listener,
                        _filling: filling,
                    };
                }
            }
        }
        panic!("the accept queue never filled");
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!(
            "http://{}/",
            self.listener.local_addr().expect("local addr")
        )
    }
}

struct State {
    script: Vec<Fault>,
    hits: Arc<Mutex<Vec<Hit>>>,
    max_requests: usize,
    /// When a [`Fault::LimitWindow`] opened.
    window_opened: Mutex<Option<Instant>>,
    /// The listener, for [`Fault::ThenRefuse`].
    gate: gate::Gate,
}

impl State {
    fn served(&self) -> usize {
        self.hits.lock().expect("hits").len()
    }

    /// Records a request and picks its fault; returns the fault and the
    /// index of its hit.
    fn next(&self, request: Request) -> Option<(usize, Fault)> {
        let mut hits = self.hits.lock().expect("hits");
        if hits.len() >= self.max_requests {
            return None;
        }
        let fault = self.script.get(hits.len()).or(self.script.last())?.clone();
        let fault = self.in_window(fault);
        hits.push(Hit {
            at: Instant::now(),
            path: request.path,
            idempotency_key: request.idempotency_key,
            retry_count: request.retry_count,
            headers: request.headers,
            body: request.body,
            fault: fault.clone(),
            events_sent: 0,
            hung_up: None,
            answered: None,
        });
        Some((hits.len() - 1, fault))
    }

    /// A [`Fault::LimitWindow`] as what it answers now: a 429 inside the
    /// window, a 200 after it.
    fn in_window(&self, fault: Fault) -> Fault {
        let Fault::LimitWindow {
            window,
            retry_after,
        } = fault
        else {
            return fault;
        };
        let now = Instant::now();
        let opened = *self
            .window_opened
            .lock()
            .expect("window")
            .get_or_insert(now);
        if now < opened + window {
            let retry_after = vec![("Retry-After".to_owned(), retry_after.to_string())];
            Fault::WithHeaders(429, retry_after)
        } else {
            Fault::ok("ok")
        }
    }

    /// Updates the hit at `index`.
    fn record(&self, index: usize, update: impl FnOnce(&mut Hit)) {
        if let Some(hit) = self.hits.lock().expect("hits").get_mut(index) {
            update(hit);
        }
    }
}

/// Serves the requests of one keep-alive connection.
async fn serve(mut stream: TcpStream, state: Arc<State>, _open: Open) {
    let mut buf = Vec::with_capacity(1024);
    loop {
        let Some(request) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let asked = (request.path.clone(), request.body.clone());
        let Some((index, fault)) = state.next(request) else {
            return;
        };
        let (fault, refuse) = match fault {
            Fault::ThenRefuse(inner, period) => (*inner, Some(period)),
            fault => (fault, None),
        };
        let response = match fault {
            Fault::Ok(body) => response(200, "OK", &[], &body),
            Fault::Status(status) => response(status, reason(status), &[], ""),
            Fault::UnavailableFor(secs) => response(
                503,
                "Service Unavailable",
                &[("Retry-After", secs.to_string())],
                "",
            ),
            Fault::UnavailableRaw(value) => {
                response(503, "Service Unavailable", &[("Retry-After", value)], "")
            }
            Fault::UnavailableUntil(ahead) => {
                let date = httpdate::fmt_http_date(std::time::SystemTime::now() + ahead);
                response(503, "Service Unavailable", &[("Retry-After", date)], "")
            }
            Fault::RateLimited { retry_after_ms } => {
                let body = format!(
                    r#"{{"error":{{"type":"rate_limit_error","message":"slow down","retry_after_ms":{retry_after_ms}}}}}"#
                );
                response(
                    429,
                    "Too Many Requests",
                    &[("Content-Type", "application/json".into())],
                    &body,
                )
            }
            Fault::QuotaExhausted => response(
                429,
                "Too Many Requests",
                &[
                    ("Content-Type", "application/json".into()),
                    ("Retry-After", "20".into()),
                ],
                r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
            ),
            Fault::Reset => {
                let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial";
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.flush().await;
                // Linger 0: closing sends RST rather than FIN.
                let _ = stream.set_zero_linger();
                return;
            }
            Fault::Truncated => {
                let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial";
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.shutdown().await;
                return;
            }
            Fault::WithHeaders(status, headers) => {
                let headers: Vec<(&str, String)> = headers
                    .iter()
                    .map(|(name, value)| (name.as_str(), value.clone()))
                    .collect();
                response(status, reason(status), &headers, "")
            }
            Fault::Stall(wait, body) => {
                tokio::time::sleep(wait).await;
                response(200, "OK", &[], &body)
            }
            Fault::Hang => {
                std::future::pending::<()>().await;
                return;
            }
            // Resolved when picked (`State::in_window`).
            Fault::LimitWindow { .. } => response(500, "Internal Server Error", &[], ""),
            // Taken (recorded), then the connection closes unanswered.
            Fault::CommitThenDrop => {
                if let Some(period) = refuse {
                    state.gate.refuse_for(period);
                }
                return;
            }
            // Unwrapped above; nested, it is answered as its inner fault would be.
            Fault::ThenRefuse(inner, _) => response(500, reason(500), &[], &format!("{inner:?}")),
            Fault::Resumable(answers) => {
                let on_event = || state.record(index, |hit| hit.events_sent += 1);
                match resumable::answer(&mut stream, &answers, &asked.0, &asked.1, on_event).await {
                    Ok(sse::Ended::Complete) => continue,
                    Ok(sse::Ended::Closed { .. }) => return,
                    Err(status) => {
                        let status = if status == "409" { 409 } else { 404 };
                        response(status, reason(status), &[], "")
                    }
                }
            }
            Fault::Stream(steps) => {
                let on_event = || state.record(index, |hit| hit.events_sent += 1);
                match sse::play(&mut stream, &steps, on_event).await {
                    sse::Ended::Complete => continue,
                    sse::Ended::Closed { hung_up } => {
                        if hung_up {
                            let now = Instant::now();
                            state.record(index, |hit| hit.hung_up = Some(now));
                        }
                        return;
                    }
                }
            }
        };
        if let Some(period) = refuse {
            // Closed before the answer goes out: the client's next connect,
            // which can only follow the answer, finds no listener.
            state.gate.refuse_for(period);
            let closing = response.replacen("\r\n", "\r\nConnection: close\r\n", 1);
            let _ = stream.write_all(closing.as_bytes()).await;
            let _ = stream.shutdown().await;
            return;
        }
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
        let now = Instant::now();
        state.record(index, |hit| hit.answered = Some(now));
    }
}

/// Reads one request head (and its body, if it has a length); returns its
/// path, the headers the tests look at and the body.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Request> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let path = head.split_whitespace().nth(1)?.to_owned();
    let header = |wanted: &str| {
        head.lines().find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case(wanted)
                .then(|| value.trim().to_owned())
        })
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let chunked = header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let idempotency_key = header("idempotency-key");
    let retry_count = header("x-retry-count");
    let headers = head
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            Some((name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        })
        .collect();
    let body = if chunked {
        // A streamed body (a client that cannot know its length).
        let (body, end) = read_chunked(stream, buf, head_end).await?;
        buf.drain(..end);
        String::from_utf8_lossy(&body).into_owned()
    } else {
        while buf.len() < head_end + length {
            read_more(stream, buf).await?;
        }
        let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
        buf.drain(..head_end + length);
        body
    };
    Some(Request {
        path,
        idempotency_key,
        retry_count,
        headers,
        body,
    })
}

/// Reads more of the connection into `buf`; `None` at its end.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 4096];
    let n = stream.read(&mut chunk).await.ok()?;
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&chunk[..n]);
    Some(())
}

/// A `Transfer-Encoding: chunked` body starting at `start` of `buf`: its
/// bytes, and where the request ends (no trailers expected).
async fn read_chunked(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    start: usize,
) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = start;
    loop {
        let line_end = loop {
            if let Some(i) = buf[at..].windows(2).position(|w| w == b"\r\n") {
                break at + i;
            }
            read_more(stream, buf).await?;
        };
        let line = String::from_utf8_lossy(&buf[at..line_end]).into_owned();
        let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
        let data = line_end + 2;
        while buf.len() < data + size + 2 {
            read_more(stream, buf).await?;
        }
        body.extend_from_slice(&buf[data..data + size]);
        at = data + size + 2;
        if size == 0 {
            return Some((body, at));
        }
    }
}

fn response(status: u16, reason: &str, headers: &[(&str, String)], body: &str) -> String {
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(body);
    out
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        409 => "Conflict",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
