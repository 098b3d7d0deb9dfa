//! backoff = "4s" on http equals the http default max_backoff (4s), so it
//! compiles; with backoff_above_default_max_http.rs this pins the macro's
//! copy of the layer defaults.
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "http", backoff = "4s")]
async fn fetch() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "provider", backoff = "16s")]
async fn complete() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = (fetch(), complete());
}
