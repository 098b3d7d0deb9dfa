//! `#[retry(upstream = EXPR)]`: each attempt passes its upstream before it
//! starts, has it in force for [`current`](crate::upstream::current) while
//! it runs, and gives it the attempt's outcome after. An expression that is
//! `None` leaves the call alone: no pass, no outcome, nothing in force.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use tokio::time::Instant;

use super::call::{Call, Deadline};
use crate::ambient::{InForce, InForceUpstream, Swap};
use crate::engine::Failure;
use crate::events::WaitReason;
use crate::time::Nanos;
use crate::upstream::{COST_UNKNOWN, Held, Turn, Upstream};

/// A call's turn at its upstream, for the generated loop: kept for the
/// whole call (a probe's turn, dropped with its cancelled call, passes
/// on), idle between attempts, so that an attempt at an open upstream
/// builds nothing and carries nothing new across its `await`. `None`:
/// the expression named no upstream, and the call is alone.
pub struct UpstreamTurn<'u>(Option<Turn<'u>>);

impl<'u> UpstreamTurn<'u> {
    /// The turn of a call at `upstream`, idle until an attempt waits.
    #[inline(always)]
    pub fn new(upstream: Option<&'u Upstream>) -> Self {
        UpstreamTurn(upstream.map(Turn::idle))
    }

    /// The turn of a call at `upstream` whose attempts each spend `cost`
    /// of its token limit (`cost = …`, evaluated once per call, through
    /// [`IntoCost`]).
    #[inline(always)]
    pub fn with_cost(upstream: Option<&'u Upstream>, cost: u32) -> Self {
        UpstreamTurn(upstream.map(|upstream| Turn::idle(upstream).with_cost(cost)))
    }

    /// How long the attempt waited at the upstream before it started, and why.
    #[inline(always)]
    pub(super) fn waited(&self) -> Waited {
        self.0.as_ref().map_or(Waited::NONE, |turn| Waited {
            span: turn.waited(),
            reason: turn.wait_reason(),
        })
    }

    /// The upstream of the turn; `None`: the call is alone.
    #[inline(always)]
    pub(super) fn upstream(&self) -> Option<&'u Upstream> {
        self.0.as_ref().map(Turn::upstream)
    }

    /// Whether a success ends the turn with nothing to tell the upstream.
    #[inline(always)]
    pub(super) fn success_ends(&self) -> bool {
        self.0.as_ref().is_none_or(Turn::success_ends)
    }

    /// Gives the turn the attempt's outcome: its failure (as its call
    /// classified it), and the next attempt's start (the backoff its call
    /// drew, if it failed).
    #[inline(always)]
    pub(super) fn settle(&mut self, failure: Option<Failure>, until: Option<Instant>) {
        if let Some(turn) = &mut self.0 {
            turn.settle(failure, until);
        }
    }
}

/// How long an attempt waited at its upstream, and why: for its events.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waited {
    /// None if it did not wait.
    pub(crate) span: Nanos,
    pub(crate) reason: Option<WaitReason>,
}

impl Waited {
    /// An attempt that did not wait (a call without an upstream).
    pub(crate) const NONE: Waited = Waited {
        span: Nanos::NONE,
        reason: None,
    };
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
    /// `fut` with the upstream of `turn` in force (a clone of the handle:
    /// no allocation); with none, `fut` as it is.
    #[inline(always)]
    pub fn new(turn: &UpstreamTurn<'_>, fut: F) -> Self {
        let upstream = turn.0.as_ref().map(Turn::upstream);
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

/// `f` with `turn`'s upstream in force as it was for the attempt that left
/// at `departed`: an adapter reads its response's headers after the
/// attempt, as that attempt's. Nothing to put in force while the upstream
/// paces nothing (`departed` 0).
#[inline]
pub(crate) fn as_attempt<R>(turn: &UpstreamTurn<'_>, departed: u64, f: impl FnOnce() -> R) -> R {
    let Some(turn) = turn.0.as_ref().filter(|_| departed != 0) else {
        return f();
    };
    let mut in_force = InForce {
        handle: Some(turn.upstream().clone()),
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

impl<D: Deadline> Call<D> {
    /// Whether the next attempt may start at once: one atomic load, and
    /// no future, so that an open upstream costs the loop almost nothing;
    /// if not, it waits with [`pass`](Call::pass).
    #[inline(always)]
    pub fn pass_open(&self, turn: &UpstreamTurn<'_>) -> bool {
        turn.0.as_ref().is_none_or(|turn| turn.upstream().open())
    }

    /// Waits for the upstream to let the next attempt start, within the
    /// call's `total` deadline if it has one; `Held` if the hold is longer
    /// than the call's `max_retry_after`. The admission that needs no wait
    /// is made before the first `await`, so that only the boxed wait's
    /// handle lives across it, in the future of every fn that names an
    /// upstream.
    #[inline]
    pub async fn pass(&self, turn: &mut UpstreamTurn<'_>) -> Result<(), Held> {
        let Some(turn) = &mut turn.0 else {
            return Ok(());
        };
        let (upstream, cost) = (turn.upstream(), turn.cost());
        // The turn it replaces is idle: its drop does nothing.
        *turn = match upstream.admit_turn(cost) {
            Ok(admitted) => admitted,
            Err(reserved) => {
                let patience = crate::upstream::Patience {
                    cap: self.site.config.max_retry_after,
                    deadline: self.timing.deadline(),
                };
                let admitted = upstream.wait_boxed(patience, cost, reserved).await;
                // Held: the call ends here, after the attempts it made. Only
                // with metrics does the future keep `self` across the wait.
                #[cfg(feature = "opentelemetry")]
                if admitted.is_err() {
                    self.ended_held();
                }
                admitted?
            }
        };
        Ok(())
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
