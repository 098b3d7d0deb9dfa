//! [`Held`]: the error of a call that would not wait out its upstream's hold.

use core::fmt;
use core::time::Duration;
use std::borrow::Cow;

use crate::events::upstream::HoldReason;
use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;

/// A call that did not wait for its upstream: the hold would outlast the
/// call's `total` deadline, or is longer than the longest server hint the
/// call sleeps on (`max_retry_after`). Nothing was sent.
///
/// It classifies [`RateLimited`](ErrorCategory::RateLimited), with
/// [`retry_after`](Classify::retry_after) what is left of the hold, so that
/// an outer layer with a larger cap can wait it out.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{Held, HoldReason, Upstream};
/// use nika_retry::{retry, Classify, ErrorCategory};
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// enum Error {
///     #[error(transparent)]
///     #[category(transparent)]
///     Held(#[from] Held),
/// }
///
/// #[retry(layer = "provider", upstream = upstream)]
/// async fn complete(upstream: &Upstream) -> Result<(), Error> {
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let upstream = Upstream::new("openai/gpt-4o");
/// upstream.hold_for(Duration::from_secs(3600)); // longer than provider's 60 s cap
/// let Err(Error::Held(held)) = complete(&upstream).await else { panic!("not waited") };
/// assert_eq!((held.upstream(), held.reason()), ("openai/gpt-4o", HoldReason::ByHand));
/// assert_eq!(held.left(), Duration::from_secs(3600));
/// assert_eq!(held.category(), ErrorCategory::RateLimited);
/// assert_eq!(
///     held.to_string(),
///     "upstream `openai/gpt-4o` is held for 1h more (a hold set by hand)"
/// );
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    upstream: Cow<'static, str>,
    left: Duration,
    reason: HoldReason,
}

impl Held {
    pub(super) fn new(upstream: Cow<'static, str>, left: Duration, reason: HoldReason) -> Held {
        Held {
            upstream,
            left,
            reason,
        }
    }

    /// The upstream's name.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// How long the hold still had to run when the call gave up on it.
    pub fn left(&self) -> Duration {
        self.left
    }

    /// Why the upstream is held.
    pub fn reason(&self) -> HoldReason {
        self.reason
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "upstream `{}` is held for {} more ({})",
            self.upstream,
            humantime::format_duration(round_to_ms(self.left)),
            self.reason
        )
    }
}

impl std::error::Error for Held {}

impl Classify for Held {
    fn category(&self) -> ErrorCategory {
        ErrorCategory::RateLimited
    }

    fn retry_after(&self) -> Option<Duration> {
        Some(self.left)
    }
}

/// A duration to the millisecond, for people to read.
fn round_to_ms(d: Duration) -> Duration {
    Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
