use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

fn consume(_: String) {}

#[retry(layer = "provider")]
async fn call(body: String) -> Result<(), Error> {
    consume(body);
    Ok(())
}

fn main() {}
