use nika_retry::{Classify, ErrorCategory};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("api error")]
    #[category(from, retry_after = wait)]
    Api { category: ErrorCategory, wait: Option<std::time::Duration> },
    #[error("other")]
    #[category(from = kind)]
    Other { category: ErrorCategory },
}

fn main() {}
