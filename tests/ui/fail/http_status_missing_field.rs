use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("api error {code}")]
    #[category(http_status = status)]
    Api { code: u16 },
}

fn main() {}
