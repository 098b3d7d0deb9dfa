use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "http", on = [transient, rate_limited])]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
