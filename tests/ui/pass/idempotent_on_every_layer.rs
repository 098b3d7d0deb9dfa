//! `idempotent = false | EXPR` on every layer, `tool` included, and beside
//! `#[timeout]`; `reached = …` on derived variants.

use nika_retry::{retry, timeout, Classify, Reached, TimeoutError};

#[derive(Debug, Classify)]
enum SendError {
    #[category(transient, reached = no)]
    Refused,
    #[category(transient, reached = refused)]
    Unavailable,
    #[category(rate_limited, reached = maybe)]
    Odd,
    #[category(transparent)]
    Timeout(TimeoutError),
}

impl From<TimeoutError> for SendError {
    fn from(e: TimeoutError) -> Self {
        SendError::Timeout(e)
    }
}

struct Request {
    post: bool,
}

#[retry(layer = "http", idempotent = !request.post)]
#[timeout(connect = "1s", read = "5s")]
async fn send(request: &Request) -> Result<(), SendError> {
    let _ = request.post;
    Ok(())
}

#[retry(layer = "provider", idempotent = false)]
async fn complete() -> Result<(), SendError> {
    Ok(())
}

#[retry(layer = "tool", idempotent = false)]
async fn send_mail() -> Result<(), SendError> {
    Ok(())
}

#[retry(layer = "task", idempotent = true)]
async fn run_task() -> Result<(), SendError> {
    Ok(())
}

struct Mailer {
    dedups: bool,
}

impl Mailer {
    #[retry(layer = "tool", idempotent = self.dedups)]
    async fn send(&self) -> Result<(), SendError> {
        Ok(())
    }
}

fn main() {
    assert_eq!(SendError::Refused.reached(), Reached::No);
    assert_eq!(SendError::Unavailable.reached(), Reached::Refused);
    assert_eq!(SendError::Odd.reached(), Reached::Maybe);
    let _ = (send, complete, send_mail, run_task, Mailer { dedups: true }.send());
}
