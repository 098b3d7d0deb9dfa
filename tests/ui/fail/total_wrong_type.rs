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

const LIMIT_SECS: u32 = 5;

#[retry(layer = "provider")]
#[timeout(total = LIMIT_SECS)]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
