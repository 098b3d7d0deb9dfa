//! A timeout is not a category: a timed-out attempt classifies as
//! `transient`.
use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[retry(layer = "provider", on = [timeout])]
#[timeout(attempt = "30s")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
