//! The generated loop runs: a transient error is retried until it succeeds.
use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
    #[error("bad")]
    #[category(permanent)]
    Bad,
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

static CALLS: AtomicU32 = AtomicU32::new(0);

#[retry(layer = "provider", attempts = 3, backoff = "1ms", max_backoff = "2ms")]
#[timeout(attempt = "5s")]
async fn flaky() -> Result<u32, Error> {
    let n = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    if n < 3 { Err(Error::Flaky) } else { Ok(n) }
}

#[retry(layer = "provider", backoff = "1ms")]
async fn bad() -> Result<(), Error> {
    Err(Error::Bad)
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    assert_eq!(rt.block_on(flaky()).unwrap(), 3);
    assert!(matches!(rt.block_on(bad()), Err(Error::Bad)));
}
