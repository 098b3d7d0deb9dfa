use nika_retry::timeout as t;
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

// `#[retry]` cannot tell that `t` is its sibling: it must not wrap the whole loop.
#[retry(layer = "provider")]
#[t(attempt = "1s")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
