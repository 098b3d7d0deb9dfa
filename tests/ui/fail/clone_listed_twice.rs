use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", clone(body, body))]
async fn call(body: String) -> Result<usize, Error> {
    Ok(body.len())
}

fn main() {}
