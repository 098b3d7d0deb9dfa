use nika_retry::upstream::Held;
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

struct Client {
    model: Option<String>,
}

impl Client {
    // An `Option` of something else than an upstream: refused as the type it is.
    #[retry(layer = "provider", upstream = self.model.as_ref())]
    async fn complete(&self) -> Result<(), Error> {
        Ok(())
    }
}

fn main() {}
