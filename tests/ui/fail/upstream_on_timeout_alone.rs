use nika_retry::upstream::Upstream;
use nika_retry::{timeout, TimeoutError};

#[timeout(layer = "provider", read = "120s", upstream = upstream)]
async fn complete(upstream: &Upstream) -> Result<(), TimeoutError> {
    Ok(())
}

fn main() {}
