//! `#[timeout]` cannot tell `#[r]` (nika-retry's `retry`, renamed) from
//! another crate's attribute, so it stands alone, without a layer: the
//! error says that the attribute below, which names a layer, is very
//! likely `#[retry]`, and what to write.
use nika_retry::retry as r;
use nika_retry::{timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[timeout(attempt = "1s")]
#[r(layer = "provider")]
async fn renamed() -> Result<(), Error> {
    Ok(())
}

mod my {
    pub use nika_retry::retry;
}

#[timeout(attempt = "1s")]
#[my::retry(layer = "provider")]
async fn re_exported() -> Result<(), Error> {
    Ok(())
}

fn main() {}
