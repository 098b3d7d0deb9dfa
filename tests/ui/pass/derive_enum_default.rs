//! #[category(default = …)] classifies the unmarked variants.
use nika_retry::{Classify, ErrorCategory};

#[derive(Debug, thiserror::Error, Classify)]
#[category(default = permanent)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
    #[error("bad input: {0}")]
    BadInput(String),
    #[error("other")]
    Other { detail: String },
}

fn main() {
    assert_eq!(Error::Flaky.category(), ErrorCategory::Transient);
    assert_eq!(Error::BadInput(String::new()).category(), ErrorCategory::Permanent);
    assert_eq!(Error::Other { detail: String::new() }.category(), ErrorCategory::Permanent);
    assert_eq!(Error::Flaky.retry_after(), None);
}
