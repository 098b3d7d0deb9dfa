//! What a call gets back when it will not wait at a held upstream.

use core::fmt;
use core::time::Duration;
use std::borrow::Cow;

use crate::{Classify, ErrorCategory};

/// Why an upstream is held.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HoldReason {
    /// A failed attempt's `Retry-After` (or `retry-after-ms`), or the backoff
    /// of a 429 that carried none.
    ServerHint,
    /// A response's rate-limit headers: a limit spent, or the allowance used up.
    RateLimitHeaders,
    /// The breaker opened after consecutive transient failures.
    Breaker,
    /// [`Upstream::hold_for`](super::Upstream::hold_for).
    ByHand,
}

impl HoldReason {
    /// The words in log lines: `server hint`, `rate-limit headers`, `breaker`, `by hand`.
    ///
    /// ```
    /// assert_eq!(nika_retry::upstream::HoldReason::Breaker.as_str(), "breaker");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            HoldReason::ServerHint => "server hint",
            HoldReason::RateLimitHeaders => "rate-limit headers",
            HoldReason::Breaker => "breaker",
            HoldReason::ByHand => "by hand",
        }
    }
}

impl fmt::Display for HoldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A call that would not wait at a held upstream: the hold outlasts the
/// call's `total` deadline or is longer than its `max_retry_after`.
///
/// Classifies `RateLimited` with `retry_after` what was left of the hold,
/// so that an outer layer with a larger cap can wait it out.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{Held, HoldReason};
/// use nika_retry::{Classify, ErrorCategory};
///
/// let held = Held::new("openai/gpt-4o", Duration::from_secs(90), HoldReason::ServerHint);
/// assert_eq!(held.to_string(), "upstream openai/gpt-4o held for 1m 30s more (server hint)");
/// assert_eq!(held.category(), ErrorCategory::RateLimited);
/// assert_eq!(held.retry_after(), Some(Duration::from_secs(90)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    upstream: Cow<'static, str>,
    left: Duration,
    reason: HoldReason,
}

impl Held {
    /// A `Held` as a call gets it (for tests of an error type's `From<Held>`).
    pub fn new(upstream: impl Into<Cow<'static, str>>, left: Duration, reason: HoldReason) -> Self {
        Held {
            upstream: upstream.into(),
            left,
            reason,
        }
    }

    /// The upstream's name.
    ///
    /// ```
    /// # use nika_retry::upstream::{Held, HoldReason};
    /// let held = Held::new("tools", std::time::Duration::ZERO, HoldReason::ByHand);
    /// assert_eq!(held.upstream(), "tools");
    /// ```
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// How long the hold still had to run when the call gave up.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use nika_retry::upstream::{Held, HoldReason};
    /// let held = Held::new("tools", Duration::from_secs(3), HoldReason::ByHand);
    /// assert_eq!(held.left(), Duration::from_secs(3));
    /// ```
    pub fn left(&self) -> Duration {
        self.left
    }

    /// Why the upstream is held.
    ///
    /// ```
    /// # use nika_retry::upstream::{Held, HoldReason};
    /// let held = Held::new("tools", std::time::Duration::ZERO, HoldReason::Breaker);
    /// assert_eq!(held.reason(), HoldReason::Breaker);
    /// ```
    pub fn reason(&self) -> HoldReason {
        self.reason
    }
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let left = Duration::from_millis(self.left.as_millis().try_into().unwrap_or(u64::MAX));
        write!(
            f,
            "upstream {} held for {} more ({})",
            self.upstream,
            humantime::format_duration(left),
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
