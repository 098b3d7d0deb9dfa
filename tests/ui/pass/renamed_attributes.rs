//! The attributes under a renamed import (written above its sibling), through
//! a re-export imported by name, and through a re-export path with `crate`.
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

/// Re-exports the attributes only.
mod my {
    pub use nika_retry::{retry, timeout};
}

/// Re-exports the whole crate, so that it can be named by `crate = "whole"`.
mod whole {
    pub use nika_retry::*;
}

use my::timeout;
use nika_retry::retry as r;
use nika_retry::timeout as t;

#[t(attempt = "1s")]
#[nika_retry::retry(layer = "provider")]
async fn renamed_timeout_above() -> Result<(), Error> {
    Err(Error::Flaky)
}

#[r(layer = "provider")]
#[timeout(attempt = "1s")]
async fn re_export_imported_by_name() -> Result<(), Error> {
    Ok(())
}

#[whole::retry(layer = "provider", crate = "whole")]
#[whole::timeout(attempt = "1s")]
async fn re_export_path_with_crate_above() -> Result<(), Error> {
    Ok(())
}

#[my::retry(layer = "provider")]
#[whole::timeout(attempt = "1s", crate = "whole")]
async fn re_export_path_with_crate_below() -> Result<(), Error> {
    Ok(())
}

/// What the error of `fail/renamed_retry_below_timeout_without_layer.rs`
/// tells a renamed or re-exported `#[retry]` below `#[timeout]` to write.
#[timeout(attempt = "1s")]
#[my::retry(layer = "provider", crate = "nika_retry")]
async fn re_export_attribute_path_with_crate_below() -> Result<(), Error> {
    Ok(())
}

#[timeout(attempt = "1s")]
#[nika_retry::retry(layer = "provider")]
async fn imported_under_its_own_name_below() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = (
        re_export_attribute_path_with_crate_below(),
        imported_under_its_own_name_below(),
        renamed_timeout_above(),
        re_export_imported_by_name(),
        re_export_path_with_crate_above(),
        re_export_path_with_crate_below(),
    );
}
