//! The http layer's policy for a tower service: hyper-util's client, with
//! `nika_retry::tower::RetryLayer` in a `ServiceBuilder`. The same engine as
//! `#[retry(layer = "http")]`: 3 attempts on connection failures and 5xx,
//! waiting at least the server's `Retry-After`, 429 left to the provider
//! layer, a response that is still a failure handed back as it came, each
//! decision an event (printed here by `tracing-subscriber`).
//!
//! ```text
//! cargo run --example tower
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code,
//! so you can copy it as it is. It starts a tiny HTTP server of its own on
//! 127.0.0.1 (`serve`, at the bottom), which answers 502, then 503 with
//! `Retry-After: 1`, then `hello`, and stops. Against your own service,
//! delete `serve` and send to `https://your.service/path` (with a TLS
//! connector). Needs, in a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["tower"] }
//! hyper-util = { version = "0.1", features = ["client-legacy", "http1", "tokio"] }
//! http = "1"
//! http-body-util = "0.1"
//! bytes = "1"
//! tower = { version = "0.5", features = ["util"] }
//! thiserror = "2"
//! tracing-subscriber = "0.3"
//! # "net" and "io-util" only for the example's own server
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "io-util"] }
//! ```
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use nika_retry::tower::{RetryLayer, Timeouts};
use nika_retry::upstream::Held;
use nika_retry::{Classify, Layer, TimeoutError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tower::ServiceBuilder;

/// The inner service's error, as the layer needs it: classified, and able
/// to hold the layer's own failures (a time limit, an upstream's hold).
#[derive(Debug, thiserror::Error, Classify)]
pub enum HttpError {
    /// The connection failed or broke: the transport's to retry.
    #[error(transparent)]
    #[category(transient)]
    Client(#[from] hyper_util::client::legacy::Error),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

/// `url`'s status and body, through the layer.
pub async fn get(url: &str) -> Result<(u16, String), Box<dyn std::error::Error>> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut service = ServiceBuilder::new()
        // Outermost: each request's attempts, bounded as `#[timeout]` would.
        .layer(
            RetryLayer::new(Layer::Http)
                .timeouts(Timeouts::NONE.with_attempt(Duration::from_secs(10))),
        )
        .map_err(HttpError::from)
        .service(client);
    let request = Request::get(url).body(Empty::new())?;
    let response = service.ready().await?.call(request).await?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The retries, as the `nika_retry` target's WARN lines.
    tracing_subscriber::fmt().with_target(false).init();
    let (url, requests) = serve(&[
        "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
    ])
    .await?;
    let (status, body) = get(&url).await?;
    println!(
        "{status} {body:?} after {} requests",
        requests.load(Ordering::SeqCst)
    );
    Ok(())
}

/// A server on 127.0.0.1 that answers each connection with the next of
/// `responses`, then stops; with the number of requests it got.
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
            // Read the request up to its blank line (a GET has no body).
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                let mut chunk = [0; 1024];
                match socket.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = socket.write_all(response.as_bytes()).await;
        }
    });
    Ok((url, requests))
}

/// What the example shows, on a real socket (`cargo test --example tower`).
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_502_then_a_503_then_hello_is_three_requests() {
        let (url, requests) = serve(&[
            "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
        ])
        .await
        .expect("a server");
        let started = tokio::time::Instant::now();
        assert_eq!(get(&url).await.unwrap(), (200, "hello".to_owned()));
        assert_eq!(requests.load(Ordering::SeqCst), 3);
        assert!(
            started.elapsed() >= Duration::from_secs(1),
            "Retry-After: 1 waited"
        );
    }

    #[tokio::test]
    async fn a_404_is_handed_back_at_once() {
        let (url, requests) =
            serve(&["HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"])
                .await
                .expect("a server");
        assert_eq!(get(&url).await.unwrap().0, 404);
        assert_eq!(requests.load(Ordering::SeqCst), 1);
    }
}
