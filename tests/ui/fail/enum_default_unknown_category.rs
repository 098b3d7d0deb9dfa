use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
#[category(default = permanant)]
enum Error {
    #[error("flaky")]
    Flaky,
}

fn main() {}
