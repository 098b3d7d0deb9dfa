//! The retry engine: one small, pure state machine that decides, after each
//! failed attempt, whether to retry and after how long.
//!
//! The macros drive it; a hand-written loop can too:
//!
//! ```
//! use std::time::Duration;
//! use nika_retry::engine::{Decision, Failure, Limits, RetryState};
//! use nika_retry::{ErrorCategory, Layer, RetryConfig};
//!
//! let cfg = RetryConfig::for_layer(Layer::Http).with_jitter(0.0)?;
//! let mut state = RetryState::with_seed(7);
//! let failure = Failure::new(ErrorCategory::Transient, None);
//!
//! assert_eq!(state.decide(&cfg, failure, Limits::NONE), Decision::retry(Duration::from_millis(250)));
//! assert_eq!(state.decide(&cfg, failure, Limits::NONE), Decision::retry(Duration::from_secs(1)));
//! // 3 attempts in all: the third failure is final.
//! assert!(matches!(state.decide(&cfg, failure, Limits::NONE), Decision::GiveUp(_)));
//! # Ok::<(), nika_retry::ConfigError>(())
//! ```
//!
//! It holds the whole delay rule of the crate:
//!
//! - backoff `d = min(initial · multiplier^(n−1), max_backoff)` before retry `n`;
//! - jitter `j` draws the delay uniformly from `[d·(1−j), d]`, so it never
//!   exceeds `max_backoff`;
//! - a server hint replaces the backoff and still uses up an attempt; a hint
//!   above `max_retry_after` is not slept on: the call gives up at once;
//! - a sleep that would end at or past the deadline is not started.

use core::fmt;
use core::time::Duration;

use crate::config::MAX_ATTEMPTS;
use crate::{Classify, ErrorCategory, Growth, RetryConfig};

// The loop that drives the engine for the code the macros generate: named
// by `__private`, not public API.
pub(crate) mod call;
pub(crate) mod once;
pub(crate) mod site;

/// What the engine needs to know about one failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The error's category.
    pub category: ErrorCategory,
    /// The server's wait hint, if any.
    pub retry_after: Option<Duration>,
    /// Whether the error is a time limit that expired (it holds a
    /// [`TimeoutError`](crate::TimeoutError)): a retry after it costs a
    /// [`TokenBucket`](crate::TokenBucket) its `timeout_retry_cost`.
    pub timed_out: bool,
}

impl Failure {
    /// A failure of `category` with an optional server hint, not a timeout.
    pub const fn new(category: ErrorCategory, retry_after: Option<Duration>) -> Failure {
        Failure {
            category,
            retry_after,
            timed_out: false,
        }
    }

    /// The same failure, marked as a timeout (or not).
    #[must_use]
    pub const fn with_timed_out(mut self, timed_out: bool) -> Failure {
        self.timed_out = timed_out;
        self
    }

    /// The failure an error describes through [`Classify`]: its category,
    /// its hint, and whether it is a timeout ([`Classify::timeout`]).
    pub fn of<E: Classify + ?Sized>(error: &E) -> Failure {
        Failure::new(error.category(), error.retry_after())
            .with_timed_out(error.timeout().is_some())
    }
}

/// The limits outside the config that a decision must respect.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Time left before the call's total deadline, if it has one.
    pub time_left: Option<Duration>,
    /// Attempts left in the budget shared by nested retry layers, if one is in force.
    pub budget_left: Option<u32>,
}

impl Limits {
    /// No deadline and no shared budget.
    pub const NONE: Limits = Limits {
        time_left: None,
        budget_left: None,
    };
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Sleep for `delay`, then run the next attempt.
    Retry {
        /// How long to sleep.
        delay: Duration,
        /// Whether the delay is the server's hint rather than the computed backoff.
        from_hint: bool,
    },
    /// Return the error.
    GiveUp(GiveUp),
}

impl Decision {
    /// A retry after a computed backoff of `delay`.
    pub const fn retry(delay: Duration) -> Decision {
        Decision::Retry {
            delay,
            from_hint: false,
        }
    }
}

/// Why the engine gave up.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// The config does not retry this category.
    NotRetryable,
    /// The attempt that failed was the last one the config allows.
    AttemptsExhausted,
    /// A `tool` or `task` fn was tried once because the task in force did
    /// not opt in to retrying it (no `retry:` in its
    /// [`TaskPolicy`](crate::task::TaskPolicy)): those layers retry only
    /// when the task says so.
    NotOptedIn,
    /// The cumulative attempt budget shared by the nested layers under one
    /// outermost call is spent ("attempt budget exhausted").
    BudgetExhausted,
    /// The layer's [`TokenBucket`](crate::TokenBucket), shared across calls,
    /// cannot pay for another retry ("retry token bucket empty"): not the attempt
    /// budget, which may have attempts left.
    TokenBucketEmpty,
    /// The server asked for a wait above `max_retry_after`.
    HintTooLong {
        /// The wait the server asked for.
        hint: Duration,
    },
    /// The sleep would end at or past the call's total deadline.
    PastDeadline {
        /// The sleep that would have been needed.
        delay: Duration,
    },
}

impl fmt::Display for GiveUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GiveUp::NotRetryable => f.write_str("not retryable"),
            GiveUp::AttemptsExhausted => f.write_str("attempts exhausted"),
            GiveUp::NotOptedIn => f.write_str("not opted in by the task"),
            GiveUp::BudgetExhausted => f.write_str("attempt budget exhausted"),
            GiveUp::TokenBucketEmpty => f.write_str("retry token bucket empty"),
            GiveUp::HintTooLong { hint } => {
                write!(
                    f,
                    "server asked to wait {}",
                    humantime::format_duration(*hint)
                )
            }
            GiveUp::PastDeadline { delay } => write!(
                f,
                "a {} wait would pass the deadline",
                humantime::format_duration(*delay)
            ),
        }
    }
}

/// The state of one call's retries: which attempt it is on, and its jitter source.
///
/// One per call; it is small (a counter and a 64-bit generator) and never allocates.
#[derive(Clone, Debug)]
pub struct RetryState {
    attempt: u32,
    /// Whether `rng` holds a generator's state yet: a flag beside a bare
    /// `u64` rather than an `Option<fastrand::Rng>`, which a `u64` without a
    /// niche makes 16 bytes, in every call's future.
    seeded: bool,
    rng: u64,
}

impl Default for RetryState {
    fn default() -> Self {
        RetryState::new()
    }
}

impl RetryState {
    /// A state on its first attempt, drawing jitter from the thread's generator
    /// (see [`seed_thread_jitter`]) the first time it needs to.
    pub const fn new() -> RetryState {
        RetryState {
            attempt: 1,
            seeded: false,
            rng: 0,
        }
    }

    /// A state on attempt `attempt`, drawing jitter from the thread's
    /// generator: what a call keeps is its attempt number alone.
    pub(crate) const fn at(attempt: u32) -> RetryState {
        RetryState {
            attempt,
            seeded: false,
            rng: 0,
        }
    }

    /// A state on its first attempt whose jitter is drawn from `seed`: the same
    /// seed and failures give the same schedule.
    pub fn with_seed(seed: u64) -> RetryState {
        RetryState {
            attempt: 1,
            seeded: true,
            rng: seed,
        }
    }

    /// The 1-based number of the attempt running (or just ended).
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Decides what follows the failure of the current attempt; on
    /// [`Decision::Retry`] the state moves on to the next attempt.
    pub fn decide(&mut self, cfg: &RetryConfig, failure: Failure, limits: Limits) -> Decision {
        let decision = self.evaluate(cfg, failure, limits);
        if matches!(decision, Decision::Retry { .. }) {
            self.attempt = self.attempt.saturating_add(1);
        }
        decision
    }

    fn evaluate(&mut self, cfg: &RetryConfig, failure: Failure, limits: Limits) -> Decision {
        if !(failure.category.is_retryable() && cfg.retry_on.contains(failure.category)) {
            return Decision::GiveUp(GiveUp::NotRetryable);
        }
        if self.attempt >= cfg.effective_attempts() {
            return Decision::GiveUp(GiveUp::AttemptsExhausted);
        }
        if limits.budget_left == Some(0) {
            return Decision::GiveUp(GiveUp::BudgetExhausted);
        }
        let (delay, from_hint) = match failure.retry_after {
            Some(hint) if hint > cfg.max_retry_after => {
                return Decision::GiveUp(GiveUp::HintTooLong { hint });
            }
            Some(hint) => (hint, true),
            None => (self.jittered(cfg, backoff(cfg, self.attempt)), false),
        };
        if limits.time_left.is_some_and(|left| delay >= left) {
            return Decision::GiveUp(GiveUp::PastDeadline { delay });
        }
        Decision::Retry { delay, from_hint }
    }

    /// Draws `d` uniformly from `[d·(1−jitter), d]`, in whole nanoseconds
    /// and exactly, up to [`Duration::MAX`].
    fn jittered(&mut self, cfg: &RetryConfig, d: Duration) -> Duration {
        // The jitter as a fraction of 2^24 rounded down, so that the span
        // never exceeds d·jitter; d < 2^94 ns, so the product fits a u128.
        let fraction = (effective_jitter(cfg.jitter) * f64::from(1u32 << 24)) as u128;
        let d_ns = d.as_nanos();
        let span = (d_ns * fraction) >> 24;
        if span == 0 {
            return d;
        }
        let mut rng = if self.seeded {
            fastrand::Rng::with_seed(self.rng)
        } else {
            fastrand::Rng::new()
        };
        // A u64 draw whenever it can be, so that a seed gives the schedules it always gave.
        let drawn = match u64::try_from(span) {
            Ok(span) => u128::from(rng.u64(0..=span)),
            Err(_) => rng.u128(0..=span),
        };
        (self.seeded, self.rng) = (true, rng.get_seed());
        let ns = d_ns - drawn;
        // At most `d`'s own seconds, so the cast is exact.
        Duration::new((ns / NANOS_PER_SEC) as u64, (ns % NANOS_PER_SEC) as u32)
    }
}

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// The backoff before retry `n` (1-based: `n = 1` precedes the second attempt),
/// before jitter: `min(initial · multiplier^(n−1), max_backoff)`, or
/// `min(initial · n, max_backoff)` for [`Growth::Linear`].
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{engine::backoff, Layer, RetryConfig};
///
/// let provider = RetryConfig::for_layer(Layer::Provider);
/// let schedule: Vec<_> = (1..=4).map(|n| backoff(&provider, n)).collect();
/// let secs = |s| Duration::from_secs(s);
/// assert_eq!(schedule, [secs(1), secs(4), secs(16), secs(16)]);
/// ```
pub fn backoff(cfg: &RetryConfig, n: u32) -> Duration {
    let cap = cfg.max_backoff;
    let initial = cfg.initial_backoff.min(cap);
    let n = n.clamp(1, MAX_ATTEMPTS);
    match whole_backoff(cfg, initial, n) {
        Some(d) => d.min(cap),
        None => float_backoff(cfg, initial, n, cap),
    }
}

/// [`backoff`] in integers, for a whole multiplier (the layer defaults'
/// ×4 and ×2) or linear growth, when the product is below 2^53 ns (about
/// 104 days): there the `f64` computation is exact too, so both give the
/// same duration, and this one needs no power in `f64`.
fn whole_backoff(cfg: &RetryConfig, initial: Duration, n: u32) -> Option<Duration> {
    let factor = match cfg.growth {
        Growth::Exponential => {
            let m = effective_multiplier(cfg.multiplier);
            // Whole: compared through an integer (`fract` is a libm call).
            let whole = m as u16;
            if f64::from(whole) != m {
                return None;
            }
            u32::from(whole).checked_pow(n - 1)?
        }
        Growth::Linear => n,
    };
    let d = initial.checked_mul(factor)?;
    (d < Duration::from_nanos(1 << 53)).then_some(d)
}

/// [`backoff`] in `f64`, for any multiplier.
fn float_backoff(cfg: &RetryConfig, initial: Duration, n: u32, cap: Duration) -> Duration {
    let factor = match cfg.growth {
        Growth::Exponential => effective_multiplier(cfg.multiplier).powi(n as i32 - 1),
        Growth::Linear => f64::from(n),
    };
    let ns = nanos_f64(initial) * factor;
    if !ns.is_finite() || ns >= nanos_f64(cap) {
        return cap;
    }
    // `ns` is finite, non-negative and below `cap`.
    let d = if ns < u64::MAX as f64 {
        Duration::from_nanos(ns as u64)
    } else {
        Duration::try_from_secs_f64(ns / 1e9).unwrap_or(cap)
    };
    d.min(cap)
}

/// `d` in nanoseconds as an `f64`, through a `u64` when it fits (every
/// duration under 584 years): a `u128` to `f64` conversion is a call into
/// a software routine, on every failed attempt.
fn nanos_f64(d: Duration) -> f64 {
    // Computed in `u64` rather than narrowed from `as_nanos`, which the
    // optimizer sees through and converts from `u128` all the same.
    let ns = d
        .as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(u64::from(d.subsec_nanos())));
    match ns {
        Some(ns) => ns as f64,
        None => d.as_nanos() as f64,
    }
}

fn effective_multiplier(m: f64) -> f64 {
    if m.is_finite() && m >= 1.0 { m } else { 1.0 }
}

fn effective_jitter(j: f32) -> f64 {
    if j.is_nan() {
        0.0
    } else {
        f64::from(j.clamp(0.0, 1.0))
    }
}

/// Seeds the current thread's jitter generator, which every [`RetryState::new`]
/// on this thread draws from: a test on a current-thread runtime gets the same
/// schedule every run.
pub fn seed_thread_jitter(seed: u64) {
    fastrand::seed(seed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Layer;

    const T: Failure = Failure::new(ErrorCategory::Transient, None);
    const RL: Failure = Failure::new(ErrorCategory::RateLimited, None);

    fn exact(layer: Layer) -> RetryConfig {
        RetryConfig::for_layer(layer).with_jitter(0.0).unwrap()
    }

    fn schedule(cfg: &RetryConfig, failure: Failure) -> (Vec<Duration>, GiveUp) {
        let mut state = RetryState::with_seed(1);
        let mut delays = vec![];
        loop {
            match state.decide(cfg, failure, Limits::NONE) {
                Decision::Retry { delay, .. } => delays.push(delay),
                Decision::GiveUp(why) => return (delays, why),
            }
        }
    }

    #[test]
    fn the_integer_backoff_is_the_float_one_wherever_it_applies() {
        let mut compared = 0;
        for growth in [Growth::Exponential, Growth::Linear] {
            for multiplier in [1.0, 2.0, 3.0, 4.0, 10.0, 1000.0] {
                for initial in [0, 1, 7, 250_000_000, 1_000_000_000, 86_400_000_000_000] {
                    let cfg = RetryConfig {
                        growth,
                        multiplier,
                        initial_backoff: Duration::from_nanos(initial),
                        max_backoff: Duration::MAX,
                        ..RetryConfig::for_layer(crate::Layer::Provider)
                    };
                    for n in 1..=12 {
                        let initial = cfg.initial_backoff;
                        if let Some(whole) = whole_backoff(&cfg, initial, n) {
                            let float = float_backoff(&cfg, initial, n, cfg.max_backoff);
                            assert_eq!(whole, float, "{growth:?} ×{multiplier} {initial:?} n={n}");
                            compared += 1;
                        }
                    }
                }
            }
        }
        assert!(compared > 500, "{compared}");
        // Not whole, or past 2^53 ns: the float path's alone.
        let half = RetryConfig {
            multiplier: 1.5,
            ..RetryConfig::for_layer(crate::Layer::Http)
        };
        assert_eq!(whole_backoff(&half, Duration::from_secs(1), 2), None);
        let long = RetryConfig {
            multiplier: 2.0,
            ..RetryConfig::for_layer(crate::Layer::Http)
        };
        assert_eq!(whole_backoff(&long, Duration::from_secs(1 << 40), 2), None);
    }

    #[test]
    fn http_schedule_is_250ms_then_1s_then_gives_up() {
        let (delays, why) = schedule(&exact(Layer::Http), T);
        assert_eq!(delays, [Duration::from_millis(250), Duration::from_secs(1)]);
        assert_eq!(why, GiveUp::AttemptsExhausted);
    }

    #[test]
    fn http_leaves_rate_limits_to_the_provider_layer() {
        assert_eq!(
            schedule(&exact(Layer::Http), RL),
            (vec![], GiveUp::NotRetryable)
        );
        let (delays, _) = schedule(&exact(Layer::Provider), RL);
        assert_eq!(delays, [Duration::from_secs(1), Duration::from_secs(4)]);
    }

    #[test]
    fn tool_and_task_layers_do_not_retry_by_default() {
        for layer in [Layer::Tool, Layer::Task] {
            assert_eq!(
                schedule(&exact(layer), T),
                (vec![], GiveUp::AttemptsExhausted)
            );
        }
    }

    #[test]
    fn never_retries_auth_not_found_or_permanent_even_if_configured() {
        let mut cfg = exact(Layer::Provider);
        cfg.retry_on = ErrorCategory::ALL.into_iter().collect();
        for c in [
            ErrorCategory::Auth,
            ErrorCategory::NotFound,
            ErrorCategory::Permanent,
        ] {
            let (delays, why) = schedule(&cfg, Failure::new(c, None));
            assert_eq!((delays.len(), why), (0, GiveUp::NotRetryable), "{c}");
        }
    }

    #[test]
    fn a_hint_replaces_the_backoff_and_uses_an_attempt() {
        let hint = Failure::new(ErrorCategory::RateLimited, Some(Duration::from_secs(7)));
        let mut state = RetryState::with_seed(1);
        let cfg = exact(Layer::Provider);
        assert_eq!(
            state.decide(&cfg, hint, Limits::NONE),
            Decision::Retry {
                delay: Duration::from_secs(7),
                from_hint: true
            }
        );
        assert_eq!(state.attempt(), 2);
    }

    #[test]
    fn a_hint_above_the_cap_gives_up_at_once() {
        let hint = Duration::from_secs(61);
        let failure = Failure::new(ErrorCategory::RateLimited, Some(hint));
        let (delays, why) = schedule(&exact(Layer::Provider), failure);
        assert_eq!((delays.len(), why), (0, GiveUp::HintTooLong { hint }));
    }

    #[test]
    fn no_sleep_reaches_the_deadline() {
        let cfg = exact(Layer::Provider);
        let mut state = RetryState::with_seed(1);
        let limits = Limits {
            time_left: Some(Duration::from_secs(1)),
            budget_left: None,
        };
        assert_eq!(
            state.decide(&cfg, T, limits),
            Decision::GiveUp(GiveUp::PastDeadline {
                delay: Duration::from_secs(1)
            })
        );
        let roomy = Limits {
            time_left: Some(Duration::from_millis(1001)),
            budget_left: None,
        };
        assert_eq!(
            state.decide(&cfg, T, roomy),
            Decision::retry(Duration::from_secs(1))
        );
    }

    #[test]
    fn a_spent_budget_stops_retries() {
        let cfg = exact(Layer::Provider);
        let limits = Limits {
            time_left: None,
            budget_left: Some(0),
        };
        assert_eq!(
            RetryState::with_seed(1).decide(&cfg, T, limits),
            Decision::GiveUp(GiveUp::BudgetExhausted)
        );
    }

    #[test]
    fn linear_and_constant_growth() {
        let cfg = exact(Layer::Task).with_growth(Growth::Linear);
        let ns: Vec<_> = (1..=3).map(|n| backoff(&cfg, n)).collect();
        assert_eq!(ns, [1, 2, 3].map(Duration::from_secs));
        let constant = exact(Layer::Task).with_multiplier(1.0).unwrap();
        assert_eq!(backoff(&constant, 5), Duration::from_secs(1));
    }

    #[test]
    fn out_of_range_fields_are_clamped_not_panicking() {
        let mut cfg = RetryConfig::for_layer(Layer::Provider);
        cfg.multiplier = f64::NAN;
        cfg.jitter = 7.0;
        cfg.initial_backoff = Duration::MAX;
        cfg.max_backoff = Duration::MAX;
        cfg.max_attempts = u32::MAX;
        let (delays, why) = schedule(&cfg, T);
        assert_eq!((delays.len(), why), (9, GiveUp::AttemptsExhausted));
        // A NaN multiplier counts as 1: every backoff is the (saturated) cap,
        // and the jitter of 7 counts as 1, so the delays still spread.
        assert_eq!(backoff(&cfg, 9), Duration::MAX);
        let distinct: std::collections::BTreeSet<_> = delays.iter().collect();
        assert!(
            distinct.len() > 1,
            "jitter 7 clamped to 1 still jitters: {delays:?}"
        );
        cfg.multiplier = f64::MAX;
        cfg.initial_backoff = Duration::from_secs(1);
        cfg.max_backoff = Duration::from_secs(10);
        assert_eq!(backoff(&cfg, 10), Duration::from_secs(10));
    }

    /// Many seeded draws of the delay before retry `n`, each from a fresh
    /// state; the smallest and the largest.
    fn draws(cfg: &RetryConfig, n: u32) -> (Duration, Duration) {
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for seed in 0..4_000 {
            let mut state = RetryState::with_seed(seed);
            let mut delay = Duration::ZERO;
            for _ in 0..n {
                let Decision::Retry { delay: d, .. } = state.decide(cfg, T, Limits::NONE) else {
                    panic!("retry {n} of {cfg:?} was refused");
                };
                delay = d;
            }
            lo = lo.min(delay);
            hi = hi.max(delay);
        }
        (lo, hi)
    }

    #[test]
    fn jitter_spreads_delays_over_the_whole_band_and_never_outside_it() {
        // The http layer's 50 %: 250 ms before retry 1, 1 s before retry 2.
        let http = RetryConfig::for_layer(Layer::Http);
        for (n, d) in [(1, 250u64), (2, 1_000)] {
            let d = Duration::from_millis(d);
            let (lo, hi) = draws(&http, n);
            // Never outside [d/2, d].
            assert!(lo >= d / 2 && hi <= d, "retry {n}: {lo:?}..{hi:?}");
            // 4 000 uniform draws come within 1 % of both ends.
            assert!(lo <= d / 2 + d / 100, "retry {n}: lowest {lo:?}");
            assert!(hi >= d - d / 100, "retry {n}: highest {hi:?}");
        }
        // Other fractions: the band is [d·(1−j), d].
        for j in [0.1f32, 0.25, 0.9, 1.0] {
            let cfg = exact(Layer::Provider).with_jitter(j).unwrap();
            let d = Duration::from_secs(1);
            let (lo, hi) = draws(&cfg, 1);
            let floor = d.mul_f64(1.0 - f64::from(j));
            assert!(lo >= floor && hi <= d, "jitter {j}: {lo:?}..{hi:?}");
            assert!(lo <= floor + d / 100, "jitter {j}: lowest {lo:?}");
            assert!(hi >= d - d / 100, "jitter {j}: highest {hi:?}");
        }
    }

    #[test]
    fn jitter_draws_are_uniform_over_the_band() {
        // Quartiles of 4 000 draws from [500 ms, 1 s]: about 1 000 each.
        let cfg = exact(Layer::Provider).with_jitter(0.5).unwrap();
        let mut quartiles = [0u32; 4];
        for seed in 0..4_000 {
            let Decision::Retry { delay, .. } =
                RetryState::with_seed(seed).decide(&cfg, T, Limits::NONE)
            else {
                panic!("refused")
            };
            let q = ((delay.as_millis() as u64).saturating_sub(500) / 125).min(3);
            quartiles[q as usize] += 1;
        }
        assert!(
            quartiles.iter().all(|&n| (850..=1_150).contains(&n)),
            "{quartiles:?}"
        );
    }

    #[test]
    fn zero_jitter_is_exact() {
        let (lo, hi) = draws(&exact(Layer::Http), 2);
        assert_eq!((lo, hi), (Duration::from_secs(1), Duration::from_secs(1)));
    }

    #[test]
    fn a_hint_equal_to_the_cap_is_slept_on() {
        let cfg = exact(Layer::Provider);
        let hint = cfg.max_retry_after;
        let failure = Failure::new(ErrorCategory::RateLimited, Some(hint));
        assert_eq!(
            RetryState::with_seed(1).decide(&cfg, failure, Limits::NONE),
            Decision::Retry {
                delay: hint,
                from_hint: true
            }
        );
        let above = Failure::new(
            ErrorCategory::RateLimited,
            Some(hint + Duration::from_nanos(1)),
        );
        assert_eq!(
            RetryState::with_seed(1).decide(&cfg, above, Limits::NONE),
            Decision::GiveUp(GiveUp::HintTooLong {
                hint: hint + Duration::from_nanos(1)
            })
        );
    }

    #[test]
    fn jitter_stays_in_its_band_up_to_duration_max() {
        for (jitter, num, den) in [(0.5f32, 1u128, 2u128), (0.25, 3, 4), (1.0, 0, 1)] {
            let mut cfg = RetryConfig::for_layer(Layer::Provider);
            cfg.jitter = jitter;
            for d in [
                Duration::MAX,
                Duration::MAX - Duration::from_nanos(1),
                Duration::from_secs(u64::MAX / 3),
                Duration::from_nanos(u64::MAX) * 7,
            ] {
                cfg.initial_backoff = d;
                cfg.max_backoff = d;
                assert_eq!(backoff(&cfg, 3), d);
                let mut state = RetryState::with_seed(5);
                for _ in 0..200 {
                    let got = state.jittered(&cfg, d);
                    // got ≥ d·(1 − jitter), exactly: got·den ≥ d·num.
                    assert!(got <= d, "{got:?} > {d:?}");
                    assert!(
                        got.as_nanos() * den >= d.as_nanos() * num,
                        "{got:?} below the band of {d:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_backoff_beyond_584_years_is_not_cut_to_it() {
        let mut cfg = exact(Layer::Provider);
        cfg.initial_backoff = Duration::from_secs(1 << 40);
        cfg.max_backoff = Duration::MAX;
        assert_eq!(backoff(&cfg, 2), Duration::from_secs(1 << 42));
    }

    #[test]
    fn thread_seed_reproduces_the_schedule() {
        let cfg = RetryConfig::for_layer(Layer::Provider);
        let run = || {
            seed_thread_jitter(42);
            let mut s = RetryState::new();
            [
                s.decide(&cfg, T, Limits::NONE),
                s.decide(&cfg, T, Limits::NONE),
            ]
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn give_up_reasons_read_as_sentences() {
        let secs = Duration::from_secs;
        let reasons = [
            (GiveUp::NotRetryable, "not retryable"),
            (GiveUp::AttemptsExhausted, "attempts exhausted"),
            (GiveUp::NotOptedIn, "not opted in by the task"),
            (GiveUp::BudgetExhausted, "attempt budget exhausted"),
            (GiveUp::TokenBucketEmpty, "retry token bucket empty"),
            (
                GiveUp::HintTooLong { hint: secs(90) },
                "server asked to wait 1m 30s",
            ),
            (
                GiveUp::PastDeadline { delay: secs(4) },
                "a 4s wait would pass the deadline",
            ),
        ];
        for (why, text) in reasons {
            assert_eq!(why.to_string(), text);
        }
    }

    #[test]
    fn a_seed_fixes_the_jitter() {
        let cfg = RetryConfig::for_layer(Layer::Provider)
            .with_max_attempts(10)
            .unwrap();
        let run = |seed| {
            let mut state = RetryState::with_seed(seed);
            let delays: Vec<_> = (0..9)
                .map(|_| state.decide(&cfg, T, Limits::NONE))
                .collect();
            delays
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn a_multiplier_below_one_or_infinite_counts_as_one() {
        for m in [0.5, f64::INFINITY, f64::NAN, -2.0] {
            let mut cfg = exact(Layer::Provider);
            cfg.multiplier = m;
            assert_eq!(backoff(&cfg, 3), Duration::from_secs(1), "{m}");
        }
    }

    #[test]
    fn a_backoff_below_2_pow_64_ns_is_exact_to_the_nanosecond() {
        // 2^62 + 1024 ns is exact as an f64 of nanoseconds; as an f64 of
        // seconds it is 217 ns off.
        let d = Duration::from_nanos((1 << 62) + 1024);
        let mut cfg = exact(Layer::Provider).with_multiplier(1.0).unwrap();
        cfg.initial_backoff = d;
        cfg.max_backoff = Duration::MAX;
        assert_eq!(backoff(&cfg, 1), d);
        assert_eq!(backoff(&cfg, 5), d);
    }
}
