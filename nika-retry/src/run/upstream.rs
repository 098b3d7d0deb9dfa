//! `#[retry(upstream = EXPR)]`: each attempt passes its upstream before it
//! starts, has it in force for [`current`](crate::upstream::current) while
//! it runs, and gives it the attempt's outcome after. An expression that is
//! `None` leaves the call alone: no pass, no outcome, nothing in force.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use tokio::time::Instant;

use super::call::{Call, Deadline};
use crate::ambient::{InForceUpstream, Swap};
use crate::engine::Failure;
use crate::time::Nanos;
use crate::upstream::{Held, Turn, Upstream};

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

    /// How long the attempt waited at the upstream before it started.
    #[inline(always)]
    pub(super) fn waited(&self) -> Nanos {
        self.0.as_ref().map_or(Nanos::NONE, Turn::waited)
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

pin_project_lite::pin_project! {
    /// An attempt with its call's upstream in force while it is polled, for
    /// [`current`](crate::upstream::current) in the fns it awaits.
    pub struct WithUpstream<F> {
        #[pin]
        fut: F,
        // The attempt's own handle between polls; the one it hides during them.
        handle: Option<Upstream>,
    }
}

impl<F> WithUpstream<F> {
    /// `fut` with the upstream of `turn` in force (a clone of the handle:
    /// no allocation); with none, `fut` as it is.
    #[inline(always)]
    pub fn new(turn: &UpstreamTurn<'_>, fut: F) -> Self {
        WithUpstream {
            fut,
            handle: turn.0.as_ref().map(|turn| turn.upstream().clone()),
        }
    }
}

impl<F: Future> Future for WithUpstream<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if this.handle.is_none() {
            // Alone: the upstream of a call around it stays in force.
            return this.fut.poll(cx);
        }
        let _in_force = Swap::<InForceUpstream>::new(this.handle);
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
    /// than the call's `max_retry_after`.
    #[inline]
    pub async fn pass(&self, turn: &mut UpstreamTurn<'_>) -> Result<(), Held> {
        let patience = crate::upstream::Patience {
            cap: self.site.config.max_retry_after,
            deadline: self.timing.deadline(),
        };
        if let Some(turn) = &mut turn.0 {
            // The turn it replaces is idle: its drop does nothing.
            *turn = turn.upstream().pass(patience).await?;
        }
        Ok(())
    }
}
