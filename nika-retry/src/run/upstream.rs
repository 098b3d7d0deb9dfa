//! `#[retry(upstream = EXPR)]`: each attempt passes its upstream before it
//! starts, and gives it the attempt's outcome after.

use tokio::time::Instant;

use super::bounds::RetryResult;
use super::call::Call;
use super::timed::TimedCall;
use crate::engine::Failure;
use crate::events::WaitReason;
use crate::time::Nanos;
use crate::upstream::{COST_UNKNOWN, Held, Turn, Upstream};
use crate::{Classify, RetryConfig};

/// A call's turn at its upstream, for the generated loop: kept for the
/// whole call (a probe's turn, dropped with its cancelled call, passes
/// on), idle between attempts, so that an attempt at an open upstream
/// builds nothing and carries nothing new across its `await`.
pub struct UpstreamTurn<'u>(Turn<'u>);

impl<'u> UpstreamTurn<'u> {
    /// The turn of a call at `upstream`, idle until an attempt waits.
    #[inline(always)]
    pub fn new(upstream: &'u Upstream) -> Self {
        UpstreamTurn(Turn::idle(upstream))
    }

    /// The turn of a call at `upstream` whose attempts each spend `cost`
    /// of its token limit (`cost = …`, evaluated once per call, through
    /// [`IntoCost`]).
    #[inline(always)]
    pub fn with_cost(upstream: &'u Upstream, cost: u32) -> Self {
        UpstreamTurn(Turn::idle(upstream).with_cost(cost))
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

    #[inline(always)]
    fn of(turn: &Turn<'_>) -> Waited {
        Waited {
            span: turn.waited(),
            reason: turn.wait_reason(),
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

impl Call {
    /// Whether the next attempt may start at once: one atomic load, and
    /// no future, so that an open upstream costs the loop almost nothing;
    /// if not, it waits with [`pass`](Call::pass).
    #[inline(always)]
    pub fn pass_open(&self, turn: &UpstreamTurn<'_>) -> bool {
        turn.0.upstream().open()
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
        // The turn it replaces is idle: its drop does nothing.
        let cost = turn.0.cost();
        turn.0 = turn.0.upstream().pass_costing(patience, cost).await?;
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
        let waited = Waited::of(&turn.0);
        if result.error().is_none() && turn.0.success_ends() {
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
        let waited = Waited::of(&turn.0);
        if result.error().is_none() && turn.0.success_ends() {
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
    turn.0.settle(failure, until);
    until
}
