use nika_retry::{timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[tracing::instrument]
#[timeout(layer = "provider", attempt = "30s")]
async fn call(prompt: String) -> Result<usize, Error> {
    Ok(prompt.len())
}

fn main() {}
