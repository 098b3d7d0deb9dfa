//! A method whose error type, named by a path, cannot hold a timeout: the
//! error is at the type's name in the method's signature, says what to add,
//! and points nowhere into nika-retry.
use nika_retry::{retry, timeout};

mod errors {
    #[derive(Debug, thiserror::Error, nika_retry::Classify)]
    pub enum ProviderError {
        #[error("busy")]
        #[category(transient)]
        Busy,
    }
}

struct Client;

impl Client {
    #[retry(layer = "provider")]
    #[timeout(attempt = "30s")]
    async fn complete(&self) -> Result<String, errors::ProviderError> {
        Ok(String::new())
    }
}

fn main() {}
