use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", clone(s))]
async fn call((ref s, n): (String, u32)) -> Result<usize, Error> {
    Ok(s.len() + n as usize)
}

fn main() {}
