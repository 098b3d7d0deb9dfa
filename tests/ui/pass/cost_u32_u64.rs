use nika_retry::upstream::{Held, Upstream};
use nika_retry::{retry, Classify};

#[derive(Debug, thiserror::Error, Classify)]
pub enum Error {
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

pub struct Request {
    pub prompt_tokens: u32,
    pub max_tokens: u32,
}

pub struct Client {
    upstream: Upstream,
}

impl Client {
    /// The prompt's tokens plus the answer's most: a `u32`.
    #[retry(layer = "provider", upstream = self.upstream, cost = request.prompt_tokens + request.max_tokens)]
    pub async fn complete(&self, request: &Request) -> Result<(), Error> {
        let _ = request;
        Ok(())
    }
}

/// A `u64`, through a reference.
#[retry(layer = "provider", upstream = upstream, cost = &tokens)]
async fn embed(upstream: &Upstream, tokens: u64) -> Result<(), Error> {
    let _ = (upstream, tokens);
    Ok(())
}

fn main() {
    let _ = Client { upstream: Upstream::new("p") };
    let _ = embed;
}
