use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

struct Client;

impl Client {
    #[retry(layer = "provider", clone(self))]
    async fn call(&self) -> Result<(), Error> {
        Ok(())
    }
}

fn main() {}
