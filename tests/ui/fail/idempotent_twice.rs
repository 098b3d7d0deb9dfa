use nika_retry::{retry, Classify};

#[derive(Debug, Classify)]
#[category(permanent)]
struct MailError;

#[retry(layer = "tool", idempotent = false, idempotent = true)]
async fn send_mail() -> Result<(), MailError> {
    Ok(())
}

fn main() {}
