//! A streamed LLM completion under the policy: server-sent events read with
//! reqwest, retried while no token has arrived, never after; `read` cuts a
//! stall, never a stream that keeps delivering.
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
//! nika-retry = { version = "0.1", features = ["reqwest"] }
//! reqwest = { version = "0.13", features = ["stream"] }
//! eventsource-stream = "0.2"
//! futures-util = "0.3"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt", "net", "io-util", "time"] }
//! ```

use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::stream::{Started, started_when};
use nika_retry::{Classify, TimeoutError, retry, timeout};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    /// A non-success status, with the server's wait hint.
    #[error("api error {status}")]
    #[category(http_status = status, retry_after = retry_after)]
    Api {
        status: u16,
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
            let (_, retry_after) = nika_retry::http::classify_response(&response);
            let status = status.as_u16();
            return Err(ProviderError::Api {
                status,
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
        url: format!("http://{}/v1/stream", serve().await),
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

/// Starts the server on 127.0.0.1 and returns its address: its first
/// answer is cut after a ping, every later one streams a sentence.
async fn serve() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        for n in 0.. {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(answer(socket, n == 0));
        }
    });
    addr
}

async fn answer(mut socket: TcpStream, cut: bool) -> std::io::Result<()> {
    read_request(&mut socket).await?;
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    socket.write_all(head.as_bytes()).await?;
    socket
        .write_all(&event_chunk("event: ping\ndata: {}"))
        .await?;
    if cut {
        // Headers and a ping, then the connection closes: no token yet.
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
