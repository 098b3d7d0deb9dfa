//! clone(arg, ...) clones by-value arguments that the body moves, per attempt.
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

fn consume(_: String) {}

#[retry(layer = "provider", clone(body, tags))]
async fn send(body: String, mut tags: Vec<String>, borrowed: String) -> Result<usize, Error> {
    consume(body);
    tags.push(borrowed.clone());
    Ok(tags.len() + borrowed.len())
}

fn main() {
    let _ = send(String::new(), Vec::new(), String::new());
}
