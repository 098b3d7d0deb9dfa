//! The adapt gate: how an upstream that hears nothing of its limits
//! paces itself. After a scout that heard nothing, the cold start's ramp;
//! after a 429 that came without rate-limit headers, the adaptive rate,
//! which it sets as the requests' rate of the pacer ([`as_bucket`]).
//!
//! The adaptive rate: the rate an upstream adapts to 429s that come without rate-limit
//! headers, as the AWS SDKs' adaptive retry mode does: off until the first;
//! then β = 0.7 of the send rate measured when it came (smoothed over
//! half-second buckets), growing back along a cubic with C = 0.4 through
//! that rate and beyond, until the next one.
//!
//! The ramp: the cold start's, for an upstream whose scout came back without a
//! word of its limits: the others do not all leave at once, but in rounds
//! that double, as TCP's slow start does: 2 attempts out at first, one
//! more for each that succeeds. It ends at the first thing that says more
//! (a response's rate-limit headers, a 429, which turns the adaptive rate
//! on) or once [`LAST`] attempts may be out together.
//!
//! A round waits for its successes at most the cold start's max (as the
//! others waited for the scout): an LLM call may take half a minute, and
//! a server that sends no headers and counts no limit (a self-hosted
//! model) would otherwise take five such rounds to have 50 calls out. A
//! waiter that finds the round's time over doubles the window itself.
//!
//! Without it, a fan-out on a server that sends no rate-limit headers sent
//! all its calls the moment the scout came back, and met a 429 for each
//! one beyond the limit (37 of 50 on the fan-out benchmark) before the
//! adaptive rate could hear of the first.

use core::time::Duration;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::{Semaphore, TryAcquireError};
use tokio::time::Instant;

/// The share of the measured rate kept after a 429.
const BETA: f64 = 0.7;
/// How fast the rate grows back.
const C: f64 = 0.4;
/// The weight of the newest half-second bucket in the measured rate.
const SMOOTH: f64 = 0.8;
/// The slowest rate: one attempt every two seconds.
const MIN_RATE: f64 = 0.5;
/// The half-second buckets of the measured send rate.
const BUCKET: f64 = 0.5;

#[derive(Debug)]
pub(super) struct Adaptive {
    /// Bumped at each decrease (0: off; never 0 again once on): the
    /// attempts admitted since carry it.
    generation: AtomicU8,
    /// Attempts sent through the upstream, counted while they pass.
    sends: AtomicU64,
    state: Mutex<Rates>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Rates {
    /// The start of the current half-second bucket, and the sends counted
    /// before it.
    bucket: Option<(Instant, u64)>,
    /// The send rate, smoothed (per second).
    pub(super) measured: f64,
    /// The rate before the last 429 (its `β` share is where it restarts).
    last_max: f64,
    /// When the last 429 came.
    throttled: Option<Instant>,
    /// The rate in force (per second).
    pub(super) rate: f64,
}

impl Rates {
    /// Counts the sends up to `sends` at `now` into the measured rate.
    fn measure(&mut self, now: Instant, sends: u64) {
        let Some((start, before)) = self.bucket else {
            self.bucket = Some((now, sends));
            return;
        };
        let elapsed = now.saturating_duration_since(start).as_secs_f64();
        if elapsed < BUCKET {
            return;
        }
        let rate = (sends.saturating_sub(before)) as f64 / elapsed;
        self.measured = if self.measured == 0.0 {
            rate
        } else {
            rate * SMOOTH + self.measured * (1.0 - SMOOTH)
        };
        self.bucket = Some((now, sends));
    }

    /// A 429 without headers at `now`: the rate drops to β of what was sent.
    fn throttled(&mut self, now: Instant, sends: u64) {
        if self.measured == 0.0
            && let Some((start, before)) = self.bucket
        {
            // No half-second measured yet (a burst's first 429): what was
            // sent since the count began, over at least 100 ms.
            let elapsed = now.saturating_duration_since(start).as_secs_f64().max(0.1);
            self.measured = sends.saturating_sub(before) as f64 / elapsed;
        }
        let sent = if self.throttled.is_some() {
            self.measured.min(self.rate.max(MIN_RATE))
        } else {
            self.measured
        };
        self.last_max = sent.max(MIN_RATE);
        self.throttled = Some(now);
        self.rate = (self.last_max * BETA).max(MIN_RATE);
    }

    /// A success at `now`: the rate follows the cubic, at most twice what
    /// is sent.
    fn succeeded(&mut self, now: Instant) {
        let Some(at) = self.throttled else { return };
        let t = now.saturating_duration_since(at).as_secs_f64();
        // The cubic is at β · last_max at t = 0 and crosses last_max at k.
        let k = (self.last_max * (1.0 - BETA) / C).cbrt();
        let cubic = C * (t - k).powi(3) + self.last_max;
        let ceiling = if self.measured > 0.0 {
            2.0 * self.measured
        } else {
            f64::MAX
        };
        let rate = cubic.min(ceiling).max(MIN_RATE);
        if rate.is_finite() {
            self.rate = rate;
        }
    }
}

impl Adaptive {
    /// An adaptive rate, off, counting sends from `now`.
    pub(super) fn new(now: Instant) -> Adaptive {
        Adaptive {
            generation: AtomicU8::new(0),
            sends: AtomicU64::new(0),
            state: Mutex::new(Rates {
                bucket: Some((now, 0)),
                ..Rates::default()
            }),
        }
    }

    pub(super) fn on(&self) -> bool {
        self.generation() != 0
    }

    /// An attempt was sent.
    #[inline(always)]
    pub(super) fn sent(&self) {
        self.sends.fetch_add(1, Ordering::Relaxed);
    }

    /// The generation of the rate in force (0: off).
    #[inline(always)]
    pub(super) fn generation(&self) -> u8 {
        self.generation.load(Ordering::Relaxed)
    }

    /// A 429 without rate-limit headers, of an attempt admitted at the
    /// rate of `generation`: turns the rate on, or lowers it, once per
    /// congestion: the 429s of attempts admitted before the last decrease
    /// were sent at the rate it already lowered (a burst's 49 would
    /// otherwise take it down 49 times, to one attempt every 2 s). Returns
    /// the rate in force, per second, if it changed.
    pub(super) fn throttled(&self, now: Instant, generation: u8) -> Option<f64> {
        let mut rates = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.generation();
        if current != 0 && generation != current {
            return None;
        }
        let sends = self.sends.load(Ordering::Relaxed);
        rates.measure(now, sends);
        rates.throttled(now, sends);
        self.generation
            .store(current.checked_add(1).unwrap_or(1), Ordering::Relaxed);
        Some(rates.rate)
    }

    /// A success while the rate is on: the rate in force after it.
    pub(super) fn succeeded(&self, now: Instant) -> Option<f64> {
        if !self.on() {
            return None;
        }
        let mut rates = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        rates.measure(now, self.sends.load(Ordering::Relaxed));
        rates.succeeded(now);
        Some(rates.rate)
    }

    /// Counts the sends so far into the measure (also before the first 429,
    /// so that it knows the rate it came at).
    pub(super) fn measure(&self, now: Instant) {
        let mut rates = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        rates.measure(now, self.sends.load(Ordering::Relaxed));
    }
}

/// A rate per second as a bucket's `(limit, window)`: a capacity of the
/// rate's whole part (at least one), refilled at the rate.
pub(super) fn as_bucket(rate: f64) -> (u64, Duration) {
    let rate = if rate.is_finite() {
        rate.max(MIN_RATE)
    } else {
        MIN_RATE
    };
    let limit = rate.floor().max(1.0);
    let window = Duration::try_from_secs_f64(limit / rate).unwrap_or(Duration::from_secs(2));
    (limit.min(u64::MAX as f64) as u64, window)
}

/// The attempts out at once when the ramp starts: the scout's, and one.
const FIRST: u32 = 2;
/// The ramp ends when this many may be out together.
const LAST: u32 = 64;

/// The ramp of one upstream; it runs at most once (from its scout's end).
#[derive(Debug)]
pub(super) struct Ramp {
    on: AtomicBool,
    /// How many may be out together.
    window: AtomicU32,
    /// One permit for each attempt that may start; waiters in arrival
    /// order. Closed when the ramp ends: every waiter goes.
    slots: Semaphore,
    /// How long a round waits for its successes, and when the current
    /// one's wait is over (touched only by waiters).
    round: Mutex<(Duration, Option<Instant>)>,
}

impl Default for Ramp {
    fn default() -> Ramp {
        Ramp {
            on: AtomicBool::new(false),
            window: AtomicU32::new(0),
            slots: Semaphore::new(0),
            round: Mutex::new((Duration::ZERO, None)),
        }
    }
}

impl Ramp {
    /// Whether the attempts wait for a slot.
    #[inline]
    pub(super) fn on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// How many may be out together, while the ramp runs.
    pub(super) fn window(&self) -> Option<u32> {
        self.on().then(|| self.window.load(Ordering::Relaxed))
    }

    /// The scout came back and said nothing of the limits: the ramp
    /// starts, each round waiting for its successes at most `round`
    /// (unless it ran, or ended before it could start).
    pub(super) fn start(&self, round: Duration) {
        if self.slots.is_closed() || self.on.swap(true, Ordering::AcqRel) {
            return;
        }
        *self.round() = (round, Some(crate::time::later(Instant::now(), round)));
        self.window.store(FIRST, Ordering::Relaxed);
        self.slots.add_permits(FIRST as usize);
    }

    fn round(&self) -> std::sync::MutexGuard<'_, (Duration, Option<Instant>)> {
        self.round.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Something said more of the limits than the ramp knows: it ends, and
    /// every waiter goes (to the buckets, or the adaptive rate).
    pub(super) fn stop(&self) {
        self.slots.close();
        self.on.store(false, Ordering::Release);
    }

    /// A free slot, without a wait (no lock, no allocation): `Ok(None)`
    /// if the ramp is over, `Err(Taken)` if every slot is out.
    pub(super) fn try_slot(&self) -> Result<Option<Slot<'_>>, Taken> {
        match self.slots.try_acquire() {
            Ok(permit) => {
                permit.forget();
                Ok(Some(Slot {
                    ramp: self,
                    armed: true,
                }))
            }
            Err(TryAcquireError::Closed) => Ok(None),
            Err(TryAcquireError::NoPermits) => Err(Taken),
        }
    }

    /// Waits for a slot, and says whether it waited: `Some` holds the
    /// slot until its attempt ends, `None` if the ramp ended meanwhile.
    pub(super) async fn slot(&self) -> (Option<Slot<'_>>, bool) {
        if let Ok(slot) = self.try_slot() {
            return (slot, false);
        }
        loop {
            let over = self.round().1;
            let acquired = match over {
                Some(over) => tokio::time::timeout_at(over, self.slots.acquire()).await,
                None => Ok(self.slots.acquire().await),
            };
            match acquired {
                Ok(permit) => {
                    let slot = permit.ok().map(|permit| {
                        permit.forget();
                        Slot {
                            ramp: self,
                            armed: true,
                        }
                    });
                    return (slot, true);
                }
                Err(_) => self.round_over(),
            }
        }
    }

    /// The round's time is over before its successes came: the window
    /// doubles (once, whichever waiter comes first).
    fn round_over(&self) {
        let now = Instant::now();
        {
            let mut round = self.round();
            let (length, over) = *round;
            if over.is_none_or(|over| over > now) {
                return;
            }
            round.1 = Some(crate::time::later(now, length));
        }
        let window = self.window.load(Ordering::Relaxed);
        self.widen(window);
    }

    /// An attempt that held a slot ended: its slot goes to the next
    /// waiter, and a success opens one more.
    pub(super) fn end(&self, succeeded: bool) {
        if self.slots.is_closed() {
            return;
        }
        self.slots.add_permits(1);
        if succeeded {
            self.widen(1);
        }
    }

    /// `more` may be out together: the ramp ends at [`LAST`].
    fn widen(&self, more: u32) {
        if self.slots.is_closed() {
            return;
        }
        let window = self.window.fetch_add(more, Ordering::Relaxed) + more;
        if window >= LAST {
            self.stop();
            return;
        }
        self.slots.add_permits(more as usize);
    }
}

/// Every slot of the ramp is out: the attempt waits for one.
#[derive(Debug)]
pub(super) struct Taken;

/// A slot taken and not yet handed to its attempt's charge: given back if
/// the attempt never starts.
pub(super) struct Slot<'r> {
    ramp: &'r Ramp,
    armed: bool,
}

impl Slot<'_> {
    /// The attempt starts: its charge holds the slot from here.
    pub(super) fn start(mut self) -> bool {
        core::mem::take(&mut self.armed)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.ramp.end(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, s: f64) -> Instant {
        start + Duration::from_secs_f64(s)
    }

    #[test]
    fn a_429_drops_to_beta_of_the_measured_rate() {
        let start = Instant::now();
        let mut r = Rates::default();
        r.measure(start, 0);
        // 20 sends a second for two seconds.
        for i in 1..=4 {
            r.measure(at(start, 0.5 * f64::from(i)), 10 * u64::from(i as u8));
        }
        assert!((r.measured - 20.0).abs() < 1e-9, "{}", r.measured);
        r.throttled(at(start, 2.0), 40);
        assert!((r.rate - 14.0).abs() < 1e-9, "β = 0.7: {}", r.rate);
    }

    #[test]
    fn the_rate_grows_back_along_the_cubic_through_the_old_rate_and_beyond() {
        let start = Instant::now();
        let mut r = Rates {
            measured: 20.0,
            ..Rates::default()
        };
        r.throttled(start, 0);
        let k = (20.0 * 0.3 / 0.4_f64).cbrt();
        r.succeeded(at(start, k / 2.0));
        assert!(r.rate > 14.0 && r.rate < 20.0, "growing: {}", r.rate);
        r.succeeded(at(start, k));
        assert!(
            (r.rate - 20.0).abs() < 1e-6,
            "through the old rate at k: {}",
            r.rate
        );
        r.succeeded(at(start, k + 2.0));
        assert!(
            (r.rate - (20.0 + 0.4 * 8.0)).abs() < 1e-6,
            "beyond: {}",
            r.rate
        );
        r.succeeded(at(start, k + 100.0));
        assert_eq!(r.rate, 40.0, "at most twice the measured rate");
    }

    #[test]
    fn a_429_before_any_measure_goes_to_the_slowest_rate() {
        let mut r = Rates::default();
        r.throttled(Instant::now(), 0);
        assert_eq!(r.rate, MIN_RATE);
    }

    #[test]
    fn a_bursts_first_429_drops_to_beta_of_the_burst() {
        let start = Instant::now();
        let mut r = Rates {
            bucket: Some((start, 0)),
            ..Rates::default()
        };
        // 50 sent in the first 200 ms, before any half-second was measured.
        r.throttled(at(start, 0.2), 50);
        assert!((r.measured - 250.0).abs() < 1e-6, "{}", r.measured);
        assert!((r.rate - 175.0).abs() < 1e-6, "{}", r.rate);
    }

    #[tokio::test(start_paused = true)]
    async fn a_bursts_429s_lower_the_rate_once_and_later_ones_again() {
        let start = Instant::now();
        let a = Adaptive::new(start);
        for _ in 0..50 {
            a.sent();
        }
        let later = at(start, 0.1);
        // The burst's 35 429s, its attempts admitted while the rate was off.
        let first = a.throttled(later, 0).expect("turned on");
        assert!((first - 350.0).abs() < 1e-6, "β of 50 in 100 ms: {first}");
        for _ in 0..34 {
            assert_eq!(a.throttled(later, 0), None, "the same congestion");
        }
        let generation = a.generation();
        assert_eq!(generation, 1);
        // An attempt admitted at the lowered rate meets one: lowered again.
        let second = a.throttled(at(start, 1.0), generation).expect("lowered");
        assert!(second < first, "{second} < {first}");
        assert_eq!(a.throttled(at(start, 1.0), generation), None);
    }

    #[test]
    fn rates_as_buckets() {
        assert_eq!(as_bucket(14.0), (14, Duration::from_secs(1)));
        assert_eq!(as_bucket(0.5), (1, Duration::from_secs(2)));
        assert_eq!(as_bucket(f64::NAN), (1, Duration::from_secs(2)));
        let (limit, window) = as_bucket(2.5);
        assert_eq!(limit, 2);
        assert_eq!(window, Duration::from_millis(800));
        let (limit, _) = as_bucket(f64::MAX);
        assert!(limit > 0);
    }

    #[tokio::test(start_paused = true)]
    async fn rounds_double_as_attempts_succeed_and_a_stop_lets_everyone_go() {
        let ramp = Ramp::default();
        assert!(!ramp.on());
        ramp.start(Duration::from_secs(1));
        assert!(ramp.on());
        let first: Vec<_> = [ramp.slot().await, ramp.slot().await]
            .into_iter()
            .map(|(s, waited)| !waited && s.expect("slot").start())
            .collect();
        assert_eq!(first, [true, true]);
        assert_eq!(ramp.slots.available_permits(), 0, "two out at first");
        for _ in first {
            ramp.end(true);
        }
        assert_eq!(
            ramp.slots.available_permits(),
            4,
            "each success opens one more"
        );
        ramp.end(false);
        assert_eq!(
            ramp.slots.available_permits(),
            5,
            "a failure gives its slot back only"
        );
        ramp.stop();
        assert!(!ramp.on());
        assert!(ramp.slot().await.0.is_none(), "ended: nobody waits");
        ramp.start(Duration::from_secs(1));
        assert!(!ramp.on(), "it runs once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_never_started_is_given_back_and_the_ramp_ends_at_its_last_round() {
        let ramp = Ramp::default();
        ramp.start(Duration::from_secs(1));
        drop(ramp.slot().await.0);
        assert_eq!(ramp.slots.available_permits(), 2);
        for _ in FIRST..LAST - 1 {
            ramp.end(true);
        }
        assert!(ramp.on());
        ramp.end(true);
        assert!(!ramp.on(), "{LAST} out together: the ramp is over");
    }
}
