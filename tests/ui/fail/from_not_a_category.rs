use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("api error {status}")]
    #[category(from = status)]
    Api { status: u16 },
}

fn main() {}
