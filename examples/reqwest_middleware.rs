//! A `reqwest_middleware` client under the http layer's policy:
//! `nika_retry::reqwest_middleware::Retry` retries connection failures and
//! 5xx (waiting at least `Retry-After`), leaves 429 to the layer above,
//! shares an upstream's holds between requests, and says so when a request
//! whose body cannot be replayed (a stream) was not retried. Every decision
//! is an event, here printed by an `EventLog`.
//!
//! ```text
//! cargo run --example reqwest_middleware
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code,
//! so you can copy it as it is. It starts a tiny HTTP server of its own on
//! 127.0.0.1 (`serve`, at the bottom), which answers each request with the
//! next of the responses it was given. Against your own service, delete
//! `serve` and send to `https://your.service/path`. Needs, in a project of
//! your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["reqwest-middleware"] }
//! reqwest = { version = "0.13", features = ["stream"] }
//! reqwest-middleware = "0.5"
//! # the streamed body only
//! futures-util = "0.3"
//! # "net" and "io-util" only for the example's own server
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "io-util"] }
//! ```
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nika_retry::Layer;
use nika_retry::events::{EventLog, observe};
use nika_retry::reqwest_middleware::Retry;
use nika_retry::upstream::Upstream;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const UNAVAILABLE: &str =
    "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
const UNAVAILABLE_FOR_1S: &str = "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
const HELLO: &str = "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello";

/// The client: the http layer's defaults (3 attempts, 250 ms then 1 s,
/// 50 % jitter, at least the server's `Retry-After`), every request sharing
/// the holds of one upstream.
fn client(upstream: &Upstream) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(Retry::new(Layer::Http).upstream(upstream.clone()))
        .build()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let upstream = Upstream::new("example");
    let client = client(&upstream);
    let log = EventLog::new();

    // A 502, a 503 that asks for 1 s, then the answer.
    let (url, requests) = serve(&[
        "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        UNAVAILABLE_FOR_1S,
        HELLO,
    ])
    .await?;
    let started = std::time::Instant::now();
    let response = observe(Arc::new(log.clone()), client.get(&url).send()).await?;
    println!(
        "{:?} after {} requests in {:.2?} (502, then 503 with Retry-After: 1)",
        response.text().await?,
        requests.load(Ordering::SeqCst),
        started.elapsed()
    );

    // A streamed body cannot be sent twice: sent once, its 503 handed
    // back, and the event says why it was not retried.
    let (url, requests) = serve(&[UNAVAILABLE, HELLO]).await?;
    let body = futures_util::stream::iter([Ok::<_, std::io::Error>("a streamed body")]);
    let request = client
        .put(&url)
        .body(reqwest::Body::wrap_stream(body))
        .send();
    let response = observe(Arc::new(log.clone()), request).await?;
    println!(
        "a streamed PUT: {} after {} request",
        response.status(),
        requests.load(Ordering::SeqCst)
    );

    println!("\nevents:\n{log}");
    Ok(())
}

/// A one-off HTTP server on 127.0.0.1: answers one request per connection
/// with each of `responses` in turn, then stops; counts the requests it got.
async fn serve(responses: &'static [&'static str]) -> std::io::Result<(String, Arc<AtomicUsize>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/", listener.local_addr()?);
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        for response in responses {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            read_request(&mut socket).await;
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    Ok((url, requests))
}

/// Reads a request whole (its head, then a body of `content-length` or a
/// chunked one), so that closing the connection does not reset it.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut request = Vec::new();
    loop {
        let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
        if let Some(head_end) = text.find("\r\n\r\n") {
            let head = &text[..head_end];
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|n| n.trim().parse::<usize>().ok());
            let complete = match length {
                Some(n) => request.len() >= head_end + 4 + n,
                None if head.contains("transfer-encoding: chunked") => text.ends_with("0\r\n\r\n"),
                None => true,
            };
            if complete {
                return;
            }
        }
        let mut chunk = [0; 1024];
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&chunk[..n]),
        }
    }
}

/// What the example shows, on its own server (`cargo test --example
/// reqwest_middleware`).
#[cfg(test)]
mod tests {
    use super::*;
    use nika_retry::engine::GiveUp;

    #[tokio::test]
    async fn a_streamed_body_is_sent_once_and_the_event_says_why() {
        let (url, requests) = serve(&[UNAVAILABLE, HELLO]).await.expect("a server");
        let log = EventLog::new();
        let body = futures_util::stream::iter([Ok::<_, std::io::Error>("body")]);
        let request = client(&Upstream::new("test"))
            .put(&url)
            .body(reqwest::Body::wrap_stream(body))
            .send();
        let response = observe(Arc::new(log.clone()), request).await;
        assert_eq!(response.expect("a response").status(), 503);
        assert_eq!(requests.load(Ordering::SeqCst), 1);
        let reasons: Vec<_> = log.events().iter().map(|e| e.reason).collect();
        assert_eq!(reasons, [Some(GiveUp::NotReplayable)]);
    }

    #[tokio::test]
    async fn a_buffered_body_is_replayed() {
        let (url, requests) = serve(&[UNAVAILABLE, HELLO]).await.expect("a server");
        let response = client(&Upstream::new("test"))
            .put(&url)
            .body("body")
            .send()
            .await;
        assert_eq!(
            response.expect("a response").text().await.ok().as_deref(),
            Some("hello")
        );
        assert_eq!(requests.load(Ordering::SeqCst), 2);
    }
}
