//! Native `async fn` in a trait impl and as a default method.
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

trait Provider {
    async fn complete(&self, prompt: &str) -> Result<String, Error>;

    #[retry(layer = "provider")]
    async fn ping(&self) -> Result<(), Error> {
        Ok(())
    }
}

struct Client;

impl Provider for Client {
    #[retry(layer = "provider", attempts = 5)]
    async fn complete(&self, prompt: &str) -> Result<String, Error> {
        Ok(prompt.to_owned())
    }
}

fn main() {
    let _ = (Client.complete("hi"), Client.ping());
}
