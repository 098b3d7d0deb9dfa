use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

// `ref mut` borrows the argument itself: the next attempt would see the change.
#[retry(layer = "provider")]
async fn call((ref mut s, n): (String, u32)) -> Result<usize, Error> {
    s.push_str("!");
    Ok(s.len() + n as usize)
}

fn main() {}
