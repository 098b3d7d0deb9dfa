use nika_retry::{timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

#[timeout(total = "5m")]
async fn call() -> Result<(), Error> {
    Ok(())
}

fn main() {}
