use nika_retry::{timeout, TimeoutError};

#[timeout(layer = "tool", attempt = "30s", idempotent = false)]
async fn send_mail() -> Result<(), TimeoutError> {
    Ok(())
}

fn main() {}
