//! The rate an upstream adapts to 429s that come without rate-limit
//! headers, as the AWS SDKs' adaptive retry mode does: off until the first;
//! then β = 0.7 of the send rate measured when it came (smoothed over
//! half-second buckets), growing back along a cubic with C = 0.4 through
//! that rate and beyond, until the next one.

use core::time::Duration;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

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
}
