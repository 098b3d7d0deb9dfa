use nika_retry::upstream::{Held, Upstream};
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

#[retry(layer = "provider", cost = 120)]
async fn complete(prompt: &str) -> Result<(), Error> {
    let _ = prompt;
    Ok(())
}

fn main() {
    let _ = Upstream::new("unused");
}
