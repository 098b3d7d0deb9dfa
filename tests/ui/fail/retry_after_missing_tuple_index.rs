use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("rate limited")]
    #[category(rate_limited, retry_after = 1)]
    RateLimited(Option<std::time::Duration>),
}

fn main() {}
