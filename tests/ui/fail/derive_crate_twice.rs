use nika_retry::Classify;

// A second `crate` is reported, not ignored, in one #[category] or another.
#[derive(Debug, thiserror::Error, Classify)]
#[category(crate = "nika_retry")]
#[category(default = permanent, crate = "nr")]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[derive(Debug, thiserror::Error, Classify)]
#[category(crate = "nika_retry", crate = "nika_retry")]
enum Other {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

fn main() {}
