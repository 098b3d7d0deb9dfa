//! #[derive(Classify)] on structs, tuple structs and unit structs.
use std::time::Duration;

use nika_retry::{Classify, ErrorCategory};

#[derive(Debug, thiserror::Error, Classify)]
#[error("flaky")]
#[category(transient)]
struct Flaky;

#[derive(Debug, thiserror::Error, Classify)]
#[error("api error {status}")]
#[category(http_status = status, retry_after = retry_after)]
struct Api {
    status: u16,
    retry_after: Option<Duration>,
}

#[derive(Debug, thiserror::Error, Classify)]
#[error("throttled")]
#[category(rate_limited, retry_after_ms = 0)]
struct Throttled(u64);

#[derive(Debug, thiserror::Error, Classify)]
#[error(transparent)]
#[category(transparent)]
struct Wrapped(#[from] std::io::Error);

fn main() {
    assert_eq!(Flaky.category(), ErrorCategory::Transient);
    let api = Api { status: 503, retry_after: Some(Duration::from_secs(2)) };
    assert_eq!(api.category(), ErrorCategory::Transient);
    assert_eq!(api.retry_after(), Some(Duration::from_secs(2)));
    assert_eq!(Throttled(1500).retry_after(), Some(Duration::from_millis(1500)));
    let io = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
    assert_eq!(io.category(), ErrorCategory::Transient);
}
