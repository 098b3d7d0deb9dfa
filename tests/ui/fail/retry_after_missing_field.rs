use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("rate limited")]
    #[category(rate_limited, retry_after = wait)]
    RateLimited { retry_after: Option<std::time::Duration> },
}

fn main() {}
