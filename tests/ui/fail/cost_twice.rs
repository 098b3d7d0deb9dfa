use nika_retry::upstream::{Held, Upstream};
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

#[retry(layer = "provider", upstream = upstream, cost = 100, cost = 200)]
async fn complete(upstream: &Upstream) -> Result<(), Error> {
    let _ = upstream;
    Ok(())
}

fn main() {}
