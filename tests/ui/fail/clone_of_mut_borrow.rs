//! A `&mut T` or `Pin<&mut Self>` is the caller's state, which each attempt
//! reborrows: there is nothing to clone (and a `&mut` cannot be cloned).
use std::pin::Pin;

use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

#[retry(layer = "provider", clone(out))]
async fn fill(out: &mut Vec<u8>) -> Result<usize, Error> {
    out.push(1);
    Ok(out.len())
}

struct Counter(u32);

impl Counter {
    #[retry(layer = "provider", clone(self))]
    async fn pinned(self: Pin<&mut Self>) -> Result<u32, Error> {
        Ok(self.0)
    }
}

fn main() {}
