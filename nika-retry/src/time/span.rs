//! [`Nanos`]: an optional span of time in 8 bytes, where an
//! `Option<Duration>` takes 16, and [`Span`], one that is always there. The limits and moments held in a call's
//! future are stored this way, because every layer's future is embedded in
//! the one above it, for every call in flight.

use core::num::NonZeroU64;
use core::time::Duration;

use tokio::time::Instant;

use super::later;

/// An optional span of time: its nanoseconds plus one, 0 for none. It
/// saturates some 584 years in. That is far past the 30 years at which
/// [`later`] caps a deadline, so no limit or moment changes meaning here.
/// Spans order as their lengths, after none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Nanos(u64);

impl Nanos {
    /// No span.
    pub(crate) const NONE: Nanos = Nanos(0);

    /// A span of no time: a moment that is the start itself.
    pub(crate) const ZERO: Nanos = Nanos(1);

    /// `span`, saturating. Computed from seconds and nanoseconds rather than
    /// through `Duration::as_nanos`, whose `u128` is a software routine.
    #[inline]
    pub(crate) const fn new(span: Option<Duration>) -> Nanos {
        let Some(span) = span else {
            return Nanos::NONE;
        };
        let nanos = match span.as_secs().checked_mul(1_000_000_000) {
            Some(whole) => whole.saturating_add(span.subsec_nanos() as u64),
            None => u64::MAX,
        };
        Nanos(nanos.saturating_add(1))
    }

    /// The span from `start` to `at`; a moment before `start` counts as it.
    #[inline]
    pub(crate) fn between(start: Instant, at: Instant) -> Nanos {
        Nanos::new(Some(at.saturating_duration_since(start)))
    }

    /// The span, if there is one.
    #[inline]
    pub(crate) const fn get(self) -> Option<Duration> {
        match self.0.checked_sub(1) {
            Some(nanos) => Some(Duration::from_nanos(nanos)),
            None => None,
        }
    }

    /// Whether there is a span.
    #[inline]
    pub(crate) const fn is_some(self) -> bool {
        self.0 != 0
    }

    /// Whether there is none.
    #[inline]
    pub(crate) const fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The two spans end to end, if both are spans (saturating).
    #[inline]
    pub(crate) const fn plus(self, other: Nanos) -> Nanos {
        if self.is_none() || other.is_none() {
            return Nanos::NONE;
        }
        // Each holds its nanoseconds plus one.
        Nanos(self.0.saturating_add(other.0 - 1))
    }

    /// The moment this span after `start`, if there is a span (saturating as
    /// [`later`] does).
    #[inline]
    pub(crate) fn after(self, start: Instant) -> Option<Instant> {
        self.get().map(|span| later(start, span))
    }
}

/// A span of time that is always there, in 8 bytes: its nanoseconds plus
/// one, never 0 (so `Option<Span>` is 8 bytes too). For a limit that exists
/// whenever its holder does, where [`Nanos`] would make "none" writable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Span(NonZeroU64);

impl Span {
    /// `span`, saturating as [`Nanos::new`] does.
    #[inline]
    pub(crate) const fn new(span: Duration) -> Span {
        match NonZeroU64::new(Nanos::new(Some(span)).0) {
            Some(nanos) => Span(nanos),
            None => Span(NonZeroU64::MAX),
        }
    }

    /// The span.
    #[inline]
    pub(crate) const fn get(self) -> Duration {
        Duration::from_nanos(self.0.get() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_comes_back_to_the_nanosecond() {
        assert_eq!(Nanos::NONE.get(), None);
        assert_eq!(Nanos::new(None), Nanos::NONE);
        for ns in [0, 1, 999_999_999, 1_000_000_000, 86_400_000_000_123] {
            let span = Duration::from_nanos(ns);
            assert_eq!(Nanos::new(Some(span)).get(), Some(span), "{ns} ns");
        }
        // A zero span is a span, not none: a zero limit expires at once.
        assert_eq!(Nanos::new(Some(Duration::ZERO)), Nanos::ZERO);
        assert!(Nanos::ZERO.is_some());
    }

    #[test]
    fn a_span_too_long_saturates_rather_than_wrapping() {
        let most = Nanos::new(Some(Duration::from_nanos(u64::MAX - 1))).get();
        for huge in [
            Duration::MAX,
            Duration::from_secs(u64::MAX / 1_000_000_000 + 1),
        ] {
            assert_eq!(Nanos::new(Some(huge)).get(), most, "{huge:?}");
        }
    }

    #[test]
    fn spans_add_and_order_as_their_lengths() {
        let span = |ns| Nanos::new(Some(Duration::from_nanos(ns)));
        // Against the stored encoding itself (nanoseconds plus one, 0 for
        // none), not against `new`, the function under test.
        assert_eq!(span(0).plus(span(0)), Nanos(1));
        assert_eq!(span(3).plus(span(4)), Nanos(8));
        assert_eq!(span(3).plus(Nanos::NONE), Nanos(0));
        assert_eq!(Nanos::NONE.plus(span(3)), Nanos(0));
        assert_eq!(span(u64::MAX - 1).plus(span(5)), Nanos(u64::MAX));
        assert_eq!(span(3).plus(span(4)).get(), Some(Duration::from_nanos(7)));
        assert!(Nanos(0) < span(0) && span(0) < span(1) && span(1) < span(1_000_000_000));
    }

    #[test]
    fn a_moment_after_the_start_comes_back_to_the_nanosecond() {
        let start = Instant::now();
        for ns in [0, 1, 999_999_999, 86_400_000_000_123] {
            let at = start + Duration::from_nanos(ns);
            assert_eq!(Nanos::between(start, at).after(start), Some(at), "{ns} ns");
        }
        // A moment before the start counts as the start.
        let early = Nanos::between(start + Duration::from_secs(1), start);
        assert_eq!(early.after(start), Some(start));
        assert_eq!(Nanos::NONE.after(start), None);
    }

    #[test]
    fn a_span_that_is_always_there_is_eight_bytes_and_exact() {
        assert_eq!(core::mem::size_of::<Option<Span>>(), 8);
        for ns in [0, 1, 999_999_999, 86_400_000_000_123, u64::MAX - 1] {
            let span = Duration::from_nanos(ns);
            assert_eq!(Span::new(span).get(), span, "{ns} ns");
        }
        let most = Duration::from_nanos(u64::MAX - 1);
        assert_eq!(Span::new(Duration::MAX).get(), most, "saturates");
        assert!(Span::new(Duration::ZERO) < Span::new(Duration::from_nanos(1)));
    }
}
