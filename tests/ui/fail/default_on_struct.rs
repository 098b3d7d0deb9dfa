use nika_retry::Classify;

// A struct has one category: it is written directly, not as a default.
#[derive(Debug, thiserror::Error, Classify)]
#[error("busy")]
#[category(default = transient)]
struct Busy;

fn main() {}
