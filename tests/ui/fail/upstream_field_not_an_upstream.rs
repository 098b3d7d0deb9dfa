use nika_retry::upstream::Held;
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

struct Client {
    model: String,
}

impl Client {
    // A name where the upstream belongs: the error underlines all of `self.model`.
    #[retry(layer = "provider", upstream = self.model)]
    async fn complete(&self) -> Result<(), Error> {
        Ok(())
    }
}

fn main() {}
