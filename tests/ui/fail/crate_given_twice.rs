use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[retry(layer = "provider", crate = "nika_retry")]
#[timeout(attempt = "1s", crate = "nr")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
