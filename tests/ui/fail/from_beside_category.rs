use nika_retry::{Classify, ErrorCategory};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("api error")]
    #[category(transient, from = category)]
    Api { category: ErrorCategory },
}

fn main() {}
