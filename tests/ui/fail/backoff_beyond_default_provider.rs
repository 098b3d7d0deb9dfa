//! The other side of the provider and task defaults (1 s, 16 s) that
//! `tests/ui/pass/runtime_mirrors.rs` compiles at.
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", backoff = "17s")]
async fn backoff_above_default_max() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "task", max_backoff = "999ms")]
async fn max_backoff_below_default_backoff() -> Result<(), Error> {
    Ok(())
}

fn main() {}
