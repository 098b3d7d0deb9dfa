use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", delay_ms = 500)]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
