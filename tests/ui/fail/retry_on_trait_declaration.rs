use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

trait Client {
    #[retry(layer = "provider")]
    async fn call(&self) -> Result<(), Error>;
}

fn main() {}
