//! The attributes under a renamed import (written above its sibling) and
//! through a re-export path.
use nika_retry::{Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

mod my {
    pub use nika_retry::{retry, timeout};
}

use nika_retry::retry as r;
use nika_retry::timeout as t;

#[t(attempt = "1s")]
#[nika_retry::retry(layer = "provider")]
async fn renamed_timeout_above() -> Result<(), Error> {
    Err(Error::Flaky)
}

#[r(layer = "provider")]
#[my::timeout(attempt = "1s")]
async fn renamed_retry_above() -> Result<(), Error> {
    Ok(())
}

#[my::retry(layer = "provider")]
#[my::timeout(attempt = "1s")]
async fn re_exported() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = (renamed_timeout_above(), renamed_retry_above(), re_exported());
}
