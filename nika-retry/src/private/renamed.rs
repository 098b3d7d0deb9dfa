//! `crate = "path"` on all three macros: inside this crate, `::nika_retry`
//! does not resolve, so these compile only if the expansions use the path
//! given, as they must for a user who renames the dependency
//! (`nr = { package = "nika-retry", … }` and `crate = "nr"`).

use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::timeout_error::TimeoutError;
use core::sync::atomic::{AtomicU32, Ordering};
use nika_retry_macros::{Classify, retry, timeout};

#[derive(Debug, PartialEq, Classify)]
#[category(crate = "crate")]
enum Error {
    #[category(http_status = 0)]
    Status(Option<u16>),
    #[category(transparent)]
    Timeout(TimeoutError),
}

impl From<TimeoutError> for Error {
    fn from(error: TimeoutError) -> Self {
        Error::Timeout(error)
    }
}

#[derive(Debug, Classify)]
#[category(transient, crate = "crate")]
struct Flaky;

struct Client {
    attempts: AtomicU32,
}

impl Client {
    #[retry(layer = "provider", backoff = "1ms", crate = "crate")]
    #[timeout(attempt = "1s")]
    async fn call(&self) -> Result<u32, Error> {
        let n = self.attempts.fetch_add(1, Ordering::SeqCst) + 1;
        if n < 3 {
            return Err(Error::Status(None));
        }
        Ok(n)
    }
}

#[timeout(total = "5s", crate = "crate")]
#[retry(layer = "http", backoff = "1ms")]
async fn flaky() -> Result<(), Flaky> {
    Err(Flaky)
}

impl From<TimeoutError> for Flaky {
    fn from(_: TimeoutError) -> Self {
        Flaky
    }
}

#[tokio::test(start_paused = true)]
async fn the_macros_use_the_crate_path_given() {
    let client = Client {
        attempts: AtomicU32::new(0),
    };
    assert_eq!(client.call().await, Ok(3));
    assert!(flaky().await.is_err());
    assert_eq!(Flaky.category(), ErrorCategory::Transient);
}

#[test]
fn a_missing_status_is_transient_and_a_present_one_is_read() {
    assert_eq!(Error::Status(None).category(), ErrorCategory::Transient);
    assert_eq!(Error::Status(Some(404)).category(), ErrorCategory::NotFound);
}
