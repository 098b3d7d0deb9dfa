use nika_retry::upstream::Held;
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

#[retry(layer = "provider", upstream = "openai/gpt-4o")]
async fn complete() -> Result<(), Error> {
    Ok(())
}

fn main() {}
