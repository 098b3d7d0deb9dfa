//! total/attempt/read = EXPR take a Duration or an Option<Duration>.
use std::time::Duration;

use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

const LIMIT: Duration = Duration::from_secs(30);

#[retry(layer = "provider")]
#[timeout(total = limit)]
async fn duration(limit: Duration) -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "provider")]
#[timeout(total = limit, attempt = LIMIT)]
async fn optional(limit: Option<Duration>) -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "http")]
#[timeout(connect = Duration::from_secs(3), read = None)]
async fn http() -> Result<(), Error> {
    Ok(())
}

fn main() {
    let _ = (duration(LIMIT), optional(None), http());
}
