use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[tokio::test]
#[retry(layer = "provider")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
