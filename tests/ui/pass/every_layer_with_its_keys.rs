//! Each layer with every key it allows.
use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[retry(
    layer = "http",
    attempts = 4,
    backoff = "100ms",
    max_backoff = "2s",
    multiplier = 2.0,
    jitter = 0.25,
    on = [transient],
    config = None::<nika_retry::RetryConfig>,
)]
#[timeout(connect = "5s", read = "60s", total = "2m")]
async fn http(body: String) -> Result<usize, Error> {
    Ok(body.len())
}

#[retry(
    layer = "provider",
    attempts = 10,
    backoff = "1s",
    max_backoff = "30s",
    multiplier = 1,
    jitter = 0,
    on = [transient, rate_limited],
    clone(body)
)]
#[timeout(read = "120s", total = "5m")]
async fn provider(body: String) -> Result<String, Error> {
    Ok(body)
}

#[retry(layer = "tool", clone(command))]
#[timeout(attempt = "30s", total = "1m")]
async fn tool(command: String) -> Result<String, Error> {
    Ok(command)
}

#[retry(layer = "task", attempts = 1, on = [rate_limited], jitter = 1.0)]
#[timeout(attempt = "1h 30m")]
async fn task() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = (http, provider, tool, task);
}
