//! A provider client on an [`Upstream`], as a user writes one: the upstream
//! tests call it in one process, the fleet tests from each worker process.

use std::time::Duration;

use nika_retry::upstream::{Held, Upstream};
use nika_retry::{Classify, ErrorCategory, retry};

/// The name of the fleet tests' upstream.
pub const UPSTREAM: &str = "fleet/model";

/// What a call of [`Provider`] fails with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered this status (classified, with its hint).
    #[error("status {0}")]
    Api(u16, ErrorCategory, Option<Duration>),
    /// No answer.
    #[error("transport: {0}")]
    Transport(String),
    /// The upstream is held longer than the call waits.
    #[error(transparent)]
    Held(#[from] Held),
}

impl Classify for Error {
    fn category(&self) -> ErrorCategory {
        match self {
            Error::Api(_, category, _) => *category,
            Error::Transport(_) => ErrorCategory::Transient,
            Error::Held(held) => held.category(),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Api(_, _, hint) => *hint,
            Error::Held(held) => held.retry_after(),
            Error::Transport(_) => None,
        }
    }
}

/// Calls `url` with a real reqwest client, through `upstream`.
///
/// ```no_run
/// # async fn f() {
/// use nika_retry::upstream::Upstream;
/// use nika_retry_tests::fleet::Provider;
///
/// let provider = Provider::new("http://127.0.0.1:8080/v1/chat", Upstream::new("fleet/model"));
/// let _ = provider.call().await;
/// # }
/// ```
#[derive(Debug)]
pub struct Provider {
    client: reqwest::Client,
    url: String,
    /// The upstream every call passes.
    pub upstream: Upstream,
}

impl Provider {
    /// A client of `url` through `upstream`.
    pub fn new(url: &str, upstream: Upstream) -> Provider {
        Provider {
            client: reqwest::Client::new(),
            url: url.to_owned(),
            upstream,
        }
    }

    /// One call: the provider layer's retries, through the upstream.
    ///
    /// # Errors
    ///
    /// The last attempt's error, or [`Error::Held`].
    #[retry(layer = "provider", upstream = self.upstream)]
    pub async fn call(&self) -> Result<String, Error> {
        self.send().await
    }

    /// The same call without the upstream: it meets every limit alone.
    ///
    /// # Errors
    ///
    /// The last attempt's error.
    #[retry(layer = "provider")]
    pub async fn call_alone(&self) -> Result<String, Error> {
        self.send().await
    }

    /// A completion of `body` (a quota server's prompt) through the
    /// upstream, each attempt spending the prompt's tokens; every answer's
    /// rate-limit headers go to the upstream.
    ///
    /// # Errors
    ///
    /// The last attempt's error, or [`Error::Held`].
    #[retry(layer = "provider", upstream = self.upstream, cost = crate::fault::quota::tokens_of(body))]
    pub async fn complete(&self, body: &str) -> Result<String, Error> {
        let response = self
            .client
            .post(&self.url)
            .body(body.to_owned())
            .send()
            .await
            .map_err(|e| Error::Transport(e.to_string()))?;
        self.upstream.observe(response.headers());
        Self::answer(response).await
    }

    /// One request.
    async fn send(&self) -> Result<String, Error> {
        let response = self
            .client
            .post(&self.url)
            .send()
            .await
            .map_err(|e| Error::Transport(e.to_string()))?;
        Self::answer(response).await
    }

    /// A response's text, or its status classified.
    async fn answer(response: reqwest::Response) -> Result<String, Error> {
        if response.status().is_success() {
            return response
                .text()
                .await
                .map_err(|e| Error::Transport(e.to_string()));
        }
        let (category, hint) = nika_retry::http::classify_response(&response);
        Err(Error::Api(response.status().as_u16(), category, hint))
    }
}
