//! An L1 HTTP transport: retries connection failures and 5xx (waiting at
//! least `Retry-After`), leaves 429 to the provider layer; its connect and
//! read limits come from per-request options, and the connect limit reaches
//! the reqwest client through `nika_retry::http::client_builder`. A failed
//! response keeps the category `http::classify_response` gives it, so the
//! server's `x-should-retry: true / false` wins over its status.
//!
//! ```text
//! cargo run --example transport
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code,
//! so you can copy it as it is. It starts a tiny HTTP server of its own on
//! 127.0.0.1 (`serve`, at the bottom), which answers 502, then 503 with
//! `Retry-After: 1`, then `hello`, and stops. Against your own service,
//! delete `serve` and call `transport.get("https://your.service/path")`.
//! Needs, in a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.2", features = ["reqwest"] }
//! reqwest = "0.13"
//! thiserror = "2"
//! # "net" and "io-util" only for the example's own server
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "net", "io-util"] }
//! ```
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use nika_retry::{Classify, ErrorCategory, RetryConfig, TimeoutError, retry, timeout};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Debug, thiserror::Error, Classify)]
pub enum HttpError {
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    /// A non-success response: its category and wait hint as
    /// `classify_response` read them (the status, unless the server's
    /// `x-should-retry` says otherwise).
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

pub struct RequestOptions {
    /// Bounds setting up a connection.
    pub connect_timeout: Duration,
    /// Cuts an attempt that has gone this long without progress.
    pub read_timeout: Duration,
    /// `None`: the http layer defaults (3 attempts, 250 ms then 1 s, 50 % jitter).
    pub retry: Option<RetryConfig>,
}

pub struct Transport {
    client: reqwest::Client,
    options: RequestOptions,
}

impl Transport {
    pub fn new(options: RequestOptions) -> Result<Transport, reqwest::Error> {
        Ok(Transport {
            // Its connector takes the connect limit of the fn whose attempt connects.
            client: nika_retry::http::client_builder().build()?,
            options,
        })
    }

    #[retry(layer = "http", config = self.options.retry.clone())]
    #[timeout(connect = self.options.connect_timeout, read = self.options.read_timeout)]
    pub async fn get(&self, url: &str) -> Result<String, HttpError> {
        let response = self.client.get(url).send().await?;
        let status = response.status();
        if !status.is_success() {
            let (category, retry_after) = nika_retry::http::classify_response(&response);
            return Err(HttpError::Status {
                status: status.as_u16(),
                category,
                retry_after,
            });
        }
        Ok(response.text().await?)
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, requests) = serve(&[
        "HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
    ])
    .await?;
    let transport = Transport::new(RequestOptions {
        connect_timeout: Duration::from_secs(10),
        read_timeout: Duration::from_secs(120),
        retry: None,
    })?;
    let started = std::time::Instant::now();
    let body = transport.get(&url).await?;
    println!(
        "{body:?} after {} requests in {:.2?} (502, then 503 with Retry-After: 1)",
        requests.load(Ordering::SeqCst),
        started.elapsed()
    );
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

/// The server's `x-should-retry` against its status, on a real socket
/// (`cargo test --example transport`).
#[cfg(test)]
mod tests {
    use super::*;

    fn transport() -> Transport {
        let options = RequestOptions {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            retry: None,
        };
        Transport::new(options).expect("a client")
    }

    #[tokio::test]
    async fn a_503_the_server_says_not_to_retry_is_one_request() {
        let (url, requests) = serve(&[
            "HTTP/1.1 503 Service Unavailable\r\nx-should-retry: false\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
        ])
        .await
        .expect("a server");
        let err = transport().get(&url).await.unwrap_err();
        assert!(
            matches!(err, HttpError::Status { status: 503, .. }),
            "{err:?}"
        );
        assert_eq!(err.category(), ErrorCategory::Permanent);
        assert_eq!(requests.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_409_the_server_says_to_retry_is_retried() {
        let (url, requests) = serve(&[
            "HTTP/1.1 409 Conflict\r\nx-should-retry: true\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
        ])
        .await
        .expect("a server");
        assert_eq!(transport().get(&url).await.unwrap(), "hello");
        assert_eq!(requests.load(Ordering::SeqCst), 2);
    }
}
