use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("rate limited")]
    #[category(rate_limited, retry_after = wait_ms)]
    RateLimited { wait_ms: u64 },
}

fn main() {}
