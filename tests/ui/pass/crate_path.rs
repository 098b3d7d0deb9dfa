//! `crate = "path"` on the three macros, through another name for the crate.
extern crate nika_retry as nr;

use nr::{Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
#[category(crate = "nr")]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[nr::retry(layer = "provider", crate = "nr")]
#[nr::timeout(attempt = "1s")]
async fn call() -> Result<(), Error> {
    Err(Error::Flaky)
}

fn main() {
    let _ = call();
}
