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
//! - a sleep that would end at or past the deadline is not started;
//! - a call that is not idempotent ([`Limits::idempotent`]) repeats only
//!   an attempt that certainly had no effect ([`Reached::No`],
//!   [`Reached::Refused`]); any other failure it would have retried gives
//!   up at once ([`GiveUp::MayHaveTakenEffect`]).

use core::fmt;
use core::time::Duration;

use crate::{Classify, ErrorCategory, Reached, RetryConfig};

mod backoff;
#[cfg(test)]
mod tests;

pub use backoff::backoff;
/// What the engine needs to know about one failed attempt.
///
/// `#[non_exhaustive]` (the crate's rule for public structs): read its
/// fields; build it with [`Failure::new`] or [`Failure::of`] and the
/// `with_*` setters.
#[non_exhaustive]
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
    /// Whether the attempt may have reached the other side ([`Classify::reached`]).
    pub reached: Reached,
}

impl Failure {
    /// A failure of `category` with an optional server hint, not a
    /// timeout, that reached the other side as the category says by
    /// default ([`Reached::default_for`]).
    pub const fn new(category: ErrorCategory, retry_after: Option<Duration>) -> Failure {
        Failure {
            category,
            retry_after,
            timed_out: false,
            reached: Reached::default_for(category),
        }
    }

    /// The same failure, with what its attempt reached.
    #[must_use]
    pub const fn with_reached(mut self, reached: Reached) -> Failure {
        self.reached = reached;
        self
    }

    /// The same failure, marked as a timeout (or not).
    #[must_use]
    pub const fn with_timed_out(mut self, timed_out: bool) -> Failure {
        self.timed_out = timed_out;
        self
    }

    /// The failure an error describes through [`Classify`]: its category,
    /// its hint, whether it is a timeout ([`Classify::timeout`]) and what
    /// its attempt reached ([`Classify::reached`]).
    pub fn of<E: Classify + ?Sized>(error: &E) -> Failure {
        Failure::new(error.category(), error.retry_after())
            .with_timed_out(error.timeout().is_some())
            .with_reached(error.reached())
    }
}

/// The limits outside the config that a decision must respect.
///
/// `#[non_exhaustive]` (the crate's rule for public structs, so that a
/// field added later breaks no caller): read its fields; build it from
/// [`Limits::NONE`] with the `with_*` setters.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::engine::Limits;
///
/// let limits = Limits::NONE
///     .with_time_left(Some(Duration::from_secs(5)))
///     .with_budget_left(Some(3))
///     .with_idempotent(false);
/// assert_eq!(limits.budget_left, Some(3));
/// assert!(!limits.idempotent);
/// ```
///
/// `Limits::default()` differs from [`Limits::NONE`] in one field: its
/// `idempotent` is `false`, so a decision under it retries only a failure
/// that certainly had no effect. Start from `Limits::NONE` for an
/// idempotent call.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Time left before the call's total deadline, if it has one.
    pub time_left: Option<Duration>,
    /// Attempts left in the budget shared by nested retry layers, if one is in force.
    pub budget_left: Option<u32>,
    /// Whether repeating an attempt is harmless (`#[retry(idempotent = …)]`,
    /// `true` unless it says otherwise). If not, only a failure whose
    /// attempt certainly had no effect is retried: no config, the task's
    /// `retry:` included, can say otherwise.
    pub idempotent: bool,
}

impl Limits {
    /// No deadline, no shared budget, an idempotent call.
    pub const NONE: Limits = Limits {
        time_left: None,
        budget_left: None,
        idempotent: true,
    };

    /// The same limits, with `time_left` (the time before the call's
    /// total deadline; `None`: no deadline).
    #[must_use]
    pub const fn with_time_left(mut self, time_left: Option<Duration>) -> Limits {
        self.time_left = time_left;
        self
    }

    /// The same limits, with `budget_left` (the attempts left in the
    /// budget shared by nested layers; `None`: no budget in force).
    #[must_use]
    pub const fn with_budget_left(mut self, budget_left: Option<u32>) -> Limits {
        self.budget_left = budget_left;
        self
    }

    /// The same limits, for a call that is idempotent or not.
    #[must_use]
    pub const fn with_idempotent(mut self, idempotent: bool) -> Limits {
        self.idempotent = idempotent;
        self
    }
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
    /// The call is not idempotent and the failed attempt may have reached
    /// the other side and taken effect there ([`Reached::Maybe`]): repeating
    /// it could repeat the effect (a second mail, a second payment), so it
    /// is not retried, whatever the config says.
    MayHaveTakenEffect,
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
            GiveUp::MayHaveTakenEffect => f.write_str(
                "not retried: the attempt may have taken effect and the fn is not idempotent",
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
        // Only a failure that would otherwise be retried: one the config
        // gives up on anyway keeps its own reason.
        if !limits.idempotent && !failure.reached.is_repeatable() {
            return Decision::GiveUp(GiveUp::MayHaveTakenEffect);
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
        // A u64 draw whenever it can be: a seeded test's schedule must not
        // change with the width of the span drawn from.
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
