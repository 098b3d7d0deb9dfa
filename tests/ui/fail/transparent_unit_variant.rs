use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("gone")]
    #[category(transparent)]
    Gone,
}

fn main() {}
