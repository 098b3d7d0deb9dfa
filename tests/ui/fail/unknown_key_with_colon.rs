//! An unknown key written with `:` gets one error, whose hint shows the key
//! to write with its `=`; no example of another key.
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", max_attempts: 3)]
async fn call() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "provider", backof: "1s")]
async fn misspelt() -> Result<(), Error> {
    Ok(())
}

fn main() {}
