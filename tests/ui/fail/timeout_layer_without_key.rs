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

// A layer name without its key: one error each, with the key to write.
#[timeout("http")]
async fn positional() -> Result<(), Error> {
    Ok(())
}

#[timeout(http)]
async fn flag() -> Result<(), Error> {
    Ok(())
}

// Beside #[retry], which names the layer.
#[retry(layer = "http")]
#[timeout("http", attempt = "1s")]
async fn beside_retry() -> Result<(), Error> {
    Ok(())
}

fn main() {}
