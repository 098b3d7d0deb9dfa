//! An L1 HTTP transport: retries connection failures and 5xx (waiting at
//! least `Retry-After`), leaves 429 to the provider layer; its connect and
//! read limits come from per-request options, and the connect limit reaches
//! the reqwest client through `nika_retry::http::client_builder`.
//!
//! ```text
//! cargo run --example transport
//! ```
//!
//! Needs, in a project of your own:
//!
//! ```toml
//! nika-retry = { version = "0.1", features = ["reqwest"] }
//! reqwest = "0.13"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! It talks to this repository's fault server (`nika_retry_tests::fault`),
//! started on 127.0.0.1 to fail twice and then answer. Against your own
//! service, drop the `use nika_retry_tests::…` line and replace these two:
//!
//! ```text
//! let server = FaultServer::start([…]).await;   // delete
//! .get(&server.url("/"))                        // .get("https://your.service/path")
//! ```

use std::time::Duration;

use nika_retry::{Classify, RetryConfig, TimeoutError, retry, timeout};
use nika_retry_tests::fault::{Fault, FaultServer};

#[derive(Debug, thiserror::Error, Classify)]
pub enum HttpError {
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    #[error("HTTP {status}")]
    #[category(http_status = status, retry_after = retry_after)]
    Status {
        status: u16,
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
    #[retry(layer = "http", config = self.options.retry.clone())]
    #[timeout(connect = self.options.connect_timeout, read = self.options.read_timeout)]
    pub async fn get(&self, url: &str) -> Result<String, HttpError> {
        let response = self.client.get(url).send().await?;
        let (_, retry_after) = nika_retry::http::classify_response(&response);
        let status = response.status();
        if !status.is_success() {
            return Err(HttpError::Status {
                status: status.as_u16(),
                retry_after,
            });
        }
        Ok(response.text().await?)
    }
}

#[tokio::main]
async fn main() {
    let server = FaultServer::start([
        Fault::Status(502),
        Fault::UnavailableFor(1),
        Fault::ok("hello"),
    ])
    .await;
    let transport = Transport {
        // Its connector takes the connect limit of the fn whose attempt connects.
        client: nika_retry::http::client_builder().build().unwrap(),
        options: RequestOptions {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
            retry: None,
        },
    };
    let started = std::time::Instant::now();
    let body = transport
        .get(&server.url("/"))
        .await
        .expect("the third attempt succeeds");
    println!(
        "{body:?} after {} requests in {:.2?} (502, then 503 with Retry-After: 1)",
        server.requests(),
        started.elapsed()
    );
}
