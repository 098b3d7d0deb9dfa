use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient, crate = "nika_retry")]
    Flaky,
}

fn main() {}
