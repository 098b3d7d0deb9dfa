use nika_retry::upstream::Upstream;
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("busy")]
    #[category(transient)]
    Busy,
}

struct Client {
    upstream: Upstream,
}

impl Client {
    #[retry(layer = "provider", upstream = self.upstream)]
    async fn complete(&self) -> Result<(), Error> {
        Ok(())
    }
}

fn main() {}
