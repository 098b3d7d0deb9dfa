//! One call of a `#[retry]` fn ([`Call`]) and every step generated code
//! and the adapters' `drive` call on it, in one `impl`: its making
//! (`new`, `streamed`), an attempt (`attempt`, `timed` under its time
//! limits), the wait at its upstream (`wait_at`), and what it does after
//! the attempt (`next`, `next_after`). What each poll of an attempt puts in
//! force is in [`poll`](super::poll); the decision's cold paths, once for
//! every `D`, in [`after`](super::after); the time limits' share, `D`, in
//! [`timed`](super::timed).

use core::future::Future;
use core::num::NonZeroU32;
use core::time::Duration;

use tokio::time::Instant;

use super::after::{Again, NO_CONFIG, RetryResult, lazy, static_name, waited_at_upstream};
use super::poll::Attempt;
use super::site::{AttemptLimits, Site};
use super::timed::{Timed, TimedCall, Timing};
use super::upstream::AtUpstream;
use crate::ambient::{Budget, Idempotence};
use crate::engine::Failure;
use crate::events::WaitReason;
use crate::metrics::{self, CallClock, End};
use crate::time::Nanos;
use crate::upstream::Held;
use crate::vocab::bucket::TokenBucket;
use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::config::RetryConfig;
use crate::vocab::key::IdempotencyKey;
use crate::vocab::timeout_error::TimeoutError;

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
    pub(super) site: &'static Site,
    /// The 1-based number of the attempt running (or just ended).
    pub(super) attempt: u32,
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

impl<D> core::ops::Deref for Call<D> {
    type Target = CallState;

    #[inline(always)]
    fn deref(&self) -> &CallState {
        &self.state
    }
}

impl<D> core::ops::DerefMut for Call<D> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut CallState {
        &mut self.state
    }
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

impl Call {
    /// A call of `site`.
    #[inline(always)]
    pub fn new(site: &'static Site) -> Call {
        Call::with(site, Untimed)
    }

    /// A call of `site` whose fn returns a stream it awaited with
    /// [`started`](crate::stream::started) (its return type names
    /// `Started`): its frame is in force from the first poll, so the stream
    /// finds it at once rather than asking for it and waiting a poll.
    #[inline(always)]
    pub fn streamed(site: &'static Site) -> Call {
        let mut call = Call::with(site, Untimed);
        call.streams = true;
        call
    }

    /// Runs one attempt.
    #[inline]
    pub fn attempt<F: Future>(&mut self, fut: F) -> Attempt<'_, F> {
        Attempt { fut, call: self }
    }
}

impl<D> Call<D> {
    /// A call of `site` whose limits share `timing`.
    #[inline(always)]
    pub(super) fn with(site: &'static Site, timing: D) -> Call<D> {
        Call {
            state: CallState::new(site),
            timing,
        }
    }
}

impl Call<Timing> {
    /// A call of `site`, bounded in all by `total` if given.
    #[inline(always)]
    pub fn new(site: &'static Site, total: Option<Duration>) -> TimedCall {
        Call::with(site, Timing::new(total))
    }

    /// [`TimedCall::new`] for a fn whose return type names `Started` ([`Call::streamed`]).
    #[inline(always)]
    pub fn streamed(site: &'static Site, total: Option<Duration>) -> TimedCall {
        let mut call = TimedCall::new(site, total);
        call.streams = true;
        call
    }

    /// Runs one attempt under `limits` and the call's total deadline.
    /// `into_error` is `FromTimeout::from_timeout`, named by the expansion at
    /// the fn's error type (as for [`once`](super::once)), so that a
    /// missing `From<TimeoutError>` is reported there and nowhere in here.
    #[inline]
    pub fn timed<F, T, E>(
        &mut self,
        limits: AttemptLimits,
        fut: F,
        into_error: fn(TimeoutError) -> E,
    ) -> Timed<'_, F, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        let (inner, connect) = limits.arm(fut, self.site.layer);
        Timed {
            inner,
            connect,
            call: self,
            into_error,
        }
    }
}

impl<D: Deadline> Call<D> {
    /// As the call starts: whether it is idempotent, as `idempotent` (the
    /// attribute's expression, evaluated here, once per call, before the
    /// body can move what it reads) says; the engine then retries only what
    /// certainly had no effect ([`Reached`](crate::vocab::reached::Reached)),
    /// here and in the calls nested in its attempts that do not say
    /// `idempotent = true` themselves (README, "Calls with side
    /// effects", Inward).
    #[inline(always)]
    pub fn said_idempotent(&mut self, idempotent: impl FnOnce() -> bool) {
        self.idempotent = Idempotence::said(idempotent());
    }

    /// After an attempt: when to start the next one (the backoff from now),
    /// or `None` to return `result`; an instant rather than the delay, so
    /// that the clock read that timed the failure serves the sleep too.
    /// `config` is the attribute's `config = …`, evaluated only if the
    /// attempt failed; `self_type` names the impl's type of a method, for
    /// the events.
    #[inline(always)]
    pub fn next<R, C>(
        &mut self,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Instant>
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        self.after((Nanos::NONE, None), result, config, self_type, Again::Sent)
            .0
    }

    /// [`next`](Call::next) for a call with an upstream: the attempt's
    /// outcome goes to the upstream too (unless a success tells it nothing).
    #[inline(always)]
    pub fn next_after<R, C>(
        &mut self,
        at: &mut AtUpstream<'_>,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Instant>
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        self.settle_after(at, result, config, self_type, Again::Sent)
    }

    /// [`next_after`](Call::next_after) for a streamed response that
    /// resumes ([`Started::resume_with`](crate::stream::Started::resume_with)),
    /// having given its caller `delivered` items: the cut, then each
    /// resume's attempt before its content, decided as any attempt, said
    /// in its event as a resume.
    #[inline]
    pub(crate) fn next_resuming<R>(
        &mut self,
        at: &mut AtUpstream<'_>,
        result: &R,
        delivered: u64,
    ) -> Option<Instant>
    where
        R: RetryResult,
        R::Error: Classify,
    {
        self.settle_after(at, result, NO_CONFIG, None, Again::Resumed(delivered))
    }

    /// [`next_after`](Call::next_after) and [`next_resuming`](Call::next_resuming).
    #[inline(always)]
    fn settle_after<R, C>(
        &mut self,
        at: &mut AtUpstream<'_>,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
        again: Again,
    ) -> Option<Instant>
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        let waited = at.waited();
        if let Some(span) = waited_at_upstream(waited) {
            self.upstream_waited(at, span, waited.1);
        }
        if result.error().is_none() && at.quiet() {
            // The common case apart: no failure to carry to `settle`, no
            // backoff to draw for it.
            return self.after(waited, result, config, self_type, again).0;
        }
        let (until, failure) = self.after(waited, result, config, self_type, again);
        if let (Some(failure), Some(upstream)) = (&failure, at.upstream()) {
            metrics::refused(upstream.name(), static_name(upstream), failure);
        }
        at.settle(failure, until);
        until
    }

    /// The attempt waited `span` at the upstream of `at`: time with no
    /// attempt in flight, for the call's metrics, and a wait of its own.
    #[cold]
    #[inline(never)]
    fn upstream_waited(&mut self, at: &AtUpstream<'_>, span: Duration, why: Option<WaitReason>) {
        self.metrics.idle(span);
        if let Some(upstream) = at.upstream() {
            metrics::waited(upstream.name(), static_name(upstream), span, why);
        }
    }

    /// [`next`](Call::next), for a call that waited `waited` at its
    /// upstream (none: it did not), under its deadline if it has one; with the failure it
    /// classified, for the upstream to read rather than classify again
    /// (the callers that drop it pay a copy: BENCHMARKS.md, "The kernel's
    /// last moves").
    #[inline(always)]
    fn after<R, C>(
        &mut self,
        waited: (Nanos, Option<WaitReason>),
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
        again: Again,
    ) -> (Option<Instant>, Option<Failure>)
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        match result.error() {
            // A first attempt that succeeds, outside any token bucket: done.
            None if self.attempt == 1 && self.bucket.is_none() && waited.0.is_none() => {
                self.metrics.ended(self.start, self.site, 1, End::Success);
                (None, None)
            }
            None => {
                self.succeeded(self_type, waited);
                let end = if self.attempt > 1 {
                    End::Recovered
                } else {
                    End::Success
                };
                self.metrics.ended(self.start, self.site, self.attempt, end);
                (None, None)
            }
            Some(error) => {
                let failure = Failure::of(error);
                let deadline = self.timing.deadline();
                let next = self.failed(
                    failure,
                    deadline,
                    waited,
                    &mut lazy(config),
                    self_type,
                    if result.replayable() {
                        again
                    } else {
                        Again::NotReplayable
                    },
                );
                (next, Some(failure))
            }
        }
    }
    /// Waits until the upstream lets the next attempt start, an attempt
    /// [`AtUpstream::admit`] refused until `until`: within the call's
    /// `total` deadline if it has one; `Held` if the hold is longer than
    /// the call's `max_retry_after`. Only the boxed wait's handle lives
    /// across the `await`, in the future of every fn that names an
    /// upstream.
    #[inline]
    pub async fn wait_at(&self, at: &mut AtUpstream<'_>, until: Instant) -> Result<(), Held> {
        let Some(r) = &mut at.0 else {
            return Ok(());
        };
        let (cap, deadline) = (self.site.config.max_retry_after, self.timing.deadline());
        let waited = r.upstream().wait(r, until, cap, deadline).await;
        // Held: the call ends here, after the attempts it made. Only with
        // metrics does the future keep `self` across the wait.
        #[cfg(feature = "opentelemetry")]
        if waited.is_err() {
            self.ended_held();
        }
        waited
    }

    /// The call returns `Held` before its next attempt: its metrics.
    #[cfg(feature = "opentelemetry")]
    #[cold]
    fn ended_held(&self) {
        let attempts = self.attempt - 1;
        let end = crate::metrics::End::Held;
        self.metrics.ended(self.start, self.site, attempts, end);
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

    /// The call's idempotency key, as an earlier part of it drew it: a
    /// streamed response's resume goes on with its call's key.
    pub(super) fn keep_key(&mut self, key: IdempotencyKey) {
        self.key = key;
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
