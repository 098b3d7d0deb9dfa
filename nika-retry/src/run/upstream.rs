//! `#[retry(upstream = EXPR)]`: each attempt passes its upstream before it
//! starts, has it in force for [`current`](crate::upstream::current) while
//! it runs, and gives it the attempt's outcome after. An expression that is
//! `None` leaves the call alone: no pass, no outcome, nothing in force.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use tokio::time::Instant;

use crate::ambient::Swap;
use crate::engine::Failure;
use crate::events::WaitReason;
use crate::time::Nanos;
use crate::upstream::in_force::{InForce, InForceUpstream};
use crate::upstream::{COST_UNKNOWN, Reservation, Upstream};

/// A call's place at its upstream, for the generated loop: kept for the
/// whole call (a probe's turn, dropped with its cancelled call, passes
/// on), idle between attempts, so that an attempt at an open upstream
/// builds nothing and carries nothing new across its `await`. `None`:
/// the expression named no upstream, and the call is alone.
pub struct AtUpstream<'u>(pub(super) Option<Reservation<'u>>);

impl<'u> AtUpstream<'u> {
    /// The place of a call at `upstream`, idle until an attempt is admitted.
    #[inline(always)]
    pub fn new(upstream: Option<&'u Upstream>) -> Self {
        AtUpstream(upstream.map(Reservation::idle))
    }

    /// The place of a call at `upstream` whose attempts each spend `cost`
    /// of its token limit (`cost = …`, evaluated once per call, through
    /// [`IntoCost`]).
    #[inline(always)]
    pub fn with_cost(upstream: Option<&'u Upstream>, cost: u32) -> Self {
        AtUpstream(upstream.map(|upstream| Reservation::idle(upstream).with_cost(cost)))
    }

    /// Admits the next attempt without waiting: `None` if it may start now
    /// (a call alone always may), else the instant before which it cannot,
    /// for [`Call::wait_at`]. No future, so that an open upstream costs the
    /// loop almost nothing.
    #[inline(always)]
    pub fn admit(&mut self) -> Option<Instant> {
        let r = self.0.as_mut()?;
        r.upstream().admit(r)
    }

    /// How long the attempt waited at the upstream before it started
    /// (none if it did not), and why.
    #[inline(always)]
    pub(super) fn waited(&self) -> (Nanos, Option<WaitReason>) {
        self.0
            .as_ref()
            .map_or((Nanos::NONE, None), |r| (r.waited(), r.wait_reason()))
    }

    /// The upstream; `None`: the call is alone.
    #[inline(always)]
    pub(super) fn upstream(&self) -> Option<&'u Upstream> {
        self.0.as_ref().map(Reservation::upstream)
    }

    /// Whether a success ends the attempt with nothing to tell the upstream.
    #[inline(always)]
    pub(super) fn quiet(&self) -> bool {
        self.0.as_ref().is_none_or(Reservation::success_ends)
    }

    /// Gives the upstream the attempt's outcome: its failure (as its call
    /// classified it), and the next attempt's start (the backoff its call
    /// drew, if it failed).
    #[inline(always)]
    pub(super) fn settle(&mut self, failure: Option<Failure>, until: Option<Instant>) {
        if let Some(r) = &mut self.0 {
            r.upstream().settle(r, failure, until);
        }
    }
}

/// `#[retry(cost = EXPR)]`: what one attempt spends of its upstream's
/// token limit, a `u32` or a `u64` (past `u32`, as much as can be).
#[diagnostic::on_unimplemented(
    message = "`cost = …` must be a `u32` or a `u64` (the tokens one attempt spends), not `{Self}`",
    label = "expected `u32` or `u64`",
    note = "an LLM request's cost is its prompt tokens plus its `max_tokens`: count them as integers, e.g. `cost = request.prompt_tokens + request.max_tokens`"
)]
pub trait IntoCost {
    /// The cost, saturated to what the upstream counts.
    fn into_cost(self) -> u32;
}

impl IntoCost for u32 {
    #[inline(always)]
    fn into_cost(self) -> u32 {
        // `COST_UNKNOWN` is the call without `cost`.
        self.min(COST_UNKNOWN - 1)
    }
}

impl IntoCost for u64 {
    #[inline(always)]
    fn into_cost(self) -> u32 {
        u32::try_from(self).unwrap_or(u32::MAX).into_cost()
    }
}

impl<T: IntoCost + Copy> IntoCost for &T {
    #[inline(always)]
    fn into_cost(self) -> u32 {
        (*self).into_cost()
    }
}

pin_project_lite::pin_project! {
    /// An attempt with its call's upstream in force while it is polled, for
    /// [`current`](crate::upstream::current) in the fns it awaits.
    pub struct WithUpstream<F> {
        #[pin]
        fut: F,
        // The attempt's own handle (and when it left) between polls; the
        // ones it hides during them.
        in_force: InForce,
    }
}

impl<F> WithUpstream<F> {
    /// `fut` with the upstream of `at` in force (a clone of the handle:
    /// no allocation); with none, `fut` as it is.
    #[inline(always)]
    pub fn new(at: &AtUpstream<'_>, fut: F) -> Self {
        let upstream = at.upstream();
        WithUpstream {
            fut,
            in_force: InForce {
                departed: upstream.map_or(0, Upstream::departure),
                handle: upstream.cloned(),
            },
        }
    }
}

impl<F> WithUpstream<F> {
    /// When its attempt left (0: not recorded), for [`as_attempt`].
    #[inline(always)]
    pub(crate) fn departed(&self) -> u64 {
        self.in_force.departed
    }
}

/// `f` with `at`'s upstream in force as it was for the attempt that left
/// at `departed`: an adapter reads its response's headers after the
/// attempt, as that attempt's. Nothing to put in force while the upstream
/// paces nothing (`departed` 0).
#[inline]
pub(crate) fn as_attempt<R>(at: &AtUpstream<'_>, departed: u64, f: impl FnOnce() -> R) -> R {
    let Some(upstream) = at.upstream().filter(|_| departed != 0) else {
        return f();
    };
    let mut in_force = InForce {
        handle: Some(upstream.clone()),
        departed,
    };
    let _in_force = Swap::<InForceUpstream>::new(&mut in_force);
    f()
}

impl<F: Future> Future for WithUpstream<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if this.in_force.handle.is_none() {
            // Alone: the upstream of a call around it stays in force.
            return this.fut.poll(cx);
        }
        let _in_force = Swap::<InForceUpstream>::new(this.in_force);
        this.fut.poll(cx)
    }
}
