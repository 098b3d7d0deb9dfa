use nika_retry::{Classify, TimeoutError, retry, timeout};
use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug, thiserror::Error, Classify)]
pub enum ProviderError {
    #[error("rate limited")]
    #[category(rate_limited, retry_after_ms = retry_after_ms)]
    RateLimited { retry_after_ms: Option<u64> },
    #[error("api error {status}: {message}")]
    #[category(http_status = status)]
    Api { status: u16, message: String },
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

static N: AtomicU32 = AtomicU32::new(0);

struct Client;
impl Client {
    /// docs kept
    #[retry(layer = "provider", backoff = "10ms")]
    #[timeout(read = "120s")]
    async fn complete(&self, x: &str) -> Result<String, ProviderError> {
        if N.fetch_add(1, Ordering::SeqCst) < 2 {
            return Err(ProviderError::Api {
                status: 503,
                message: "busy".into(),
            });
        }
        Ok(x.to_owned())
    }
}

#[tokio::main]
async fn main() {
    println!("{:?}", Client.complete("hi").await);
    println!("attempts {}", N.load(Ordering::SeqCst));
}
