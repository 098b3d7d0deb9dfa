//! Result aliases, pattern arguments, `self: Arc<Self>`, docs and attributes kept.
use std::sync::Arc;

use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("flaky")]
    #[category(transient)]
    Flaky,
}

type Result<T> = std::result::Result<T, Error>;

/// Docs stay on the fn.
#[retry(layer = "provider")]
#[must_use = "the call does nothing until awaited"]
pub(crate) async fn alias((a, b): (u32, u32), _: &str) -> Result<u32> {
    Ok(a + b)
}

#[retry(layer = "http")]
async fn io_alias(path: &std::path::Path) -> std::io::Result<bool> {
    Ok(path.as_os_str().is_empty())
}

struct Client;

impl Client {
    #[retry(layer = "provider")]
    async fn shared(self: Arc<Self>) -> Result<Arc<Self>> {
        Ok(Arc::clone(&self))
    }

    #[retry(layer = "provider")]
    async fn new_one() -> Result<Self> {
        Ok(Client)
    }
}

fn main() {
    let _ = (alias((1, 2), ""), io_alias(std::path::Path::new("")));
    let _ = (Arc::new(Client).shared(), Client::new_one());
}
