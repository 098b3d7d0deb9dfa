use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

// An attempt would see what the attempt before left in `n`.
#[retry(layer = "provider")]
async fn call(mut n: u32) -> Result<u32, Error> {
    n += 10;
    Ok(n)
}

fn main() {}
