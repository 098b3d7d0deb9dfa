use nika_retry::{Classify, TimeoutError};

#[derive(Debug, Classify)]
enum SendError {
    #[category(transient, reached = never)]
    Unknown,
    #[category(transient, reached = no, reached = maybe)]
    Twice,
    #[category(transient, reached)]
    NoValue,
    #[category(reached = no)]
    NoCategory,
    #[category(transparent, reached = no)]
    Timeout(TimeoutError),
}

fn main() {}
