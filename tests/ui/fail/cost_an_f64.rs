use nika_retry::upstream::{Held, Upstream};
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

#[retry(layer = "provider", upstream = upstream, cost = tokens * 1.2)]
async fn complete(upstream: &Upstream, tokens: f64) -> Result<(), Error> {
    let _ = (upstream, tokens);
    Ok(())
}

fn main() {}
