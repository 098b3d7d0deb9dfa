//! Time as the limits use it: spans in 8 bytes ([`Nanos`], [`Span`]),
//! instants that saturate rather than panic ([`later`], [`from_now`]), a
//! call's `total` deadline ([`Total`]), and a future under its limits
//! ([`TimeLimited`]). Nothing here knows about calls or what is in force.

use core::time::Duration;

use tokio::time::Instant;

mod limited;
mod span;
mod total;

pub(crate) use limited::{Progress, TimeLimited};
pub(crate) use span::{Nanos, Span};
pub(crate) use total::Total;

/// `limit` from now, saturating: a limit too long for the clock (say
/// `Duration::MAX` from a config) means about thirty years, not a panic.
pub(crate) fn from_now(limit: Duration) -> Instant {
    later(Instant::now(), limit)
}

/// `at + limit`, saturating as [`from_now`] does.
pub(crate) fn later(at: Instant, limit: Duration) -> Instant {
    at.checked_add(limit)
        .unwrap_or_else(|| at + Duration::from_secs(30 * 365 * 86_400))
}
