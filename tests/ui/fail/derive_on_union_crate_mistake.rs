//! A union is refused, and a mistake in its `crate = …` is reported too.
use nika_retry::Classify;

#[derive(Classify)]
#[category(crate = 5)]
union Bits {
    int: u32,
    float: f32,
}

fn main() {}
