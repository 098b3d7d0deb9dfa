//! The tool side's call with a side effect: a mailer. Each call sends one
//! mail; sending it again would send a second one, so neither the tool nor
//! its transport call is idempotent (`#[retry(…, idempotent = false)]`):
//! a refused connection or a 503 is retried, a mail whose answer was lost
//! is not.

use nika_retry::{Classify, TimeoutError, retry, timeout};

use super::{HttpError, Transport};

/// What the mailer fails with: the transport's error, as it classified it
/// (what the attempt reached included).
#[derive(Debug, thiserror::Error, Classify)]
pub enum MailError {
    /// The mail server's answer, or none.
    #[error(transparent)]
    #[category(transparent)]
    Http(#[from] HttpError),
    /// The tool's own time limit.
    #[error(transparent)]
    #[category(transparent)]
    Timeout(#[from] TimeoutError),
}

/// A tool that sends mail through a mail server's HTTP API (`POST /mail`).
pub struct Mailer {
    transport: Transport,
}

impl Mailer {
    /// A mailer over `transport`.
    pub fn new(transport: Transport) -> Mailer {
        Mailer { transport }
    }

    /// Sends one mail: the server's id for it. Not idempotent: a task that
    /// opts its tools in to retries gets them only for a failure that
    /// certainly sent nothing.
    #[retry(layer = "tool", idempotent = false)]
    #[timeout(attempt = "30s")]
    pub async fn send(&self, to: &str, text: &str) -> Result<String, MailError> {
        let mail = format!("to: {to}\n\n{text}");
        Ok(self.transport.post_once("/mail", &mail).await?)
    }
}

impl Transport {
    /// One POST that must not be repeated once it may have arrived: as
    /// [`post`](Transport::post), but retried only when the connection was
    /// refused or the server answered that it did not act (429, 503, 408).
    /// It sends the call's `Idempotency-Key` all the same: a server that
    /// deduplicates on it would make the call idempotent.
    #[retry(layer = "http", config = self.options.retry.clone(), idempotent = false)]
    #[timeout(connect = self.options.connect_timeout, read = self.options.read_timeout)]
    pub async fn post_once(&self, path: &str, body: &str) -> Result<String, HttpError> {
        let url = format!("{}{path}", self.base);
        let mut request = self.client.post(url).body(body.to_owned());
        if let Some(attempt) = nika_retry::current_attempt() {
            request = request
                .header("Idempotency-Key", attempt.idempotency_key.to_string())
                .header("X-Retry-Count", attempt.total_retries);
        }
        let response = request.send().await?;
        let (category, retry_after) = nika_retry::http::classify_response(&response);
        let status = response.status();
        let body = response.text().await?;
        if status.is_success() {
            return Ok(body);
        }
        Err(HttpError::Status {
            status: status.as_u16(),
            category,
            retry_after,
            body,
        })
    }
}
