use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("rate limited")]
    #[category(rate_limited, retry_after_ms = wait)]
    RateLimited { wait: std::time::Duration },
}

fn main() {}
