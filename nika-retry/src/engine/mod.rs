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
//! - a layer that retries only when its task opts in
//!   ([`Limits::needs_opt_in`]) gives up after its one attempt with
//!   [`GiveUp::NotOptedIn`];
//! - a retry that would otherwise happen takes its cost from the layer's
//!   [`TokenBucket`] ([`Limits::bucket`]), or gives up with
//!   [`GiveUp::TokenBucketEmpty`]; [`RetryState::succeeded`] gives it back.
//!
//! The generated loops ask it exactly this, and only apply the verdict:
//! sleep, count the retry against the shared budget, report the event
//! ([`Decision::outcome`]).

use crate::vocab::bucket::TokenBucket;
use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::config::RetryConfig;
use crate::vocab::reached::Reached;
use core::time::Duration;

mod backoff;
#[cfg(test)]
mod tests;
mod verdict;

pub use backoff::backoff;
pub(crate) use verdict::Level;
pub use verdict::{Decision, GiveUp, Outcome};

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
    /// [`TokenBucket`] its `timeout_retry_cost`.
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

/// What a decision must respect beyond the config: the call's deadline,
/// the budget and the token bucket shared with other calls, and what the
/// fn and its task say about repeating it. A generated call fills in every
/// field; a hand-written loop names the ones it has over [`Limits::NONE`].
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
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits<'a> {
    /// Time left before the call's total deadline, if it has one.
    pub time_left: Option<Duration>,
    /// Attempts left in the budget shared by nested retry layers, if one is in force.
    pub budget_left: Option<u32>,
    /// Whether repeating an attempt is harmless (`#[retry(idempotent = …)]`,
    /// `true` unless it says otherwise). If not, only a failure whose
    /// attempt certainly had no effect is retried: no config, the task's
    /// `retry:` included, can say otherwise.
    pub idempotent: bool,
    /// The layer's [`TokenBucket`], shared across calls, if one is in
    /// force: a retry takes its cost from it (the timeout cost after a
    /// [`Failure::timed_out`]), and gives up with
    /// [`GiveUp::TokenBucketEmpty`] when it cannot.
    pub bucket: Option<&'a TokenBucket>,
    /// Whether the call's layer retries only when its task opts in, and
    /// nothing did: a `tool` or `task` fn under its site's own config, with
    /// no task `retry:` nor `config = …` over it. Its one attempt then ends
    /// with [`GiveUp::NotOptedIn`] rather than
    /// [`GiveUp::AttemptsExhausted`].
    pub needs_opt_in: bool,
    /// Whether the request of the attempt cannot be sent again (an
    /// adapter's request it could not clone): a failure that would
    /// otherwise be retried gives up with [`GiveUp::NotReplayable`].
    pub cannot_replay: bool,
}

impl Limits<'static> {
    /// No deadline, no shared budget nor bucket, an idempotent call that
    /// needs no opt-in.
    pub const NONE: Limits<'static> = Limits {
        time_left: None,
        budget_left: None,
        idempotent: true,
        bucket: None,
        needs_opt_in: false,
        cannot_replay: false,
    };
}

impl<'a> Limits<'a> {
    /// The same limits, with `time_left` (the time before the call's
    /// total deadline; `None`: no deadline).
    #[must_use]
    pub const fn with_time_left(mut self, time_left: Option<Duration>) -> Limits<'a> {
        self.time_left = time_left;
        self
    }

    /// The same limits, with `budget_left` (the attempts left in the
    /// budget shared by nested layers; `None`: no budget in force).
    #[must_use]
    pub const fn with_budget_left(mut self, budget_left: Option<u32>) -> Limits<'a> {
        self.budget_left = budget_left;
        self
    }

    /// The same limits, for a call that is idempotent or not.
    #[must_use]
    pub const fn with_idempotent(mut self, idempotent: bool) -> Limits<'a> {
        self.idempotent = idempotent;
        self
    }

    /// The same limits, with the layer's shared [`TokenBucket`] (`None`:
    /// no bucket in force).
    #[must_use]
    pub const fn with_bucket<'b>(self, bucket: Option<&'b TokenBucket>) -> Limits<'b> {
        Limits {
            time_left: self.time_left,
            budget_left: self.budget_left,
            idempotent: self.idempotent,
            bucket,
            needs_opt_in: self.needs_opt_in,
            cannot_replay: self.cannot_replay,
        }
    }

    /// The same limits, for a call whose layer retries only when its task
    /// opts in and nothing did.
    #[must_use]
    pub const fn with_needs_opt_in(mut self, needs_opt_in: bool) -> Limits<'a> {
        self.needs_opt_in = needs_opt_in;
        self
    }

    /// The same limits, for an attempt whose request cannot be sent again.
    ///
    /// ```
    /// use nika_retry::engine::{Decision, Failure, GiveUp, Limits, RetryState};
    /// use nika_retry::{ErrorCategory, Layer, RetryConfig};
    ///
    /// let cfg = RetryConfig::for_layer(Layer::Http);
    /// let busy = Failure::new(ErrorCategory::Transient, None);
    /// let limits = Limits::NONE.with_cannot_replay(true);
    /// let decision = RetryState::new().decide(&cfg, busy, limits);
    /// assert_eq!(decision, Decision::GiveUp(GiveUp::NotReplayable));
    /// ```
    #[must_use]
    pub const fn with_cannot_replay(mut self, cannot_replay: bool) -> Limits<'a> {
        self.cannot_replay = cannot_replay;
        self
    }
}

impl PartialEq for Limits<'_> {
    /// Field by field, the bucket by identity (the same shared bucket).
    fn eq(&self, other: &Self) -> bool {
        let same_bucket = match (self.bucket, other.bucket) {
            (Some(a), Some(b)) => core::ptr::eq(a, b),
            (a, b) => a.is_none() && b.is_none(),
        };
        self.time_left == other.time_left
            && self.budget_left == other.budget_left
            && self.idempotent == other.idempotent
            && self.needs_opt_in == other.needs_opt_in
            && self.cannot_replay == other.cannot_replay
            && same_bucket
    }
}

impl Eq for Limits<'_> {}

/// The state of one call's retries: which attempt it is on, and its jitter source.
///
/// One per call; it is small (two counters and a 64-bit generator) and never allocates.
#[derive(Clone, Debug)]
pub struct RetryState {
    attempt: u32,
    /// What the last retry took from the [`Limits::bucket`], given back if
    /// the call then succeeds ([`RetryState::succeeded`]).
    taken: u32,
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
        RetryState::resume(1, 0)
    }

    /// A state on attempt `attempt`, whose last retry took `taken` tokens
    /// from the bucket, drawing jitter from the thread's generator: what a
    /// generated call keeps is those two numbers alone.
    pub(crate) const fn resume(attempt: u32, taken: u32) -> RetryState {
        RetryState {
            attempt,
            taken,
            seeded: false,
            rng: 0,
        }
    }

    /// A state on its first attempt whose jitter is drawn from `seed`: the same
    /// seed and failures give the same schedule.
    pub fn with_seed(seed: u64) -> RetryState {
        RetryState {
            attempt: 1,
            taken: 0,
            seeded: true,
            rng: seed,
        }
    }

    /// The 1-based number of the attempt running (or just ended).
    pub const fn attempt(&self) -> u32 {
        self.attempt
    }

    /// What the last retry took from the [`Limits::bucket`] (0 before any).
    pub const fn taken(&self) -> u32 {
        self.taken
    }

    /// Decides what follows the failure of the current attempt: the whole
    /// verdict, every [`GiveUp`] included, the bucket's charge made; its
    /// [`Decision::outcome`] is what an event reports. On
    /// [`Decision::Retry`] the state moves on to the next attempt.
    ///
    /// ```
    /// use nika_retry::engine::{Decision, Failure, GiveUp, Limits, Outcome, RetryState};
    /// use nika_retry::{ErrorCategory, Layer, RetryConfig, TokenBucket};
    ///
    /// let cfg = RetryConfig::for_layer(Layer::Provider);
    /// let busy = Failure::new(ErrorCategory::Transient, None);
    /// // A bucket that cannot pay for one retry (a retry costs 5).
    /// let bucket = TokenBucket::new(4);
    /// let limits = Limits::NONE.with_bucket(Some(&bucket));
    /// let decision = RetryState::new().decide(&cfg, busy, limits);
    /// assert_eq!(decision, Decision::GiveUp(GiveUp::TokenBucketEmpty));
    /// assert_eq!(decision.outcome(), Outcome::BudgetExhausted);
    ///
    /// // A tool fn tried once, its task not opted in.
    /// let tool = RetryConfig::for_layer(Layer::Tool);
    /// let limits = Limits::NONE.with_needs_opt_in(true);
    /// let decision = RetryState::new().decide(&tool, busy, limits);
    /// assert_eq!(decision, Decision::GiveUp(GiveUp::NotOptedIn));
    /// ```
    #[inline]
    pub fn decide(&mut self, cfg: &RetryConfig, failure: Failure, limits: Limits<'_>) -> Decision {
        let decision = self.evaluate(cfg, failure, limits);
        if matches!(decision, Decision::Retry { .. }) {
            self.attempt = self.attempt.saturating_add(1);
        }
        decision
    }

    /// After the call succeeded: gives the `bucket` back what the last
    /// retry took from it or, for a success at the first attempt, its
    /// refill of one success.
    pub fn succeeded(&self, bucket: &TokenBucket) {
        if self.attempt > 1 {
            bucket.release(self.taken);
        } else {
            bucket.refill();
        }
    }

    #[inline]
    fn evaluate(&mut self, cfg: &RetryConfig, failure: Failure, limits: Limits<'_>) -> Decision {
        if !(failure.category.is_retryable() && cfg.retry_on.contains(failure.category)) {
            return Decision::GiveUp(GiveUp::NotRetryable);
        }
        let attempts = cfg.effective_attempts();
        if self.attempt >= attempts {
            // The layer's one attempt, and its task did not opt in to more.
            if limits.needs_opt_in && attempts == 1 {
                return Decision::GiveUp(GiveUp::NotOptedIn);
            }
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
        if limits.cannot_replay {
            return Decision::GiveUp(GiveUp::NotReplayable);
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
        // Last: only a retry that would otherwise happen pays the bucket.
        if let Some(bucket) = limits.bucket {
            match bucket.acquire(failure.timed_out) {
                Some(taken) => self.taken = taken,
                None => return Decision::GiveUp(GiveUp::TokenBucketEmpty),
            }
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
