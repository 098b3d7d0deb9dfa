use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[derive(Clone)]
struct Client {
    calls: u32,
}

impl Client {
    #[retry(layer = "provider")]
    async fn call(mut self) -> Result<u32, Error> {
        self.calls += 1;
        Ok(self.calls)
    }
}

fn main() {}
