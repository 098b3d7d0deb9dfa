//! A streamed LLM completion under the policy: server-sent events read with
//! reqwest, retried while no token has arrived, never after; `read` cuts a
//! stall, never a stream that keeps delivering. A failed response keeps the
//! category `http::classify_response` gives it: the server's
//! `x-should-retry: true / false` wins over its status.
//!
//! ```text
//! cargo run --example streaming
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code,
//! so you can copy it as it is. It starts its own tiny SSE server on
//! 127.0.0.1 (`serve`, at the bottom: not part of what you copy), whose
//! first answer is cut after its headers and a ping, before any token, and
//! whose second streams a sentence, a word every 50 ms. In a project of your
//! own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["reqwest"] }
//! reqwest = { version = "0.13", features = ["stream"] }
//! eventsource-stream = "0.2"
//! futures-util = "0.3"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt", "net", "io-util", "time"] }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::stream::{Started, started_when};
use nika_retry::{Classify, ErrorCategory, TimeoutError, retry, timeout};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    /// A non-success status: its category and wait hint as
    /// `classify_response` read them (the status, unless the server's
    /// `x-should-retry` says otherwise).
    #[error("api error {status}")]
    #[category(from = category, retry_after = retry_after)]
    Api {
        status: u16,
        category: ErrorCategory,
        retry_after: Option<Duration>,
    },
    /// Refused, reset, or a body cut mid-stream: transient.
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    /// Not server-sent events.
    #[error("malformed event stream: {0}")]
    #[category(permanent)]
    Malformed(String),
    /// `read` or `total` expired: before the first token the attempt is
    /// retried; after it, the stream's last item.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// One event of the response.
#[derive(Debug)]
pub enum Chunk {
    /// Content (an event without a name).
    Token(String),
    /// A ping, a usage chunk: held until the first token, never a reason to
    /// stop retrying.
    Meta { event: String, data: String },
}

pub struct Client {
    http: reqwest::Client,
    url: String,
}

impl Client {
    /// Returns once the first token is in. Before it, a 5xx, a cut body or
    /// a stall of 2 s fails the attempt and the loop retries (3 attempts);
    /// after it the stream is the caller's: a failure is its last item, and
    /// 2 s without an event ends it with a `read` timeout.
    #[retry(layer = "provider", backoff = "100ms")]
    #[timeout(read = "2s")]
    pub async fn complete(
        &self,
        prompt: &str,
    ) -> Result<Started<impl Stream<Item = Result<Chunk, ProviderError>> + use<>>, ProviderError>
    {
        let response = self
            .http
            .post(&self.url)
            .body(prompt.to_owned())
            .send()
            .await?;
        let status = response.status();
        if !status.is_success() {
            let (category, retry_after) = nika_retry::http::classify_response(&response);
            return Err(ProviderError::Api {
                status: status.as_u16(),
                category,
                retry_after,
            });
        }
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
        Err(EventStreamError::Transport(error)) => Err(error.into()),
        Err(malformed) => Err(ProviderError::Malformed(malformed.to_string())),
    }
}

/// Prints each retry decision.
struct Print;

impl RetryObserver for Print {
    fn on_event(&self, event: &RetryEvent) {
        println!("{event}");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ProviderError> {
    let client = Client {
        http: reqwest::Client::new(),
        url: format!(
            "http://{}/v1/stream",
            serve(&[Answer::Cut, Answer::Story]).await.0
        ),
    };
    let mut stream = observe(Arc::new(Print), client.complete("tell a story")).await?;
    println!(
        "first token after {:?}, the cut attempt and the retry included",
        stream.time_to_first_content()
    );
    while let Some(chunk) = stream.next().await {
        match chunk? {
            Chunk::Token(word) => println!("token {word:?}"),
            Chunk::Meta { event, data } => println!("{event}: {data}"),
        }
    }
    Ok(())
}

// ---- The example's own SSE server: not part of what you copy.

/// How the server answers one request.
#[derive(Clone, Copy)]
enum Answer {
    /// Headers and a ping, then the connection closes: no token.
    Cut,
    /// A sentence, a word every 50 ms.
    Story,
    /// This status line and headers, and an empty body.
    #[cfg_attr(not(test), allow(dead_code))]
    Status(&'static str),
}

/// Starts the server on 127.0.0.1 and returns its address and the count
/// of requests it got: it answers each of `script` in turn, then repeats
/// the last.
async fn serve(script: &'static [Answer]) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let answer_n = script[n.min(script.len() - 1)];
            tokio::spawn(answer(socket, answer_n));
        }
    });
    (addr, requests)
}

async fn answer(mut socket: TcpStream, answer: Answer) -> std::io::Result<()> {
    read_request(&mut socket).await?;
    if let Answer::Status(head) = answer {
        let response = format!("{head}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        socket.write_all(response.as_bytes()).await?;
        return socket.shutdown().await;
    }
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    socket.write_all(head.as_bytes()).await?;
    socket
        .write_all(&event_chunk("event: ping\ndata: {}"))
        .await?;
    if let Answer::Cut = answer {
        return socket.shutdown().await;
    }
    for word in ["Once", " upon", " a", " time", "."] {
        tokio::time::sleep(Duration::from_millis(50)).await;
        socket
            .write_all(&event_chunk(&format!("data: {word}")))
            .await?;
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.shutdown().await
}

/// One event, as one chunk of the chunked body.
fn event_chunk(event: &str) -> Vec<u8> {
    let payload = format!("{event}\n\n");
    format!("{:x}\r\n{payload}\r\n", payload.len()).into_bytes()
}

/// Reads the request's head and its body (by `content-length`).
async fn read_request(socket: &mut TcpStream) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        request.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&request);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                return Ok(());
            }
        }
    }
}

/// The server's `x-should-retry` against its status, on a real socket
/// (`cargo test --example streaming`).
#[cfg(test)]
mod tests {
    use super::*;

    async fn client(script: &'static [Answer]) -> (Client, Arc<AtomicUsize>) {
        let (addr, requests) = serve(script).await;
        let http = reqwest::Client::new();
        let url = format!("http://{addr}/v1/stream");
        (Client { http, url }, requests)
    }

    #[tokio::test]
    async fn a_503_the_server_says_not_to_retry_is_one_request() {
        const REFUSED: Answer =
            Answer::Status("HTTP/1.1 503 Service Unavailable\r\nx-should-retry: false");
        let (client, requests) = client(&[REFUSED, Answer::Story]).await;
        let Err(err) = client.complete("tell a story").await else {
            panic!("a 503 the server said not to retry")
        };
        assert!(
            matches!(err, ProviderError::Api { status: 503, .. }),
            "{err:?}"
        );
        assert_eq!(err.category(), ErrorCategory::Permanent);
        assert_eq!(requests.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_409_the_server_says_to_retry_is_retried() {
        const RETRIED: Answer = Answer::Status("HTTP/1.1 409 Conflict\r\nx-should-retry: true");
        let (client, requests) = client(&[RETRIED, Answer::Story]).await;
        let mut stream = client
            .complete("tell a story")
            .await
            .expect("the retry streams");
        let mut words = String::new();
        while let Some(chunk) = stream.next().await {
            if let Chunk::Token(word) = chunk.expect("an event") {
                words.push_str(&word);
            }
        }
        assert_eq!(words, "Once upon a time.");
        assert_eq!(requests.load(Ordering::SeqCst), 2);
    }
}
