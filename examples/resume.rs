//! A streamed completion that resumes after a cut, under the call's
//! policy: `Started::resume_with` opens the rest of the answer from where
//! the caller is, as another attempt of the same call (its backoff, its
//! attempts, its upstream, its limits), two ways:
//!
//! - **by cursor**: the server numbers its events (`id: N`, as OpenAI's
//!   Responses API does with `sequence_number`) and sends the events after
//!   one (`?starting_after=N`); the closure needs only how far the caller
//!   got (`Resume::delivered`, one item per event here);
//! - **by continuation**: the request carries the text so far (any chat API
//!   that continues an answer it is given the start of); the caller's loop
//!   appends each token to a buffer the closure reads.
//!
//! ```text
//! cargo run --example resume
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code,
//! so you can copy it as it is. It starts its own tiny SSE server on
//! 127.0.0.1 (`serve`, at the bottom: not part of what you copy), which cuts
//! the first answer of each way after three words and answers the resume
//! whole. In a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["reqwest"] }
//! reqwest = { version = "0.13", features = ["stream"] }
//! eventsource-stream = "0.2"
//! futures-util = "0.3"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt", "net", "io-util", "time"] }
//! ```

use std::pin::Pin;
use std::sync::{Arc, Mutex};

use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use nika_retry::events::{RetryEvent, RetryObserver, observe};
use nika_retry::stream::{Resume, Started, started};
use nika_retry::{Classify, TimeoutError, retry, timeout};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    /// A status that is not a success, classified by it.
    #[error("api error {0}")]
    #[category(http_status = 0)]
    Api(u16),
    /// Refused, reset, or a body cut mid-stream: transient, so a cut after
    /// content resumes.
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    #[error("malformed event stream: {0}")]
    #[category(permanent)]
    Malformed(String),
    /// `read` (a stall: resumed) or `total` (never resumed).
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// The tokens of one response, boxed so that the first response and every
/// resume are one type.
pub type Tokens = Pin<Box<dyn Stream<Item = Result<String, ProviderError>> + Send>>;

#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    /// Opens a completion; returns once its first token is in. A cut or a
    /// stall before it is retried; after it, `resume_with` takes over.
    #[retry(layer = "provider", backoff = "100ms")]
    #[timeout(read = "2s")]
    pub async fn complete(&self, path: &str) -> Result<Started<Tokens>, ProviderError> {
        let url = format!("{}{path}", self.base);
        started(self.send(url, String::new()).await?).await
    }

    /// One request, not retried by itself: what the resume's closure calls
    /// too (the resume is already an attempt of `complete`'s call).
    async fn send(&self, url: String, body: String) -> Result<Tokens, ProviderError> {
        let response = self.http.post(url).body(body).send().await?;
        if !response.status().is_success() {
            return Err(ProviderError::Api(response.status().as_u16()));
        }
        let tokens = response
            .bytes_stream()
            .eventsource()
            .map(|event| match event {
                Ok(event) => Ok(event.data),
                Err(EventStreamError::Transport(error)) => Err(error.into()),
                Err(malformed) => Err(ProviderError::Malformed(malformed.to_string())),
            });
        Ok(Box::pin(tokens))
    }
}

/// By cursor: the rest is the events after the last one the caller got.
async fn by_cursor(client: &Client) -> Result<String, ProviderError> {
    let first = client.complete("/cursor").await?;
    let client = client.clone();
    let mut tokens = first.resume_with(move |resume: Resume| {
        // One item per event, numbered from 0: the last one seen.
        let last = resume.delivered() - 1;
        let url = format!("{}/cursor?starting_after={last}", client.base);
        let client = client.clone();
        async move { started(client.send(url, String::new()).await?).await }
    });
    let mut text = String::new();
    while let Some(token) = tokens.next().await {
        text.push_str(&token?);
    }
    Ok(text)
}

/// By continuation: the rest is what the server writes after the text so
/// far, which the caller's loop keeps and the closure sends.
async fn by_continuation(client: &Client) -> Result<String, ProviderError> {
    let so_far = Arc::new(Mutex::new(String::new()));
    let first = client.complete("/continue").await?;
    let (client, sent) = (client.clone(), so_far.clone());
    let mut tokens = first.resume_with(move |_: Resume| {
        let body = sent.lock().expect("text").clone();
        let (client, url) = (client.clone(), format!("{}/continue", client.base));
        async move { started(client.send(url, body).await?).await }
    });
    while let Some(token) = tokens.next().await {
        so_far.lock().expect("text").push_str(&token?);
    }
    let text = so_far.lock().expect("text").clone();
    Ok(text)
}

/// Prints each retry decision: here, the resumes.
struct Print;

impl RetryObserver for Print {
    fn on_event(&self, event: &RetryEvent) {
        println!("  {event}");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), ProviderError> {
    let client = Client {
        http: reqwest::Client::new(),
        base: format!("http://{}", serve().await),
    };
    println!("by cursor:");
    let text = observe(Arc::new(Print), by_cursor(&client)).await?;
    println!("  {text:?}");
    assert_eq!(text, WORDS.concat(), "every word once");
    println!("by continuation:");
    let text = observe(Arc::new(Print), by_continuation(&client)).await?;
    println!("  {text:?}");
    assert_eq!(text, WORDS.concat(), "every word once");
    Ok(())
}

// ---- The example's own SSE server: not part of what you copy.

/// The answer, one event per word.
const WORDS: [&str; 7] = ["Once", " upon", " a", " time", " the", " end", "."];

/// Starts the server on 127.0.0.1: an answer from the start is cut after
/// three words (no last chunk: the client sees the body end early); a
/// resume gets the rest.
async fn serve() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(answer(socket));
        }
    });
    addr
}

async fn answer(mut socket: TcpStream) -> std::io::Result<()> {
    let (path, body) = read_request(&mut socket).await?;
    let cursor = path.starts_with("/cursor");
    // Where this answer starts: after `starting_after`, or after the text sent.
    let from = if cursor {
        path.split_once("starting_after=")
            .and_then(|(_, n)| n.parse::<usize>().ok())
            .map_or(0, |n| n + 1)
    } else {
        let (mut rest, mut from) = (body.as_str(), 0);
        while let Some(after) = WORDS.get(from).and_then(|w| rest.strip_prefix(w)) {
            (rest, from) = (after, from + 1);
        }
        from
    };
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    socket.write_all(head.as_bytes()).await?;
    // A first request is cut after three words.
    let to = if from == 0 { 3 } else { WORDS.len() };
    for (n, word) in WORDS.iter().enumerate().take(to).skip(from) {
        let id = if cursor {
            format!("id: {n}\n")
        } else {
            String::new()
        };
        socket
            .write_all(&event_chunk(&format!("{id}data: {word}")))
            .await?;
    }
    if to == WORDS.len() {
        socket.write_all(b"0\r\n\r\n").await?;
    }
    socket.shutdown().await
}

/// One event, as one chunk of the chunked body.
fn event_chunk(event: &str) -> Vec<u8> {
    let payload = format!("{event}\n\n");
    format!("{:x}\r\n{payload}\r\n", payload.len()).into_bytes()
}

/// Reads the request's head and its body (by `content-length`): its path
/// and body.
async fn read_request(socket: &mut TcpStream) -> std::io::Result<(String, String)> {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            return Ok((String::new(), String::new()));
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
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
                return Ok((path, text[end + 4..end + 4 + length].to_owned()));
            }
        }
    }
}
