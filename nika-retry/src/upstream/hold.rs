//! The hold gate: what an upstream's calls share, decided under its lock
//! (the hold, the allowance, whose turn the probe is, the breaker's count),
//! and [`Held`], the error of a call that would not wait it out. No clock
//! read and no wait here: the caller passes `now` and does the waiting.

use core::fmt;
use core::time::Duration;
use std::borrow::Cow;

use tokio::time::Instant;

use crate::events::upstream::HoldReason;
use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;

/// The longest hold anything can set: a value past it (a header from a
/// broken server, a garbage key in a shared store) is cut to it, so that
/// nothing holds an upstream for ever.
pub const MAX_HOLD: Duration = Duration::from_secs(24 * 60 * 60);

/// The longest spread of a release.
const MAX_SPREAD: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub(super) struct Hold {
    /// The end of the hold, once set: kept after it passes until a probe's
    /// outcome releases it.
    pub(super) until: Option<Instant>,
    pub(super) reason: Option<HoldReason>,
    /// How long the hold was when last set: a tenth of it spreads the release.
    length: Duration,
    /// At most `.0` more attempts start before `.1`.
    allowance: Option<(u32, Instant)>,
    /// A caller has the probe's turn: it waits for the hold's end, then its
    /// attempt goes first.
    pub(super) probe: bool,
    /// The spread of the last release, for the waiters it woke.
    pub(super) spread: Duration,
    /// `(failures, open_for)` of the breaker, if it is on.
    pub(super) breaker: Option<(u32, Duration)>,
    /// Consecutive transient failures, for the breaker.
    pub(super) failures: u32,
    /// The breaker opened and no attempt has succeeded since (half-open
    /// once its hold ends): a failed probe opens it again at once.
    pub(super) half_open: bool,
}

/// A hold that started or grew, for its event.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(super) struct Grown {
    pub(super) held_for: Duration,
    pub(super) reason: HoldReason,
    /// It extended a hold in force (an event at `DEBUG`, not `WARN`).
    pub(super) extended: bool,
}

impl Hold {
    pub(super) fn with_breaker(breaker: Option<(u32, Duration)>) -> Hold {
        Hold {
            breaker,
            ..Hold::default()
        }
    }

    /// Holds until `now + d` unless a hold in force ends later.
    pub(super) fn hold(&mut self, now: Instant, d: Duration, reason: HoldReason) -> Option<Grown> {
        let d = d.min(MAX_HOLD);
        if d.is_zero() {
            return None;
        }
        let until = now + d;
        let in_force = self.until.filter(|&u| u > now);
        if in_force.is_some_and(|u| u >= until) {
            return None;
        }
        self.until = Some(until);
        self.reason = Some(reason);
        self.length = d;
        Some(Grown {
            held_for: d,
            reason,
            extended: in_force.is_some(),
        })
    }

    /// What is left of the hold at `now`.
    pub(super) fn left(&self, now: Instant) -> Option<Duration> {
        self.until
            .map(|u| u.saturating_duration_since(now))
            .filter(|d| !d.is_zero())
    }

    /// A response said `remaining` more requests are allowed until `reset`
    /// from now: replaces the count; none left is a hold until the reset.
    pub(super) fn allow(&mut self, now: Instant, remaining: u32, reset: Duration) -> Option<Grown> {
        let reset = reset.min(MAX_HOLD);
        if remaining == 0 {
            self.allowance = None;
            return self.hold(now, reset, HoldReason::RateLimitHeaders);
        }
        self.allowance = Some((remaining, now + reset));
        None
    }

    /// The next caller's step at `now`: go (`None`), or wait until the
    /// hold's end (perhaps past), then go first if it took the probe's turn
    /// (`true`) or else wait for the probe's outcome.
    pub(super) fn step(&mut self, now: Instant) -> (Option<(Instant, bool)>, Option<Grown>) {
        if let Some(until) = self.until {
            let probe = !self.probe;
            self.probe = true;
            return (Some((until, probe)), None);
        }
        match self.allowance {
            Some((_, reset)) if reset <= now => self.allowance = None,
            Some((1, reset)) => {
                // This attempt takes the last one: the next waits for the reset.
                self.allowance = None;
                let grown = self.hold(now, reset - now, HoldReason::RateLimitHeaders);
                return (None, grown);
            }
            Some((left, reset)) => self.allowance = Some((left - 1, reset)),
            None => {}
        }
        (None, None)
    }

    /// The probe's attempt ended at `now`; unless its outcome held the
    /// upstream again, releases it. Returns whether it did.
    pub(super) fn probed(&mut self, now: Instant) -> bool {
        self.probe = false;
        if self.until.is_some_and(|u| u > now) {
            return false;
        }
        self.until = None;
        self.reason = None;
        self.spread = (self.length / 10).min(MAX_SPREAD);
        true
    }

    /// Whether a caller must look here before it starts an attempt.
    pub(super) fn guarded(&self) -> bool {
        self.until.is_some() || self.allowance.is_some() || self.probe
    }

    /// A transient failure, for the breaker: `Some(open_for)` when it opens.
    /// A probe's failure while it is half-open (opened, no success since)
    /// opens it again at once: the one attempt let through is the test.
    pub(super) fn failed_transiently(&mut self, probe: bool) -> Option<Duration> {
        let (failures, open_for) = self.breaker?;
        self.failures += 1;
        if self.failures < failures && !(probe && self.half_open) {
            return None;
        }
        self.failures = 0;
        self.half_open = true;
        Some(open_for)
    }

    /// An attempt succeeded: the breaker counts afresh, and closes.
    pub(super) fn succeeded(&mut self) {
        self.failures = 0;
        self.half_open = false;
    }

    /// Whether a success must be told (`succeeded` changes something).
    pub(super) fn counting(&self) -> bool {
        self.failures > 0 || self.half_open
    }
}

/// How long a call may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Patience {
    /// The longest server hint the call sleeps on (`max_retry_after`).
    pub(crate) cap: Duration,
    /// The call's `total` deadline.
    pub(crate) deadline: Option<Instant>,
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_hold_only_ever_extends() {
        let now = Instant::now();
        let mut state = Hold::default();
        let first = state.hold(now, secs(20), HoldReason::ServerHint);
        assert_eq!(
            first.map(|g| (g.held_for, g.extended)),
            Some((secs(20), false))
        );
        assert_eq!(
            state.hold(now + secs(1), secs(5), HoldReason::ByHand),
            None,
            "shorter"
        );
        assert_eq!(state.until, Some(now + secs(20)));
        assert_eq!(state.reason, Some(HoldReason::ServerHint));
        let grown = state.hold(now + secs(1), secs(30), HoldReason::Breaker);
        assert_eq!(grown.map(|g| g.extended), Some(true));
        assert_eq!(state.until, Some(now + secs(31)));
        assert_eq!(state.left(now + secs(30)), Some(secs(1)));
    }

    #[test]
    fn garbage_lengths_hold_at_most_a_day_and_zero_not_at_all() {
        let now = Instant::now();
        let mut state = Hold::default();
        assert_eq!(state.hold(now, Duration::ZERO, HoldReason::ByHand), None);
        assert_eq!(state.until, None);
        state.hold(now, Duration::MAX, HoldReason::ByHand);
        assert_eq!(state.left(now), Some(MAX_HOLD));
    }

    #[test]
    fn one_probe_then_the_rest_after_its_outcome() {
        let now = Instant::now();
        let mut state = Hold::default();
        state.hold(now, secs(10), HoldReason::ServerHint);
        let until = now + secs(10);
        assert_eq!(state.step(now).0, Some((until, true)));
        assert_eq!(state.step(now).0, Some((until, false)));
        assert_eq!(
            state.step(now + secs(11)).0,
            Some((until, false)),
            "still the probe's"
        );
        assert!(state.probed(now + secs(11)), "released");
        assert_eq!(state.spread, secs(1), "a tenth of 10 s, at most 1 s");
        assert!(!state.guarded());
        assert_eq!(state.step(now + secs(11)).0, None);
    }

    #[test]
    fn the_release_spreads_over_a_tenth_of_the_hold_and_at_most_a_second() {
        for (hold, spread) in [(5, 500), (10, 1_000), (30, 1_000), (3_600, 1_000)] {
            let now = Instant::now();
            let mut state = Hold::default();
            state.hold(now, secs(hold), HoldReason::ServerHint);
            state.step(now);
            assert!(state.probed(now + secs(hold)));
            assert_eq!(state.spread, Duration::from_millis(spread), "{hold} s");
        }
    }

    #[test]
    fn a_probe_pushed_back_again_keeps_the_hold() {
        let now = Instant::now();
        let mut state = Hold::default();
        state.hold(now, secs(2), HoldReason::ServerHint);
        state.step(now);
        state.hold(now + secs(2), secs(3), HoldReason::ServerHint);
        assert!(!state.probed(now + secs(2)));
        assert!(!state.probe, "the next caller takes the turn");
        assert_eq!(state.spread, Duration::ZERO);
        assert_eq!(state.step(now + secs(2)).0, Some((now + secs(5), true)));
    }

    #[test]
    fn an_allowance_lets_that_many_start_before_its_reset() {
        let now = Instant::now();
        let mut state = Hold::default();
        assert_eq!(state.allow(now, 2, secs(6)), None);
        assert_eq!(state.step(now), (None, None));
        let (step, grown) = state.step(now);
        assert_eq!(step, None, "the second of two");
        assert_eq!(grown.map(|g| g.reason), Some(HoldReason::RateLimitHeaders));
        assert_eq!(
            state.step(now).0,
            Some((now + secs(6), true)),
            "the third waits"
        );
    }

    #[test]
    fn an_allowance_past_its_reset_is_forgotten_and_a_later_one_replaces_it() {
        let now = Instant::now();
        let mut state = Hold::default();
        state.allow(now, 1, secs(1));
        state.allow(now, 5, secs(1));
        assert_eq!(state.step(now), (None, None), "5 replaced 1");
        assert_eq!(state.step(now + secs(2)), (None, None));
        assert!(!state.guarded(), "past its reset: nothing to check");
        let grown = state.allow(now, 0, secs(3));
        assert_eq!(grown.map(|g| g.held_for), Some(secs(3)), "none left holds");
    }

    #[test]
    fn the_breaker_opens_after_that_many_transient_failures_in_a_row() {
        let mut state = Hold::default();
        assert_eq!(state.failed_transiently(true), None, "off by default");
        state.breaker = Some((3, secs(30)));
        assert_eq!(state.failed_transiently(false), None);
        assert_eq!(state.failed_transiently(false), None);
        state.succeeded();
        assert_eq!(state.failed_transiently(false), None);
        assert_eq!(state.failed_transiently(false), None);
        assert_eq!(state.failed_transiently(false), Some(secs(30)));
        assert_eq!(state.failures, 0, "and counts afresh");
    }

    #[test]
    fn half_open_a_failed_probe_opens_the_breaker_again_and_a_success_closes_it() {
        let mut state = Hold::with_breaker(Some((3, secs(30))));
        for _ in 0..2 {
            assert_eq!(state.failed_transiently(false), None);
        }
        assert_eq!(state.failed_transiently(false), Some(secs(30)), "opened");
        assert!(state.counting(), "a success must close it");
        assert_eq!(
            state.failed_transiently(false),
            None,
            "a straggler that was in flight when it opened counts as one"
        );
        assert_eq!(
            state.failed_transiently(true),
            Some(secs(30)),
            "the probe's failure opens it again at once"
        );
        state.succeeded();
        assert!(!state.counting());
        assert_eq!(state.failed_transiently(true), None, "closed: counts again");
    }
}
