use nika_retry::retry as r;
use nika_retry::{timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

// `#[timeout]` cannot tell that `r` is its sibling, so it expands alone: `r`
// must not then wrap that single bounded run in a retry loop.
#[timeout(layer = "provider", attempt = "1s")]
#[r(layer = "provider")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
