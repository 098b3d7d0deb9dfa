use nika_retry::Classify;

// The message lists the types `http_status` reads.
#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("api error {status}")]
    #[category(http_status = status)]
    Api { status: u32 },
}

fn main() {}
