use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", read = "120s")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
