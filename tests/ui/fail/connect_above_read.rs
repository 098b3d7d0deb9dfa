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

#[retry(layer = "http")]
#[timeout(connect = "30s", read = "10s")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
