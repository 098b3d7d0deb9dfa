use nika_retry::{Classify, ErrorCategory};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("wrapped")]
    #[category(transparent, from = 0)]
    Wrapped(ErrorCategory),
}

fn main() {}
