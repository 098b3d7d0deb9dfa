use nika_retry::Classify;

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("io at {path}: {source}")]
    #[category(transparent)]
    Io { path: String, source: std::io::Error },
}

fn main() {}
