//! `#[retry(upstream = EXPR)]`: each attempt passes its upstream before it
//! starts, has it in force for [`current`](crate::upstream::current) while
//! it runs, and gives it the attempt's outcome after. An expression that is
//! `None` leaves the call alone: no pass, no outcome, nothing in force.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use tokio::time::Instant;

use super::bounds::RetryResult;
use super::call::Call;
use super::timed::TimedCall;
use crate::ambient::{InForceUpstream, Swap};
use crate::engine::Failure;
use crate::time::Nanos;
use crate::upstream::{Held, Turn, Upstream};
use crate::{Classify, RetryConfig};

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

impl Call {
    /// Whether the next attempt may start at once: one atomic load, and
    /// no future, so that an open upstream costs the loop almost nothing;
    /// if not, it waits with [`pass`](Call::pass).
    #[inline(always)]
    pub fn pass_open(&self, turn: &UpstreamTurn<'_>) -> bool {
        turn.0.as_ref().is_none_or(|turn| turn.upstream().open())
    }

    /// Waits for the upstream to let the next attempt start; `Held` if the
    /// hold is longer than the call's `max_retry_after`.
    #[inline]
    pub async fn pass(&self, turn: &mut UpstreamTurn<'_>) -> Result<(), Held> {
        self.pass_within(turn, None).await
    }

    #[inline]
    pub(super) async fn pass_within(
        &self,
        turn: &mut UpstreamTurn<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), Held> {
        let patience = crate::upstream::Patience {
            cap: self.site.config.max_retry_after,
            deadline,
        };
        if let Some(turn) = &mut turn.0 {
            // The turn it replaces is idle: its drop does nothing.
            *turn = turn.upstream().pass(patience).await?;
        }
        Ok(())
    }

    /// [`next`](Call::next) for a call with an upstream: the attempt's
    /// outcome goes to the upstream too.
    #[inline(always)]
    pub fn next_after<R, C>(
        &mut self,
        turn: &mut UpstreamTurn<'_>,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Instant>
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        let Some(at) = &turn.0 else {
            return self.next(result, config, self_type);
        };
        let waited = at.waited();
        if result.error().is_none() && at.success_ends() {
            // The common case apart: no failure to carry to `settle`, no
            // backoff to draw for it.
            return self.next_within(None, waited, result, config, self_type).0;
        }
        let (until, failure) = self.next_within(None, waited, result, config, self_type);
        settle(turn, failure, until)
    }
}

impl TimedCall {
    /// [`Call::pass_open`].
    #[inline(always)]
    pub fn pass_open(&self, turn: &UpstreamTurn<'_>) -> bool {
        self.call.pass_open(turn)
    }

    /// [`Call::pass`], within the call's `total` deadline.
    #[inline]
    pub async fn pass(&self, turn: &mut UpstreamTurn<'_>) -> Result<(), Held> {
        let deadline = self.deadline.map(|total| total.at);
        self.call.pass_within(turn, deadline).await
    }

    /// [`Call::next_after`], under the call's total deadline.
    #[inline(always)]
    pub fn next_after<R, C>(
        &mut self,
        turn: &mut UpstreamTurn<'_>,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Instant>
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        let deadline = self.deadline;
        let Some(at) = &turn.0 else {
            return self
                .call
                .next_within(deadline, Nanos::NONE, result, config, self_type)
                .0;
        };
        let waited = at.waited();
        if result.error().is_none() && at.success_ends() {
            let (until, _) = self
                .call
                .next_within(deadline, waited, result, config, self_type);
            return until;
        }
        let (until, failure) = self
            .call
            .next_within(deadline, waited, result, config, self_type);
        settle(turn, failure, until)
    }
}

/// Gives `turn` the attempt's outcome: its failure (as its call
/// classified it), and the next attempt's start (the backoff its call
/// drew, if it failed).
#[inline(always)]
fn settle(
    turn: &mut UpstreamTurn<'_>,
    failure: Option<Failure>,
    until: Option<Instant>,
) -> Option<Instant> {
    if let Some(turn) = &mut turn.0 {
        turn.settle(failure, until);
    }
    until
}
