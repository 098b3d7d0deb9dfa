use nika_retry::upstream::{Held, Upstream};
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

#[retry(layer = "provider", upstream = a, upstream = b)]
async fn complete(a: &Upstream, b: &Upstream) -> Result<(), Error> {
    Ok(())
}

fn main() {}
