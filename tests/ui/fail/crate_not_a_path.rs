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

#[retry(layer = "provider", crate = "not a path")]
#[timeout(total = "5m")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
