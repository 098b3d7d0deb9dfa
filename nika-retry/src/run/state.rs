//! What one call of a `#[retry]` fn keeps ([`Call`]): its time limits'
//! share `D` ([`Deadline`]: [`Untimed`], or
//! [`Timing`](super::timed::Timing)) and the rest, [`CallState`], which
//! it derefs to. Its one `impl`, every step generated code calls on it, is
//! [`call`](super::call)'s; this file is beneath the others of `run/`,
//! which all hold a call.

use core::num::NonZeroU32;

use tokio::time::Instant;

use super::site::Site;
use crate::ambient::{Budget, Idempotence};
use crate::metrics::CallClock;
use crate::time::Nanos;
use crate::vocab::bucket::TokenBucket;
use crate::vocab::category::ErrorCategory;
use crate::vocab::key::IdempotencyKey;

/// One call of a `#[retry]` fn: its attempt, and its place among the retry
/// loops around it.
///
/// Kept small, since it lives in the fn's future: the config is the site's
/// `const` unless a task scope or `config = …` replaces it, and those are
/// only looked up when an attempt fails; per-attempt limits are passed to
/// each attempt rather than stored, and what only `#[timeout]` needs is its
/// `D` ([`Timing`](super::timed::Timing); nothing, [`Untimed`], without it):
/// one type, so that what generated code calls after an attempt is written
/// once. Jitter is drawn from the thread's generator, so the call
/// holds no generator of its own. What the loops around it say (the
/// shared budget, a task scope) is read on the first poll of the first
/// attempt, in the same exchange that puts the call's own context in force.
#[derive(Debug)]
pub struct Call<D = Untimed> {
    /// Everything but the time limits: what the cold paths read, compiled
    /// once in this crate rather than for each `D` in the user's.
    pub(super) state: CallState,
    /// What its time limits share across attempts: nothing without `#[timeout]`.
    pub(super) timing: D,
}

/// A [`Call`] but its time limits, which it derefs to.
#[derive(Debug)]
pub struct CallState {
    pub(crate) site: &'static Site,
    /// The 1-based number of the attempt running (or just ended).
    pub(crate) attempt: u32,
    /// `Some` for the outermost retried call, which owns the shared budget.
    pub(super) budget: Option<Budget>,
    pub(super) bucket: Option<TokenBucket>,
    /// What the last retry took from the bucket, given back if it succeeds.
    pub(super) bucket_taken: u32,
    /// The attempts the loop allows as far as known: `None` until the first
    /// poll reads what the scope around it says ([`CallState::resolve`]).
    pub(super) max_attempts: Option<NonZeroU32>,
    /// Whether the last attempt failed on one of the call's own time limits.
    pub(super) timed_out: bool,
    /// Whether an attempt may be repeated whatever it reached
    /// (`idempotent = …`, said as the call starts; without it, what the
    /// calls around it say: `effect`).
    pub(super) idempotent: Idempotence,
    pub(super) key: IdempotencyKey,
    /// When the first failure was, after `start` (which it implies).
    pub(super) first_failure: Nanos,
    /// The category of the last failure; `None` before any.
    pub(super) last_category: Option<ErrorCategory>,
    /// When the call started, for a stream its attempts await
    /// ([`stream`](crate::stream)) and for the events: set when the first
    /// attempt first goes pending or when an attempt fails, so it is `None`
    /// only during the first poll of the first attempt, when "now" is the
    /// start. A first attempt ready at once never reads the clock for it
    /// (with feature `opentelemetry`, it is set as the call is made: the
    /// call's duration counts from it).
    pub(super) start: Option<Instant>,
    /// A stream in the body asked for the call's frame: from then on every
    /// poll of an attempt puts it in force. A call that awaits no stream
    /// never pays for one.
    pub(super) streams: bool,
    /// Its time with no attempt in flight, for its metrics (feature
    /// `opentelemetry`, which also sets `start` as the call is made;
    /// nothing without it).
    pub(super) metrics: CallClock,
}

/// What a call's time limits share across its attempts: its deadline, if
/// it has one. Implemented by [`Untimed`] and [`Timing`](super::timed::Timing).
pub trait Deadline {
    /// The instant the call's `total` limit expires at.
    fn deadline(&self) -> Option<Instant>;
}

/// The `D` of a call without `#[timeout]`: no limit, no deadline, no byte.
#[derive(Debug, Default, Clone, Copy)]
pub struct Untimed;

impl Deadline for Untimed {
    #[inline(always)]
    fn deadline(&self) -> Option<Instant> {
        None
    }
}

impl CallState {
    #[inline(always)]
    pub(super) fn new(site: &'static Site) -> CallState {
        CallState {
            site,
            attempt: 1,
            budget: None,
            bucket: None,
            bucket_taken: 0,
            max_attempts: None,
            timed_out: false,
            idempotent: Idempotence::Unsaid,
            key: IdempotencyKey::UNDRAWN,
            first_failure: Nanos::NONE,
            last_category: None,
            // With metrics, the call's start is read now; without, when
            // it is needed.
            start: CallClock::start(),
            streams: false,
            metrics: CallClock::new(),
        }
    }

    /// An attempt went pending: if it is the call's first to, the call
    /// started then.
    #[inline(always)]
    pub(super) fn went_pending(&mut self) {
        if self.start.is_none() {
            self.start_now();
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn start_now(&mut self) {
        self.start = Some(Instant::now());
    }
}
