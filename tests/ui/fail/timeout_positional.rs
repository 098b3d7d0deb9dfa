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

#[retry(layer = "provider")]
#[timeout("5s")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
