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

// An unknown layer hides none of the other mistakes, in either attribute.
#[timeout(atempt = "1s")]
#[retry(layer = "Http", jitter = 2.0)]
async fn call(mut n: u32) -> Result<u32, Error> {
    n += 1;
    Ok(n)
}

fn main() {}
