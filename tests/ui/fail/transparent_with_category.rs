use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent, transient)]
    Io(std::io::Error),
}

fn main() {}
