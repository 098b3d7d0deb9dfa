use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[retry(layer = "provider")]
#[timeout(attempt = "1s", attempts = 3)]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
