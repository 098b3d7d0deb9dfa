use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
#[error("flaky")]
struct Flaky;

fn main() {}
