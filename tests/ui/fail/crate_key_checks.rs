use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

// `crate` goes through the checks every key does.
#[retry(layer = "provider", crate: "nika_retry")]
async fn colon() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "provider", crate = "nika_retry", crate = "nr")]
async fn twice_in_one_attribute() -> Result<(), Error> {
    Ok(())
}

fn main() {}
