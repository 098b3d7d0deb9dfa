//! `#[tracing::instrument]` below `#[retry]`, with owned arguments and `err`:
//! one span for the whole call.
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", clone(prompt))]
#[tracing::instrument(err)]
async fn complete(prompt: String) -> Result<usize, Error> {
    drop(prompt.clone());
    if prompt.is_empty() {
        return Err(Error::Flaky);
    }
    Ok(prompt.len())
}

struct Client;

impl Client {
    #[retry(layer = "provider")]
    #[tracing::instrument(skip(self))]
    async fn call(&self, n: u32) -> Result<u32, Error> {
        Ok(n)
    }
}

fn main() {
    let _ = (complete(String::new()), Client.call(1));
}
