//! A `&mut self` method: each attempt borrows `self` afresh.
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

struct Counter {
    attempts: u32,
}

impl Counter {
    #[retry(layer = "provider", backoff = "1ms")]
    async fn bump(&mut self, by: u32) -> Result<u32, Error> {
        self.attempts += by;
        if self.attempts < 2 {
            return Err(Error::Flaky);
        }
        Ok(self.attempts)
    }
}

fn main() {
    let mut counter = Counter { attempts: 0 };
    let _ = counter.bump(1);
}
