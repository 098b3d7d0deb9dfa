//! The engine's verdict on a failed attempt: a [`Decision`], why it gave
//! up ([`GiveUp`]), and the [`Outcome`] an event reports.

use core::fmt;
use core::time::Duration;

#[cfg(doc)]
use crate::vocab::bucket::TokenBucket;
#[cfg(doc)]
use crate::vocab::reached::Reached;

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
    /// The layer's [`TokenBucket`], shared across calls,
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
    /// The request of the failed attempt cannot be sent again: an adapter
    /// (`tower`, `reqwest_middleware`) could not clone it
    /// (a streamed body), so it was sent once, whatever the config says.
    NotReplayable,
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
            GiveUp::NotReplayable => f.write_str(
                "not retried: the request cannot be sent again (its body cannot be cloned)",
            ),
        }
    }
}

impl Decision {
    /// How the decision ends the attempt, as an event reports it: a retry,
    /// a give-up, or ([`GiveUp::BudgetExhausted`],
    /// [`GiveUp::TokenBucketEmpty`]) a retry refused by what pays for it.
    ///
    /// ```
    /// use nika_retry::engine::{Decision, GiveUp, Outcome};
    ///
    /// assert_eq!(Decision::GiveUp(GiveUp::TokenBucketEmpty).outcome(), Outcome::BudgetExhausted);
    /// assert_eq!(Decision::GiveUp(GiveUp::NotRetryable).outcome(), Outcome::GaveUp);
    /// ```
    pub const fn outcome(self) -> Outcome {
        match self {
            Decision::Retry { .. } => Outcome::Retrying,
            Decision::GiveUp(GiveUp::BudgetExhausted | GiveUp::TokenBucketEmpty) => {
                Outcome::BudgetExhausted
            }
            Decision::GiveUp(_) => Outcome::GaveUp,
        }
    }

    /// How loud the event of this decision after the 1-based `attempt` is,
    /// decided here with the verdict so that no one recomputes it: a retry
    /// and a give-up after retries are WARN, a give-up on the first
    /// attempt DEBUG (not retryable, a one-attempt layer, the 429 the http
    /// layer leaves to the provider), but for a failure that would have
    /// been retried and was not because repeating it is unsafe (the
    /// attempt may have taken effect, the request cannot be sent again):
    /// WARN even on the first attempt, since someone may have to look.
    pub(crate) const fn level(self, attempt: u32) -> Level {
        match self {
            Decision::Retry { .. }
            | Decision::GiveUp(GiveUp::MayHaveTakenEffect | GiveUp::NotReplayable) => Level::Warn,
            Decision::GiveUp(_) if attempt > 1 => Level::Warn,
            Decision::GiveUp(_) => Level::Debug,
        }
    }

    /// Why it gave up; `None` for a retry.
    pub const fn reason(self) -> Option<GiveUp> {
        match self {
            Decision::Retry { .. } => None,
            Decision::GiveUp(why) => Some(why),
        }
    }
}

/// How loud an event is in the logs: a decision's is
/// [`Decision::level`]'s; a recovery is [`Level::RECOVERED`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    /// A give-up on the first attempt and a recovery.
    Debug,
    /// A retry, and a give-up after at least one retry.
    Warn,
}

impl Level {
    /// The level of a recovery (an attempt that succeeded after retries,
    /// or after a wait at its upstream): DEBUG, the retries before it
    /// having said the rest.
    pub(crate) const RECOVERED: Level = Level::Debug;
}

/// How a decision ended.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The attempt failed and the loop sleeps `delay`, then tries again.
    Retrying,
    /// The attempt failed and the loop returns the error (see `reason`).
    GaveUp,
    /// The attempt failed and would have been retried, but what pays for
    /// retries refused: `reason` says which, in the event and its log line.
    ///
    /// - [`GiveUp::BudgetExhausted`] ("attempt budget exhausted"): the
    ///   cumulative attempt budget of the nested layers under one outermost
    ///   call is spent;
    /// - [`GiveUp::TokenBucketEmpty`] ("retry token bucket empty"): the layer's
    ///   [`TokenBucket`], shared across calls, is empty.
    ///
    /// One outcome for both, as observers have always seen it: either way
    /// the loop fails fast on a failure it would otherwise have retried.
    BudgetExhausted,
    /// An attempt after one or more retries succeeded (or a first attempt
    /// that succeeded after a wait at its upstream: the event's
    /// `upstream_wait` says how long and `wait_reason` why).
    Recovered,
    /// A streamed response cut after its content (an `Err` item that the
    /// layer would retry) continues: the loop sleeps `delay`, then calls
    /// the closure of [`Started::resume_with`](crate::stream::Started::resume_with)
    /// for the rest, as its next attempt. The event's `resumed_after` says
    /// how many items the caller had by then.
    Resuming,
}

impl Outcome {
    /// The snake-case name, as the `tracing` field shows it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Retrying => "retrying",
            Outcome::GaveUp => "gave_up",
            Outcome::BudgetExhausted => "budget_exhausted",
            Outcome::Recovered => "recovered",
            Outcome::Resuming => "resuming",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
