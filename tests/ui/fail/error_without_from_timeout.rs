use nika_retry::{retry, timeout, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider")]
#[timeout(attempt = "30s")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
