//! A provider ("verb") crate: its `ProviderError` (429 with a hint, other API
//! failures by status, time limits), classified by a derive, and a provider
//! method whose retries and timeout are two attributes.
//!
//! ```text
//! cargo run --example provider
//! ```
//!
//! Self-contained: it compiles from the published crates and its own code,
//! so you can copy it as it is. `complete` is a stand-in for the HTTP call,
//! rate limited once and then answering. In a project of your own:
//!
//! ```toml
//! nika-retry = "0.2"
//! thiserror = "2"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nika_retry::{Classify, TimeoutError, retry, timeout};

#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    #[error("rate limited")]
    #[category(rate_limited, retry_after_ms = retry_after_ms)]
    RateLimited { retry_after_ms: Option<u64> },
    /// A 503 may carry a `Retry-After`: keep it, so that this layer still
    /// waits it when the http layer below gave up on it.
    #[error("api error {status}: {message}")]
    #[category(http_status = status, retry_after = retry_after)]
    Api {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

pub struct Client {
    calls: AtomicU32,
}

impl Client {
    /// One attempt of a completion. The macro generates the loop: 5xx and 429
    /// are retried (3 attempts, 1 s then 4 s, or the server's hint), 4xx are
    /// not, and each attempt gets 10 minutes: not streamed, the answer comes
    /// whole once generated, so the limit is the longest generation accepted
    /// (a `read` limit would cut a longer one and run it again).
    #[retry(layer = "provider")]
    #[timeout(attempt = "10m")]
    pub async fn complete(&self, prompt: &str) -> Result<String, ProviderError> {
        // A stand-in for the HTTP call: rate limited once, then an answer.
        match self.calls.fetch_add(1, Ordering::SeqCst) {
            0 => Err(ProviderError::RateLimited {
                retry_after_ms: Some(300),
            }),
            _ => Ok(format!("completion of {prompt:?}")),
        }
    }
}

#[tokio::main]
async fn main() {
    let client = Client {
        calls: AtomicU32::new(0),
    };
    let started = std::time::Instant::now();
    let answer = client.complete("hello").await.expect("the retry succeeds");
    println!(
        "{answer} after {} calls in {:.2?} (waited out retry_after_ms = 300)",
        client.calls.load(Ordering::SeqCst),
        started.elapsed()
    );
}
