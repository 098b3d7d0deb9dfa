//! One call of a `#[retry]` fn ([`Call`]) and what it does for each poll
//! of an attempt: puts the attempt in force ([`Call::enter`]), reads on the
//! first poll what the loops and the scope around it say, and polls the
//! body ([`Attempt`]). What it does after the attempt is in
//! [`after`](super::after); with `#[timeout]`, its limits are in
//! [`timed`](super::timed).

use core::future::Future;
use core::num::NonZeroU32;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use tokio::time::Instant;

use super::site::Site;
use super::violation;
use crate::ambient::exchange::{self, Outer};
use crate::ambient::{AttemptSlot, Budget, Frame, Idempotence, SiteOf, StreamFrame, Swap};
use crate::metrics::{CallClock, StreamOf};
use crate::task;
use crate::time::{Nanos, Total};
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
    pub(super) site: &'static Site,
    /// The 1-based number of the attempt running (or just ended).
    pub(super) attempt: u32,
    /// `Some` for the outermost retried call, which owns the shared budget.
    pub(super) budget: Option<Budget>,
    pub(super) bucket: Option<TokenBucket>,
    /// What the last retry took from the bucket, given back if it succeeds.
    pub(super) bucket_taken: u32,
    /// The attempts the loop allows as far as known: `None` until the first
    /// poll reads what the scope around it says ([`Call::resolve`]).
    pub(super) max_attempts: Option<NonZeroU32>,
    /// Whether the last attempt failed on one of the call's own time limits.
    pub(super) timed_out: bool,
    /// Whether an attempt may be repeated whatever it reached
    /// (`idempotent = …`, said as the call starts; without it, what the
    /// calls around it say: `effect`).
    pub(super) idempotent: Idempotence,
    key: IdempotencyKey,
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

    /// Puts the call's attempt in force for one poll, until the guard drops
    /// (a panic included). Inlined into the poll, always: a guard returned
    /// from a call comes back through memory, and reading it stalls the
    /// CPU's store forwarding on every call. `framed`: the call's stream
    /// frame is in force too ([`frame`](Call::frame)).
    #[inline(always)]
    pub(super) fn enter(&mut self, framed: bool) -> Entered<'_> {
        let outer = match self.max_attempts {
            Some(resolved) => {
                let slot = self.slot(resolved, framed);
                exchange::install(self.budget, slot, &mut self.key)
            }
            None => self.enter_first(framed),
        };
        Entered { call: self, outer }
    }

    /// [`enter`](CallState::enter) on the call's first poll: what is around
    /// the call is read in the access that puts its attempt in force, unless
    /// a task policy is in force or the call breaks the layer rule
    /// ([`resolve`](CallState::resolve), then the exchange).
    #[inline(always)]
    fn enter_first(&mut self, framed: bool) -> Outer {
        let max_attempts = self.site.config.attempts();
        let slot = self.slot(max_attempts, framed);
        let default = Budget::new(task::DEFAULT_BUDGET, 1);
        match exchange::install_first(self.site.layer, slot, default, &mut self.key) {
            Some((outer, budget)) => {
                (self.budget, self.max_attempts) = (budget, Some(max_attempts));
                outer
            }
            None => self.enter_resolving(framed),
        }
    }

    /// [`enter_first`](CallState::enter_first) under a task policy or
    /// breaking the layer rule: out of line, the rare path.
    #[cold]
    #[inline(never)]
    fn enter_resolving(&mut self, framed: bool) -> Outer {
        let max_attempts = self.resolve();
        let slot = self.slot(max_attempts, framed);
        exchange::install(self.budget, slot, &mut self.key)
    }

    /// The slot of the call's attempt, of `max_attempts`; `framed`, with
    /// its stream frame in force.
    #[inline(always)]
    fn slot(&self, max_attempts: NonZeroU32, framed: bool) -> AttemptSlot {
        let slot = AttemptSlot::new(
            self.site.layer,
            self.attempt,
            max_attempts.get(),
            self.key != IdempotencyKey::UNDRAWN,
        )
        .saying(self.idempotent);
        if framed { slot.with_stream() } else { slot }
    }

    /// The call's frame for the streams its attempt awaits, with the
    /// attempt's `read` limit and the call's `total` deadline: put in force
    /// for its polls once a stream has asked for it.
    #[cold]
    #[inline(never)]
    pub(super) fn frame(
        &self,
        read: Option<Duration>,
        total: Option<Total>,
    ) -> Option<StreamFrame> {
        Some(StreamFrame {
            start: self.start,
            read,
            total,
            layer: self.site.layer,
            of: StreamOf::new(self.site.operation),
            site: Some(SiteOf(self.site)),
        })
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

    /// What the loops and the scope around the call say about it, read once,
    /// on its first poll under a task policy or breaking the layer rule (the
    /// others read it in [`exchange::install_first`]): the budget it owns if
    /// it is the outermost retried call (the task's, which always holds, or
    /// the default), its layer's token bucket, and the attempts it allows
    /// (the task's `retry:` over the site's).
    #[inline(always)]
    fn resolve(&mut self) -> NonZeroU32 {
        let (scoped, nested, breaks) = exchange::around(self.site.layer);
        if scoped {
            return self.resolve_in_scope(nested, breaks);
        }
        if !nested {
            self.budget = Some(Budget::new(task::DEFAULT_BUDGET, 1));
        } else if breaks {
            // Only a nested call that breaks the rule leaves this path (ADR-006).
            violation::check(self.site);
        }
        *self.max_attempts.insert(self.site.config.attempts())
    }

    /// [`resolve`](Call::resolve) under a task policy.
    #[cold]
    #[inline(never)]
    fn resolve_in_scope(&mut self, nested: bool, breaks: bool) -> NonZeroU32 {
        let scope = task::in_force(self.site.layer);
        if !nested {
            self.budget = Some(match scope.budget {
                Some(total) => Budget::explicit(total, 1),
                None => Budget::new(task::DEFAULT_BUDGET, 1),
            });
        } else if breaks {
            violation::check(self.site);
        }
        self.bucket = scope.bucket;
        *self.max_attempts.insert(
            scope
                .max_attempts
                .unwrap_or_else(|| self.site.config.attempts()),
        )
    }
}

/// One poll of an attempt with its call's attempt in force: puts the outer
/// one back when dropped.
pub(super) struct Entered<'a> {
    pub(super) call: &'a mut CallState,
    outer: Outer,
}

impl Drop for Entered<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let call = &mut *self.call;
        let owns_budget = call.budget.is_some();
        // The site by reference: read only if the poll has violations to report.
        let budget = exchange::restore(
            self.outer,
            &mut call.key,
            owns_budget,
            &mut call.streams,
            &call.site,
            |site, layer, count| violation::report(layer, site.operation, count),
        );
        if budget.is_some() {
            call.budget = budget;
        }
    }
}

pin_project_lite::pin_project! {
    /// One attempt, polled with the call's context in force.
    pub struct Attempt<'a, F> {
        #[pin]
        fut: F,
        call: &'a mut Call,
    }
}

impl<F: Future> Future for Attempt<'_, F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let call = this.call;
        let polled = if call.streams {
            poll_framed(call, this.fut, cx)
        } else {
            let _entered = call.enter(false);
            this.fut.poll(cx)
        };
        if polled.is_pending() {
            call.went_pending();
        }
        polled
    }
}

/// A poll of an attempt whose call has its stream frame in force too: out
/// of line, so that the polls of the calls that await no stream keep their
/// registers.
#[cold]
#[inline(never)]
fn poll_framed<F: Future>(
    call: &mut CallState,
    fut: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    let mut frame = call.frame(None, None);
    let _frame = Swap::<Frame>::new(&mut frame);
    let _entered = call.enter(true);
    fut.poll(cx)
}
