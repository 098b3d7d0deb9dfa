//! `upstream = …` on every layer, as a field, a reference, an owned value
//! and a call, in methods of `&self`, `Arc<Self>` and async-trait impls.
use std::sync::Arc;

use nika_retry::upstream::{Held, Upstream};
use nika_retry::{retry, timeout, Classify, TimeoutError};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

struct Client {
    upstream: Upstream,
}

impl Client {
    fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    #[retry(layer = "http", upstream = self.upstream)]
    async fn field(&self) -> Result<(), Error> {
        Ok(())
    }

    #[retry(layer = "provider", upstream = self.upstream())]
    #[timeout(read = "120s", total = "5m")]
    async fn call(&self) -> Result<(), Error> {
        Ok(())
    }

    #[retry(layer = "provider", upstream = &self.upstream)]
    async fn arc(self: Arc<Self>) -> Result<(), Error> {
        Ok(())
    }
}

#[retry(layer = "tool", upstream = Upstream::new("tools/mailer"))]
async fn tool() -> Result<(), Error> {
    Ok(())
}

#[retry(layer = "task", upstream = upstream)]
async fn task(upstream: Upstream) -> Result<(), Error> {
    Ok(())
}

#[async_trait::async_trait]
trait Complete {
    async fn complete(&self) -> Result<(), Error>;
}

#[async_trait::async_trait]
impl Complete for Client {
    #[retry(layer = "provider", upstream = self.upstream)]
    async fn complete(&self) -> Result<(), Error> {
        Ok(())
    }
}

fn assert_send<T: Send>(_: T) {}

fn main() {
    let client = Arc::new(Client { upstream: Upstream::new("p") });
    assert_send(client.field());
    assert_send(client.call());
    assert_send(client.clone().arc());
    assert_send(tool());
    assert_send(task(Upstream::new("t")));
}
