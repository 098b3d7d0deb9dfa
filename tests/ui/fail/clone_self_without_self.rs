use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", clone(self))]
async fn call(body: String) -> Result<usize, Error> {
    Ok(body.len())
}

fn main() {}
