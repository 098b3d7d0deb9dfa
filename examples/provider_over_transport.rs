//! A provider crate as it is usually built: a provider fn (`layer =
//! "provider"`) over an http transport (`layer = "http"`), each with its own
//! error type, a non-streamed completion and a streamed one.
//!
//! ```text
//! cargo run --example provider_over_transport
//! ```
//!
//! - **Two error types.** The transport's `HttpError` keeps what
//!   `http::classify_response` read (the category, with the server's
//!   `x-should-retry` over the status, and the wait hint); the provider's
//!   `ProviderError` wraps it with `#[category(transparent)]`, so a 429's
//!   `Retry-After`, which the http layer leaves to the provider, still
//!   reaches the provider's loop.
//! - **Who reads the body.** Not streamed, the transport reads the whole
//!   body inside its attempt: a body cut mid-way is the transport's retry.
//!   Streamed, the transport returns at the headers and the provider fn
//!   awaits `started_when`: a stream cut before its first token is the
//!   provider's retry, one cut after it the caller's last item.
//! - **Which limit goes where.** Not streamed, the server is silent until the
//!   whole answer is generated: the transport's `read` and the provider's
//!   `attempt` are the longest generation accepted (`GENERATION`), never a
//!   short `read` that would cut a long answer and run it again. Streamed,
//!   the transport's `read` is the wait for the headers and the provider's
//!   `read` the gap between two events (`SILENCE`).
//! - **Headers from the attempt context.** Every request of one provider
//!   call sends the same `Idempotency-Key` (`current_attempt()`'s key) and,
//!   as `X-Retry-Count`, the retries so far across both layers.
//! - **The upstream from inside the attempt.** The provider names the
//!   upstream its calls share (`upstream = self.upstream.as_ref()`: an
//!   `Option`, `None` for a provider that runs alone); the transport, which
//!   sees every response, hands its rate-limit headers to that upstream
//!   through `nika_retry::upstream::current()`, with no parameter threaded
//!   through.
//!
//! Self-contained: it compiles from the published crates and its own code.
//! Its loopback server (`serve`, at the bottom: not part of what you copy)
//! answers 503, a body cut mid-way, then the answer; a 429 with
//! `Retry-After: 1`, then the answer; a stream cut before its first token,
//! then a sentence. In a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["reqwest"] }
//! reqwest = { version = "0.13", features = ["stream"] }
//! eventsource-stream = "0.2"
//! futures-util = "0.3"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt", "net", "io-util", "time"] }
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::stream::{Started, started_when};
use nika_retry::upstream::{self, Held, Upstream};
use nika_retry::{Classify, ErrorCategory, TimeoutError, retry, timeout};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest generation accepted for a call that is not streamed.
const GENERATION: Duration = Duration::from_secs(600);
/// Streamed: the longest wait for the headers, and between two events.
const SILENCE: Duration = Duration::from_secs(30);

// ---- The transport (L1): one error type of its own.

#[derive(Debug, thiserror::Error, Classify)]
pub enum HttpError {
    /// Refused, reset, a body cut mid-way: transient.
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    /// A non-success response, as `classify_response` read it.
    #[error("HTTP {status}")]
    #[category(from = category, retry_after = retry_after)]
    Status {
        status: u16,
        category: ErrorCategory,
        retry_after: Option<Duration>,
    },
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

pub struct Transport {
    client: reqwest::Client,
    url: String,
}

impl Transport {
    pub fn new(url: String) -> Result<Transport, reqwest::Error> {
        // Its connector takes the `connect` limit of the fn whose attempt connects.
        let client = nika_retry::http::client_builder().build()?;
        Ok(Transport { client, url })
    }

    /// One POST whose whole body is read within the attempt, so that a body
    /// cut mid-way is retried here. `read` is the server's longest silence.
    #[retry(layer = "http")]
    #[timeout(connect = "10s", read = read)]
    pub async fn post_and_read(&self, body: &str, read: Duration) -> Result<String, HttpError> {
        Ok(self.send(body).await?.text().await?)
    }

    /// One POST that returns at the headers: the body is the caller's.
    #[retry(layer = "http")]
    #[timeout(connect = "10s", read = read)]
    pub async fn post(&self, body: &str, read: Duration) -> Result<reqwest::Response, HttpError> {
        self.send(body).await
    }

    /// One request of an attempt, with the attempt context's headers.
    async fn send(&self, body: &str) -> Result<reqwest::Response, HttpError> {
        let mut request = self.client.post(&self.url).body(body.to_owned());
        if let Some(attempt) = nika_retry::current_attempt() {
            request = request
                .header("idempotency-key", attempt.idempotency_key.to_string())
                .header("x-retry-count", attempt.total_retries);
        }
        let response = request.send().await?;
        // The rate-limit headers, successes included, to the upstream of
        // the provider call this request is part of (if it names one).
        if let Some(upstream) = upstream::current() {
            upstream.observe(response.headers());
        }
        let status = response.status();
        if !status.is_success() {
            let (category, retry_after) = nika_retry::http::classify_response(&response);
            return Err(HttpError::Status {
                status: status.as_u16(),
                category,
                retry_after,
            });
        }
        Ok(response)
    }
}

// ---- The provider (L2): its error wraps the transport's.

#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    /// The transport's error, its category and hint kept: a 429 the http
    /// layer left to this one is waited out here, for its `Retry-After`.
    #[error(transparent)]
    #[category(transparent)]
    Http(#[from] HttpError),
    /// Not server-sent events.
    #[error("malformed event stream: {0}")]
    #[category(permanent)]
    Malformed(String),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    /// The upstream is held longer than this call waits.
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

/// One event of a streamed answer.
#[derive(Debug)]
pub enum Chunk {
    /// Content (an event without a name).
    Token(String),
    /// A ping, a usage chunk: held until the first token.
    Meta { event: String, data: String },
}

pub struct Provider {
    transport: Transport,
    /// The key and model's upstream, shared by every call (and cloned into
    /// every task of a fan-out); `None`: each call alone.
    upstream: Option<Upstream>,
}

impl Provider {
    /// Not streamed: 5xx and 429 retried, each attempt bounded by the longest
    /// generation accepted (the transport's `read` is as long).
    #[retry(layer = "provider", upstream = self.upstream.as_ref())]
    #[timeout(attempt = GENERATION)]
    pub async fn complete(&self, prompt: &str) -> Result<String, ProviderError> {
        Ok(self.transport.post_and_read(prompt, GENERATION).await?)
    }

    /// Streamed: returns at the first token; retried while none has come.
    #[retry(layer = "provider", backoff = "100ms", upstream = self.upstream.as_ref())]
    #[timeout(read = SILENCE)]
    pub async fn stream(
        &self,
        prompt: &str,
    ) -> Result<Started<impl Stream<Item = Result<Chunk, ProviderError>> + use<>>, ProviderError>
    {
        let response = self.transport.post(prompt, SILENCE).await?;
        let chunks = response.bytes_stream().eventsource().map(chunk);
        started_when(chunks, |chunk: &Chunk| matches!(chunk, Chunk::Token(_))).await
    }
}

fn chunk(event: Result<Event, EventStreamError<reqwest::Error>>) -> Result<Chunk, ProviderError> {
    match event {
        Ok(event) if event.event == "message" => Ok(Chunk::Token(event.data)),
        Ok(event) => Ok(Chunk::Meta {
            event: event.event,
            data: event.data,
        }),
        // A body cut mid-stream: transient, as the transport's errors are.
        Err(EventStreamError::Transport(error)) => Err(HttpError::from(error).into()),
        Err(malformed) => Err(ProviderError::Malformed(malformed.to_string())),
    }
}

/// Prints each retry decision, tagged with its layer.
struct Print;

impl RetryObserver for Print {
    fn on_event(&self, event: &RetryEvent) {
        println!("  {event}");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = serve(&[
        Answer::Status("HTTP/1.1 503 Service Unavailable"),
        Answer::CutBody,
        Answer::Body("the answer"),
        Answer::Status("HTTP/1.1 429 Too Many Requests\r\nretry-after: 1"),
        Answer::Body("the second answer"),
        Answer::CutStream,
        Answer::Stream,
    ])
    .await?;
    let provider = Provider {
        transport: Transport::new(server.url.clone())?,
        upstream: Some(Upstream::new("example/model")),
    };

    println!("complete: a 503 and a cut body, both the transport's to retry");
    let answer = observe(Arc::new(Print), provider.complete("hello")).await?;
    println!("{answer:?}; the requests' (idempotency key, retry count):");
    for (key, count) in server.headers.lock().expect("headers").drain(..) {
        println!("  {key} {count}");
    }

    println!(
        "complete: a 429, which the transport leaves to the provider, waited out for its Retry-After"
    );
    let answer = observe(Arc::new(Print), provider.complete("again")).await?;
    println!("{answer:?}");

    println!("stream: cut before its first token, so the provider retries");
    let mut stream = observe(Arc::new(Print), provider.stream("tell a story")).await?;
    let mut story = String::new();
    while let Some(chunk) = stream.next().await {
        if let Chunk::Token(word) = chunk? {
            story.push_str(&word);
        }
    }
    println!("{story:?} after {} requests in all", server.requests());
    Ok(())
}

// ---- The example's own server: not part of what you copy.

/// How the server answers one request.
#[derive(Clone, Copy)]
enum Answer {
    /// This status line and headers, and an empty body.
    Status(&'static str),
    /// A `200` whose body is cut before its end.
    CutBody,
    /// A `200` with this body.
    Body(&'static str),
    /// A stream of headers and a ping, then the connection closes.
    CutStream,
    /// A stream of a sentence, a word every 20 ms.
    Stream,
}

/// The server's address, the requests it got and each one's
/// `(idempotency-key, x-retry-count)`.
struct Served {
    url: String,
    requests: Arc<AtomicUsize>,
    headers: Arc<Mutex<Vec<(String, String)>>>,
}

impl Served {
    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Answers each of `script` in turn, one per connection, then the last again.
async fn serve(script: &'static [Answer]) -> std::io::Result<Served> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let served = Served {
        url: format!("http://{}/v1/complete", listener.local_addr()?),
        requests: Arc::default(),
        headers: Arc::default(),
    };
    let (requests, headers) = (served.requests.clone(), served.headers.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let n = requests.fetch_add(1, Ordering::SeqCst);
            let answer = script[n.min(script.len() - 1)];
            let headers = headers.clone();
            tokio::spawn(async move {
                let head = read_request(&mut socket).await?;
                let value = |name: &str| header(&head, name).unwrap_or("-").to_owned();
                let sent = (value("idempotency-key"), value("x-retry-count"));
                headers.lock().expect("headers").push(sent);
                respond(&mut socket, answer).await
            });
        }
    });
    Ok(served)
}

async fn respond(socket: &mut TcpStream, answer: Answer) -> std::io::Result<()> {
    let sse = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
               transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    match answer {
        Answer::Status(head) => {
            let response = format!("{head}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            socket.write_all(response.as_bytes()).await?;
        }
        Answer::CutBody => {
            let head = "HTTP/1.1 200 OK\r\ncontent-length: 100\r\nconnection: close\r\n\r\n";
            socket
                .write_all(format!("{head}the ans").as_bytes())
                .await?;
        }
        Answer::Body(body) => {
            let length = body.len();
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {length}\r\nconnection: close\r\n\r\n{body}"
            );
            socket.write_all(response.as_bytes()).await?;
        }
        Answer::CutStream => {
            socket.write_all(sse.as_bytes()).await?;
            socket.write_all(&event("event: ping\ndata: {}")).await?;
        }
        Answer::Stream => {
            socket.write_all(sse.as_bytes()).await?;
            for word in ["Once", " upon", " a", " time."] {
                tokio::time::sleep(Duration::from_millis(20)).await;
                socket.write_all(&event(&format!("data: {word}"))).await?;
            }
            socket.write_all(b"0\r\n\r\n").await?;
        }
    }
    socket.shutdown().await
}

/// One event, as one chunk of a chunked body.
fn event(event: &str) -> Vec<u8> {
    let payload = format!("{event}\n\n");
    format!("{:x}\r\n{payload}\r\n", payload.len()).into_bytes()
}

/// A header's value in a request's head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// Reads a request's head and its body (by `content-length`); returns the head.
async fn read_request(socket: &mut TcpStream) -> std::io::Result<String> {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            return Ok(String::from_utf8_lossy(&request).into_owned());
        }
        request.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&request);
        if let Some(end) = text.find("\r\n\r\n") {
            let head = &text[..end];
            let length = header(head, "content-length").and_then(|v| v.parse().ok());
            if request.len() >= end + 4 + length.unwrap_or(0) {
                return Ok(head.to_owned());
            }
        }
    }
}

/// What the example says, on its own server (`cargo test --example provider_over_transport`).
#[cfg(test)]
mod tests {
    use nika_retry::Layer;
    use nika_retry::events::{EventLog, Outcome};

    use super::*;

    async fn provider(script: &'static [Answer]) -> (Provider, Served) {
        let server = serve(script).await.expect("a server");
        let transport = Transport::new(server.url.clone()).expect("a client");
        let upstream = Some(Upstream::new("example/model"));
        (
            Provider {
                transport,
                upstream,
            },
            server,
        )
    }

    /// `(layer, outcome)` of each decision.
    fn outline(log: &EventLog) -> Vec<(Layer, Outcome)> {
        log.events().iter().map(|e| (e.layer, e.outcome)).collect()
    }

    #[tokio::test]
    async fn a_body_cut_mid_way_is_the_transports_retry_under_one_key() {
        const SCRIPT: &[Answer] = &[Answer::CutBody, Answer::Body("whole")];
        let (provider, server) = provider(SCRIPT).await;
        let log = EventLog::new();
        let answer = observe(Arc::new(log.clone()), provider.complete("hi")).await;
        assert_eq!(answer.expect("the retry reads it whole"), "whole");
        assert_eq!(server.requests(), 2);
        assert_eq!(
            outline(&log),
            [
                (Layer::Http, Outcome::Retrying),
                (Layer::Http, Outcome::Recovered)
            ]
        );
        let headers = server.headers.lock().expect("headers").clone();
        assert_eq!(headers.len(), 2);
        assert_eq!(
            headers[0].0, headers[1].0,
            "one idempotency key per provider call"
        );
        assert_ne!(headers[0].0, "-");
        assert_eq!((&*headers[0].1, &*headers[1].1), ("0", "1"));
    }

    #[tokio::test]
    async fn a_429s_retry_after_crosses_into_the_provider_which_waits_it() {
        const SCRIPT: &[Answer] = &[
            Answer::Status("HTTP/1.1 429 Too Many Requests\r\nretry-after: 1"),
            Answer::Body("later"),
        ];
        let (provider, server) = provider(SCRIPT).await;
        let log = EventLog::new();
        let answer = observe(Arc::new(log.clone()), provider.complete("hi")).await;
        assert_eq!(answer.expect("waited out"), "later");
        assert_eq!(server.requests(), 2);
        let events = log.events();
        let waited = events
            .iter()
            .find(|e| e.outcome == Outcome::Retrying)
            .expect("a retry");
        assert_eq!(waited.layer, Layer::Provider);
        assert_eq!(waited.category, Some(ErrorCategory::RateLimited));
        assert_eq!(
            waited.delay,
            Some(Duration::from_secs(1)),
            "the server's hint"
        );
    }

    #[tokio::test]
    async fn a_stream_cut_before_its_first_token_is_the_providers_retry() {
        const SCRIPT: &[Answer] = &[Answer::CutStream, Answer::Stream];
        let (provider, server) = provider(SCRIPT).await;
        let log = EventLog::new();
        let stream = observe(Arc::new(log.clone()), provider.stream("story")).await;
        let mut stream = stream.expect("the retry streams");
        let mut story = String::new();
        while let Some(chunk) = stream.next().await {
            if let Chunk::Token(word) = chunk.expect("an event") {
                story.push_str(&word);
            }
        }
        assert_eq!(story, "Once upon a time.");
        assert_eq!(server.requests(), 2);
        assert_eq!(
            outline(&log),
            [
                (Layer::Provider, Outcome::Retrying),
                (Layer::Provider, Outcome::Recovered)
            ]
        );
    }

    #[tokio::test]
    async fn the_transport_hands_its_rate_limit_headers_to_the_providers_upstream() {
        const SCRIPT: &[Answer] = &[Answer::Status(
            "HTTP/1.1 200 OK\r\nx-ratelimit-remaining-requests: 0\r\nx-ratelimit-reset-requests: 20s",
        )];
        let (shared_provider, _server) = provider(SCRIPT).await;
        let shared = shared_provider.upstream.clone().expect("named");
        assert_eq!(shared.held_for(), None);
        assert_eq!(shared_provider.complete("hi").await.expect("a 200"), "");
        let held = shared.held_for().expect("none left: held until the reset");
        assert!(
            held > Duration::from_secs(10) && held <= Duration::from_secs(20),
            "{held:?}"
        );
        // `upstream = None`: the call runs alone, and no upstream is in force.
        let (alone, _server) = provider(SCRIPT).await;
        let alone = Provider {
            upstream: None,
            ..alone
        };
        assert_eq!(alone.complete("hi").await.expect("a 200"), "");
    }

    #[tokio::test]
    async fn a_503_the_server_says_not_to_retry_is_one_request() {
        const SCRIPT: &[Answer] = &[
            Answer::Status("HTTP/1.1 503 Service Unavailable\r\nx-should-retry: false"),
            Answer::Body("never"),
        ];
        let (provider, server) = provider(SCRIPT).await;
        let err = provider.complete("hi").await.unwrap_err();
        assert_eq!(err.category(), ErrorCategory::Permanent);
        assert_eq!(server.requests(), 1);
    }

    #[tokio::test]
    async fn a_409_the_server_says_to_retry_is_retried() {
        const SCRIPT: &[Answer] = &[
            Answer::Status("HTTP/1.1 409 Conflict\r\nx-should-retry: true"),
            Answer::Body("done"),
        ];
        let (provider, server) = provider(SCRIPT).await;
        assert_eq!(provider.complete("hi").await.expect("retried"), "done");
        assert_eq!(server.requests(), 2);
    }
}
