use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "tool", config = nika_retry::RetryConfig::for_layer(nika_retry::Layer::Tool))]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
