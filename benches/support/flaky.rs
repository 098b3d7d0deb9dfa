//! The failure-path attempt shared by the bench binaries.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};

use nika_retry_tests::ProviderError;

/// What every benched operation returns.
pub type Res = Result<u32, ProviderError>;

/// Attempts made by `flaky`, over all calls.
static FLAKY: AtomicU32 = AtomicU32::new(0);

/// The attempt of the failure path: of every three attempts, the first two
/// fail with a 503 (transient; its empty message does not allocate).
pub async fn flaky(n: u32) -> Res {
    if FLAKY.fetch_add(1, Ordering::Relaxed) % 3 < 2 {
        Err(ProviderError::Api {
            status: 503,
            message: String::new(),
            retry_after: None,
        })
    } else {
        Ok(black_box(n))
    }
}
