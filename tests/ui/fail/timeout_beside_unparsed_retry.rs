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

// Only the arguments that do not parse are reported: the #[timeout] is
// beside a #[retry], not alone, so it is not asked for the layer.
#[timeout(attempt = "1s")]
#[retry(layer = )]
async fn retry_below() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = )]
#[timeout(attempt = "1s")]
async fn retry_above() -> Result<(), Error> {
    Ok(())
}

fn main() {}
