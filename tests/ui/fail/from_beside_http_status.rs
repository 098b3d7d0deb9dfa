use nika_retry::{Classify, ErrorCategory};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("api error {status}")]
    #[category(from = category, http_status = status)]
    Api { status: u16, category: ErrorCategory },
}

fn main() {}
