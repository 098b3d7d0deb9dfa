//! An argument moved into a `let`, or a `self` moved by the body, without
//! `clone(…)`: each attempt would need its own.
use std::sync::Arc;

use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider")]
async fn call(request: Vec<u8>) -> Result<usize, Error> {
    let body = request;
    Ok(body.len())
}

struct Client;

fn finish(client: Arc<Client>) -> usize {
    Arc::strong_count(&client)
}

impl Client {
    #[retry(layer = "provider")]
    async fn shared(self: Arc<Self>) -> Result<usize, Error> {
        Ok(finish(self))
    }
}

fn main() {}
