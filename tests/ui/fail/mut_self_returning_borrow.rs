use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

// A documented limit: the attempts share `&mut self`, so a borrow of it cannot
// leave the loop, as with the same loop written by hand. Retry the fallible
// work returning owned data, and take the borrow after it.
struct Cache {
    items: Vec<String>,
}

impl Cache {
    #[retry(layer = "provider")]
    async fn first(&mut self) -> Result<&mut String, Error> {
        self.items.first_mut().ok_or(Error::Flaky)
    }
}

fn main() {}
