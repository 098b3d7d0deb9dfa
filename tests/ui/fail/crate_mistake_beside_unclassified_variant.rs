//! A mistake in `crate = …` hides no other: the variant without a category
//! (and no default on the enum) is reported too.
use nika_retry::Classify;

#[derive(Debug, Classify)]
#[category(crate = "not a path")]
enum Error {
    #[category(transient)]
    Flaky,
    Broken,
}

fn main() {}
