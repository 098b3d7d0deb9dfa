//! An LLM gateway's client, as the adapters are meant to be used: hyper-util's
//! client in a `tower` stack under `RetryLayer::new(Layer::Provider)`, one
//! upstream shared by every request to the model, and the response bodies
//! held to the limits (`ReadBody`):
//!
//! - a chat completion is a `POST` marked `Idempotent::YES` (a second one
//!   only generates the answer again) with a `Cost` from its prompt's size,
//!   read whole inside the attempt (`ReadBody::WHOLE`): a 500, a body cut
//!   mid-way or stalled past `read` is sent again, and the caller gets the
//!   whole answer;
//! - a payment through the same stack is a `POST` that says nothing: a lost
//!   answer may have paid, so it is sent once;
//! - a streamed completion is held until its first token
//!   (`ReadBody::first_content_when`): a stream cut before it is sent again,
//!   one cut after it is the caller's error, and a stall after it ends
//!   within `read`.
//!
//! ```text
//! cargo run --example gateway
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code.
//! It starts a tiny HTTP server of its own on 127.0.0.1 (`serve`, at the
//! bottom) that plays each fault once. Against a provider, delete `serve`
//! and send to `https://api.openai.com` (with a TLS connector). Needs:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["tower"] }
//! hyper = "1"
//! hyper-util = { version = "0.1", features = ["client-legacy", "http1", "tokio"] }
//! http = "1"
//! http-body-util = "0.1"
//! bytes = "1"
//! tower = { version = "0.5", features = ["util"] }
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "io-util", "time"] }
//! ```
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use nika_retry::tower::{ReadBody, RetryLayer, TimedBody, Timeouts};
use nika_retry::upstream::{Held, Upstream};
use nika_retry::{Classify, ConfigError, Cost, Idempotent, Layer, RetryConfig, TimeoutError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};

/// The inner service's error: classified, and able to hold the body's
/// failures and the layer's own (a time limit, an upstream's hold).
#[derive(Debug, thiserror::Error, Classify)]
pub enum GatewayError {
    /// The connection failed or broke before the headers.
    #[error(transparent)]
    #[category(transient)]
    Client(#[from] hyper_util::client::legacy::Error),
    /// The body was cut or reset.
    #[error(transparent)]
    #[category(transient)]
    Body(#[from] hyper::Error),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
    /// A request that could not be built.
    #[error(transparent)]
    #[category(permanent)]
    Request(#[from] http::Error),
}

type Body = Full<Bytes>;
/// One model's stack: the layer, the body's reading, hyper-util's client.
type Stack =
    BoxCloneService<Request<Body>, Response<TimedBody<Incoming, GatewayError>>, GatewayError>;

/// What each attempt may take: 500 ms without a byte, 10 s in all.
pub const READ: Duration = Duration::from_millis(500);
const TOTAL: Duration = Duration::from_secs(10);
/// The completion's own share of a request's cost.
const MAX_TOKENS: u32 = 256;

/// The gateway's client for one model.
pub struct Gateway {
    url: String,
    /// Answers read whole inside the attempt.
    whole: Stack,
    /// Streams held until their first token.
    streamed: Stack,
}

impl Gateway {
    pub fn new(url: &str) -> Result<Gateway, ConfigError> {
        // One upstream for the model: a 429's hold and the pacing are shared.
        let upstream = Upstream::new("example/gateway");
        // The provider layer's 3 attempts, with short backoffs for the example.
        let config = RetryConfig::for_layer(Layer::Provider)
            .with_initial_backoff(Duration::from_millis(100))?
            .with_max_backoff(Duration::from_millis(400))?;
        let stack = |read: ReadBody| {
            let layer = RetryLayer::new(Layer::Provider)
                .config(config.clone())
                .upstream(upstream.clone())
                .timeouts(Timeouts::NONE.with_read(READ).with_total(TOTAL))
                // Below the layer, inside each attempt: the body.
                .read_body(read);
            let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
            BoxCloneService::new(
                ServiceBuilder::new()
                    .layer(layer)
                    .map_err(GatewayError::from)
                    .service(client),
            )
        };
        Ok(Gateway {
            url: url.trim_end_matches('/').to_owned(),
            whole: stack(ReadBody::WHOLE),
            // A server-sent event that is a token, not a `: ping` comment.
            streamed: stack(ReadBody::first_content_when(|data: &[u8]| {
                data.starts_with(b"data:")
            })),
        })
    }

    fn post(&self, path: &str, body: String) -> Result<Request<Body>, GatewayError> {
        Ok(Request::post(format!("{}{path}", self.url))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))?)
    }

    /// A chat completion, whole: sent again after a 500, a cut or a stall.
    pub async fn chat(&self, prompt: &str) -> Result<(u16, String), GatewayError> {
        let mut request =
            self.post("/v1/chat/completions", format!("{{\"prompt\":{prompt:?}}}"))?;
        // Generating the answer twice is harmless: idempotent for this layer.
        request.extensions_mut().insert(Idempotent::YES);
        // What it spends of the model's token limit: its prompt and answer.
        let tokens = u32::try_from(prompt.len() / 4).unwrap_or(u32::MAX);
        request
            .extensions_mut()
            .insert(Cost::new(tokens.saturating_add(MAX_TOKENS)));
        let response = self.whole.clone().oneshot(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// A payment: a `POST` that says nothing, so never sent twice unless it
    /// certainly had no effect (a refused connection, a 503).
    pub async fn pay(&self, cents: u32) -> Result<u16, GatewayError> {
        let request = self.post("/v1/payments", format!("{{\"cents\":{cents}}}"))?;
        let response = self.whole.clone().oneshot(request).await?;
        Ok(response.status().as_u16())
    }

    /// A streamed completion, once its first token is in.
    pub async fn stream(
        &self,
        prompt: &str,
    ) -> Result<TimedBody<Incoming, GatewayError>, GatewayError> {
        let mut request = self.post(
            "/v1/chat/completions",
            format!("{{\"prompt\":{prompt:?},\"stream\":true}}"),
        )?;
        request.extensions_mut().insert(Idempotent::YES);
        let response = self.streamed.clone().oneshot(request).await?;
        Ok(response.into_body())
    }
}

/// The tokens of `body` until it ends, or the error that ended it.
pub async fn tokens(
    mut body: TimedBody<Incoming, GatewayError>,
) -> (Vec<String>, Option<GatewayError>) {
    let mut tokens = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                let Some(data) = frame.data_ref() else {
                    continue;
                };
                let text = String::from_utf8_lossy(data);
                tokens.extend(
                    text.lines()
                        .filter_map(|l| l.strip_prefix("data: "))
                        .map(str::to_owned),
                );
            }
            Err(error) => return (tokens, Some(error)),
        }
    }
    (tokens, None)
}

const OK: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n";
const SSE: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";

/// The faults the server plays, in the order `main` meets them.
fn script() -> Vec<Reply> {
    vec![
        // chat: a 500, then a body that stalls mid-way, then the answer.
        Reply::close(&[
            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        ]),
        Reply::stall(&[OK, "content-length: 15\r\n\r\n", "{\"ans"]),
        Reply::close(&[OK, "content-length: 15\r\n\r\n", "{\"answer\":\"4\"}\n"]),
        // pay: the server takes it and loses the answer.
        Reply::close(&[]),
        // stream: cut before its first token, then a token, then a stall.
        Reply::close(&[SSE, "6\r\n: ping\r\n"]),
        Reply::stall(&[SSE, "a\r\ndata: Hel\n\r\n", "9\r\ndata: lo\n\r\n"]),
    ]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, requests) = serve(script()).await?;
    let gateway = Gateway::new(&url)?;
    let seen = || requests.load(Ordering::SeqCst);

    let (status, answer) = gateway.chat("what is 2 + 2?").await?;
    println!(
        "chat: {status} {answer:?} after {} requests (a 500, a stall, the answer)",
        seen()
    );

    let paid = gateway.pay(500).await;
    println!(
        "pay: {:?}, sent once: {} requests in all",
        paid.err().map(|e| e.to_string()),
        seen()
    );

    let (tokens, end) = tokens(gateway.stream("say hello").await?).await;
    println!(
        "stream: {tokens:?}, then {}",
        end.map_or("the end".into(), |e| e.to_string())
    );
    println!(
        "{} requests: the stream cut before its first token was sent again, not after",
        seen()
    );
    Ok(())
}

/// One connection's reply: these parts, 10 ms apart, then the connection
/// closed, or held open without a byte more (a stall) for 5 s.
#[derive(Clone, Copy)]
pub struct Reply {
    parts: &'static [&'static str],
    stall: bool,
}

impl Reply {
    fn close(parts: &'static [&'static str]) -> Reply {
        Reply {
            parts,
            stall: false,
        }
    }

    fn stall(parts: &'static [&'static str]) -> Reply {
        Reply { parts, stall: true }
    }
}

/// A server on 127.0.0.1 that answers each connection with the next of
/// `replies`, then stops; with the number of requests it got.
pub async fn serve(replies: Vec<Reply>) -> std::io::Result<(String, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        for reply in replies {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                read_request(&mut socket).await;
                for part in reply.parts {
                    if socket.write_all(part.as_bytes()).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                if reply.stall {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            });
        }
    });
    Ok((url, requests))
}

/// Reads a request: its head, then `content-length` bytes of body.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut request = Vec::new();
    let mut chunk = [0; 1024];
    loop {
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                return;
            }
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
        }
    }
}

/// What the example shows, on a real socket (`cargo test --example gateway`).
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_chat_post_is_sent_again_after_a_500_and_a_stall_and_read_whole() {
        let (url, requests) = serve(script()[..3].to_vec()).await.expect("a server");
        let answer = Gateway::new(&url).unwrap().chat("2 + 2").await.unwrap();
        assert_eq!(answer, (200, "{\"answer\":\"4\"}\n".to_owned()));
        assert_eq!(requests.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_payment_whose_answer_is_lost_is_sent_once() {
        let (url, requests) = serve(vec![
            Reply::close(&[]),
            Reply::close(&[OK, "content-length: 0\r\n\r\n"]),
        ])
        .await
        .expect("a server");
        assert!(Gateway::new(&url).unwrap().pay(500).await.is_err());
        assert_eq!(requests.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_stream_is_sent_again_before_its_first_token_and_cut_by_read_after_it() {
        let (url, requests) = serve(script()[4..].to_vec()).await.expect("a server");
        let started = tokio::time::Instant::now();
        let (tokens, end) = tokens(Gateway::new(&url).unwrap().stream("hi").await.unwrap()).await;
        assert_eq!(tokens, ["Hel", "lo"]);
        let Some(GatewayError::Timeout(cut)) = end else {
            panic!("the stall after the tokens is read's: {end:?}")
        };
        assert_eq!(cut.limit(), READ);
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "within read, not the server's 5 s"
        );
        assert_eq!(requests.load(Ordering::SeqCst), 2);
    }
}
