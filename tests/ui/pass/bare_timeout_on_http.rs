//! A bare #[timeout] on an http fn applies connect 10s, read 120s.
use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[retry(layer = "http")]
#[timeout]
async fn fetch() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "http")]
#[timeout()]
async fn fetch_empty_parens() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = (fetch, fetch_empty_parens);
}
