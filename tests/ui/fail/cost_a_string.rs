use nika_retry::upstream::{Held, Upstream};
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

#[retry(layer = "provider", upstream = upstream, cost = prompt.to_string())]
async fn complete(upstream: &Upstream, prompt: &str) -> Result<(), Error> {
    let _ = (upstream, prompt);
    Ok(())
}

fn main() {}
