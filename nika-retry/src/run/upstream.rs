//! `#[retry(upstream = EXPR)]`: each attempt passes its upstream before it
//! starts, and gives it the attempt's outcome after.

use core::time::Duration;

use tokio::time::Instant;

use super::bounds::RetryResult;
use super::call::Call;
use super::timed::TimedCall;
use crate::engine::Failure;
use crate::upstream::{Held, Turn, Upstream};
use crate::{Classify, RetryConfig};

/// An attempt's turn at its upstream, for the generated loop.
pub struct UpstreamTurn<'u>(Turn<'u>);

impl Call {
    /// The next attempt's turn if `upstream` is open: one atomic load, and
    /// no future, so that an open upstream costs the loop almost nothing;
    /// `None` if it must be waited at with [`pass`](Call::pass).
    #[inline(always)]
    pub fn pass_open<'u>(&self, upstream: &'u Upstream) -> Option<UpstreamTurn<'u>> {
        upstream.open().map(UpstreamTurn)
    }

    /// Waits for `upstream` to let the next attempt start; `Held` if the
    /// hold is longer than the call's `max_retry_after`.
    #[inline]
    pub async fn pass<'u>(&self, upstream: &'u Upstream) -> Result<UpstreamTurn<'u>, Held> {
        self.pass_within(upstream, None).await
    }

    #[inline]
    pub(super) async fn pass_within<'u>(
        &self,
        upstream: &'u Upstream,
        deadline: Option<Instant>,
    ) -> Result<UpstreamTurn<'u>, Held> {
        let patience = crate::upstream::Patience {
            cap: self.site.config.max_retry_after,
            deadline,
        };
        upstream.pass(patience).await.map(UpstreamTurn)
    }

    /// [`next`](Call::next) for a call with an upstream: the attempt's
    /// outcome goes to the upstream too.
    #[inline(always)]
    pub fn next_after<R, C>(
        &mut self,
        turn: UpstreamTurn<'_>,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Instant>
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        let (until, failure) = self.next_within(None, turn.0.waited(), result, config, self_type);
        settle(turn, failure, until)
    }
}

impl TimedCall {
    /// [`Call::pass_open`].
    #[inline(always)]
    pub fn pass_open<'u>(&self, upstream: &'u Upstream) -> Option<UpstreamTurn<'u>> {
        self.call.pass_open(upstream)
    }

    /// [`Call::pass`], within the call's `total` deadline.
    #[inline]
    pub async fn pass<'u>(&self, upstream: &'u Upstream) -> Result<UpstreamTurn<'u>, Held> {
        let deadline = self.deadline.map(|total| total.at);
        self.call.pass_within(upstream, deadline).await
    }

    /// [`Call::next_after`], under the call's total deadline.
    #[inline(always)]
    pub fn next_after<R, C>(
        &mut self,
        turn: UpstreamTurn<'_>,
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
        let (until, failure) =
            self.call
                .next_within(deadline, turn.0.waited(), result, config, self_type);
        settle(turn, failure, until)
    }
}

/// Gives `turn` the attempt's outcome: its failure (as its call
/// classified it), and the backoff its call drew (from `until`, the next
/// attempt's start).
#[inline(always)]
fn settle(
    turn: UpstreamTurn<'_>,
    failure: Option<Failure>,
    until: Option<Instant>,
) -> Option<Instant> {
    let backoff = match (&failure, until) {
        (Some(_), Some(until)) => Some(until.saturating_duration_since(Instant::now())),
        _ => None::<Duration>,
    };
    turn.0.settle(failure, backoff);
    until
}
