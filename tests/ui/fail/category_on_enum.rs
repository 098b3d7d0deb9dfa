use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
#[category(transient)]
enum Error {
    #[error("flaky")]
    Flaky,
}

fn main() {}
