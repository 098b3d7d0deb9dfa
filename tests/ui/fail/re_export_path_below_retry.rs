use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

mod my {
    pub use nika_retry::{retry, timeout};
}

// `my::timeout` could be another crate's `timeout`: without `crate`, `#[retry]`
// leaves it on the fn, where it meets the expanded loop.
#[my::retry(layer = "provider")]
#[my::timeout(attempt = "1s")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
