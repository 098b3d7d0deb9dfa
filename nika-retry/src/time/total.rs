//! [`Total`]: the `total` deadline of a call, and its limit.

use core::time::Duration;

use tokio::time::Instant;

use super::Span;

/// A `total` limit in force: its absolute deadline, and the limit for the
/// error, in 24 bytes where an `(Instant, Duration)` takes 32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Total {
    /// When it expires.
    pub(crate) at: Instant,
    limit: Span,
}

impl Total {
    /// A `total` limit set now. Inlined: with no `total` it is nothing at all.
    #[inline(always)]
    pub(crate) fn from_now(total: Option<Duration>) -> Option<Total> {
        total.map(|limit| Total::new(super::from_now(limit), limit))
    }

    /// A limit of `limit` that expires `at`.
    pub(crate) fn new(at: Instant, limit: Duration) -> Total {
        let limit = Span::new(limit);
        Total { at, limit }
    }

    /// The limit, as written.
    pub(crate) fn limit(self) -> Duration {
        self.limit.get()
    }
}
