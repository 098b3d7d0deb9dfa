//! `impl Trait` in argument and return position.
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider")]
async fn total(items: impl IntoIterator<Item = u32> + Clone) -> Result<u32, Error> {
    Ok(items.clone().into_iter().sum())
}

#[retry(layer = "provider")]
async fn numbers(n: u32) -> Result<impl Iterator<Item = u32>, Error> {
    Ok(0..n)
}

fn main() {
    let _ = (total(vec![1, 2]), numbers(3));
}
