//! Hints beside a category or http_status; retry_after by tuple index.
use std::time::Duration;

use nika_retry::{Classify, ErrorCategory};

#[derive(Debug, thiserror::Error, Classify)]
enum Error {
    #[error("api error {status}")]
    #[category(http_status = status, retry_after = hint)]
    Api { status: u16, hint: Option<Duration> },
    #[error("api error {status}")]
    #[category(http_status = status, retry_after_ms = hint_ms)]
    ApiMs { status: u16, hint_ms: Option<u64> },
    #[error("rate limited")]
    #[category(rate_limited, retry_after = 1)]
    RateLimited(String, Duration),
    #[error("slow down")]
    #[category(transient, retry_after_ms = 0)]
    SlowDown(u64),
    #[error("status {0}")]
    #[category(http_status = 0)]
    Status(u16),
}

fn main() {
    let api = Error::Api { status: 429, hint: Some(Duration::from_secs(3)) };
    assert_eq!(api.category(), ErrorCategory::RateLimited);
    assert_eq!(api.retry_after(), Some(Duration::from_secs(3)));
    let ms = Error::ApiMs { status: 503, hint_ms: Some(250) };
    assert_eq!(ms.retry_after(), Some(Duration::from_millis(250)));
    let limited = Error::RateLimited(String::new(), Duration::from_secs(5));
    assert_eq!(limited.retry_after(), Some(Duration::from_secs(5)));
    assert_eq!(Error::SlowDown(10).retry_after(), Some(Duration::from_millis(10)));
    assert_eq!(Error::Status(404).category(), ErrorCategory::NotFound);
    assert_eq!(Error::Status(404).retry_after(), None);
}
