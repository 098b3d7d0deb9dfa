//! The top example of README.md (and of the `nika-retry` crate docs), with
//! the types it leaves out: the canonical error type, whose status variant
//! keeps the server's `Retry-After` for the layer above.
use std::time::Duration;

use nika_retry::{retry, timeout, Classify};

#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    #[error("rate limited")]
    #[category(rate_limited, retry_after_ms = retry_after_ms)]
    RateLimited { retry_after_ms: Option<u64> },
    #[error("api error {status}: {message}")]
    #[category(http_status = status, retry_after = retry_after)]
    Api { status: u16, message: String, retry_after: Option<Duration> },
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] nika_retry::TimeoutError),
}

pub struct Request;
pub struct Response;
pub struct Client;

impl Client {
    #[retry(layer = "provider")]
    #[timeout(read = "120s")]
    pub async fn complete(&self, req: &Request) -> Result<Response, ProviderError> {
        let _ = req;
        Ok(Response)
    }
}

fn assert_send<T: Send>(_: &T) {}

fn main() {
    let fut = Client.complete(&Request);
    assert_send(&fut);
}
