//! The client side of the quota server, as the fan-out tests, the soak and
//! the benchmark write it: one `POST` whose rate-limit headers go to an
//! upstream, an answer of 400 or more an error classified as
//! `classify_response` does. Each caller puts its own `#[retry]` on it.

use std::time::Duration;

use nika_retry::upstream::{Held, Upstream};
use nika_retry::{Classify, ErrorCategory};

/// What a call to the quota server fails with.
#[derive(Debug, thiserror::Error, Classify)]
pub enum CallError {
    /// The request did not get an answer.
    #[error("request failed: {0}")]
    #[category(transparent)]
    Request(#[from] reqwest::Error),
    /// An answer of 400 or more: its category and the server's hint.
    #[error("api error {status}")]
    #[category(from = category, retry_after = retry_after)]
    Api {
        /// The status.
        status: u16,
        /// What `classify_response` made of it.
        category: ErrorCategory,
        /// `Retry-After`, if any.
        retry_after: Option<Duration>,
    },
    /// The upstream's hold was longer than the layer waits.
    #[error(transparent)]
    #[category(transparent)]
    Held(#[from] Held),
}

/// One `POST` of `body` to `url`: the answer's text. `observed`: its
/// rate-limit headers go to it (the bench's "each call alone" observes
/// nothing).
pub async fn post(
    http: &reqwest::Client,
    url: &str,
    body: &str,
    observed: Option<&Upstream>,
) -> Result<String, CallError> {
    let response = http.post(url).body(body.to_owned()).send().await?;
    if let Some(upstream) = observed {
        upstream.observe(response.headers());
    }
    let status = response.status().as_u16();
    if status >= 400 {
        let (category, retry_after) = nika_retry::http::classify_response(&response);
        return Err(CallError::Api {
            status,
            category,
            retry_after,
        });
    }
    Ok(response.text().await?)
}
