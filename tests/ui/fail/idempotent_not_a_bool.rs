use nika_retry::{retry, Classify};

#[derive(Debug, Classify)]
#[category(transient)]
struct PayError;

#[retry(layer = "http", idempotent = "no")]
async fn charge() -> Result<(), PayError> {
    Ok(())
}

#[retry(layer = "http", idempotent = method)]
async fn send(method: &str) -> Result<(), PayError> {
    let _ = method;
    Ok(())
}

fn main() {}
