//! `#[retry(upstream = EXPR)]`: each attempt passes its upstream before it
//! starts, and gives it the attempt's outcome after
//! ([`Call::next_after`](super::call::Call::next_after)).

use tokio::time::Instant;

use super::call::{Call, Deadline};
use crate::engine::Failure;
use crate::time::Nanos;
use crate::upstream::{Held, Turn, Upstream};

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

    /// How long the attempt waited at the upstream before it started.
    #[inline(always)]
    pub(super) fn waited(&self) -> Nanos {
        self.0.waited()
    }

    /// Whether a success ends the turn with nothing to tell the upstream.
    #[inline(always)]
    pub(super) fn success_ends(&self) -> bool {
        self.0.success_ends()
    }

    /// Gives the turn the attempt's outcome: its failure (as its call
    /// classified it), and the next attempt's start (the backoff its call
    /// drew, if it failed).
    #[inline(always)]
    pub(super) fn settle(&mut self, failure: Option<Failure>, until: Option<Instant>) {
        self.0.settle(failure, until);
    }
}

impl<D: Deadline> Call<D> {
    /// Whether the next attempt may start at once: one atomic load, and
    /// no future, so that an open upstream costs the loop almost nothing;
    /// if not, it waits with [`pass`](Call::pass).
    #[inline(always)]
    pub fn pass_open(&self, turn: &UpstreamTurn<'_>) -> bool {
        turn.0.upstream().open()
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
        // The turn it replaces is idle: its drop does nothing.
        turn.0 = turn.0.upstream().pass(patience).await?;
        Ok(())
    }
}
