use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("rate limited")]
    #[category(retry_after_ms = wait_ms)]
    RateLimited { wait_ms: u64 },
}

fn main() {}
