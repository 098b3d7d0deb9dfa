//! Attribute order does not change the meaning; paths may be qualified.
use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[retry(layer = "provider")]
#[timeout(attempt = "30s")]
async fn retry_first() -> Result<(), Error> {
    Ok(())
}

#[timeout(attempt = "30s")]
#[retry(layer = "provider")]
async fn timeout_first() -> Result<(), Error> {
    Ok(())
}

#[nika_retry::timeout(total = "5m")]
#[nika_retry::retry(layer = "task")]
async fn qualified() -> Result<(), Error> {
    Ok(())
}

#[timeout(read = "10s")]
#[doc = "other attributes stay where they are"]
#[allow(clippy::unused_async)]
#[retry(layer = "http")]
async fn interleaved() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = (retry_first, timeout_first, qualified, interleaved);
}
