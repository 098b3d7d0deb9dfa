use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[tracing::instrument]
#[retry(layer = "provider")]
async fn call(prompt: String) -> Result<usize, Error> {
    Ok(prompt.len())
}

fn main() {}
