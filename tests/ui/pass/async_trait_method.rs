//! #[retry] and #[timeout] inside an #[async_trait] impl, either order.
use async_trait::async_trait;
use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[async_trait]
trait Provider {
    async fn complete(&self, prompt: &str) -> Result<String, Error>;
    async fn reset(&mut self, seed: u64) -> Result<(), Error>;
    async fn send(&self, body: String) -> Result<(), Error>;
}

struct Client {
    calls: u32,
}

fn consume(_: String) {}

#[async_trait]
impl Provider for Client {
    #[retry(layer = "provider")]
    #[timeout(read = "120s")]
    async fn complete(&self, prompt: &str) -> Result<String, Error> {
        Ok(prompt.to_owned())
    }

    #[timeout(total = "5m")]
    #[retry(layer = "provider", attempts = 2)]
    async fn reset(&mut self, seed: u64) -> Result<(), Error> {
        self.calls += seed as u32;
        Ok(())
    }

    #[retry(layer = "provider", clone(body))]
    async fn send(&self, body: String) -> Result<(), Error> {
        consume(body);
        Ok(())
    }
}

fn assert_send<T: Send>(_: &T) {}

fn main() {
    let client = Client { calls: 0 };
    let fut = client.complete("hi");
    assert_send(&fut);
}
