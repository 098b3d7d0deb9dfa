//! The one `impl` of a call of a `#[retry]` fn ([`Call`], kept in
//! [`state`](super::state)): every step generated code and the adapters'
//! `drive` call on it: its making
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
use super::state::{Call, CallState, Deadline, Untimed};
use super::timed::{Timed, TimedCall, Timing};
use super::upstream::AtUpstream;
use crate::ambient::{AttemptSlot, Budget, Idempotence};
use crate::engine::Failure;
use crate::events::WaitReason;
use crate::metrics::{self, End};
use crate::time::{Nanos, Total};
use crate::upstream::Held;
use crate::vocab::classify::Classify;
use crate::vocab::config::RetryConfig;
use crate::vocab::key::IdempotencyKey;
use crate::vocab::timeout_error::TimeoutError;

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

    /// The call of `site` as it goes on after its attempt `slot` delivered
    /// a streamed response's content that then broke
    /// ([`Started::resume_with`](crate::stream::Started::resume_with)): its
    /// attempts so far, the `budget` it spends, its `start`, its `total`
    /// deadline, and its key if it had drawn one.
    pub(crate) fn going_on(
        site: &'static Site,
        slot: AttemptSlot,
        budget: Budget,
        start: Instant,
        total: Option<Total>,
        key: Option<IdempotencyKey>,
    ) -> TimedCall {
        let mut call = TimedCall::new(site, None);
        call.timing.deadline = total;
        call.streams = true;
        call.attempt = slot.attempt();
        call.max_attempts = NonZeroU32::new(slot.max_attempts());
        call.budget = Some(budget);
        call.start = Some(start);
        if let Some(key) = key {
            call.key = key;
        }
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
