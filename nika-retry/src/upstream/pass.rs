//! An attempt at an upstream: the wait before it starts ([`Upstream::pass`])
//! and the report of how it ended ([`Ticket`]).

use core::time::Duration;

use tokio::time::Instant;

use super::{Backing, Held, HoldReason, PROBE_LEASE, Turn, Upstream, fire};
use crate::ErrorCategory;

/// One attempt's pass through an upstream, from [`Upstream::pass`] or
/// [`Upstream::open_pass`]: report how the attempt ended with
/// [`succeeded`](Ticket::succeeded) or [`failed`](Ticket::failed). A probe's
/// ticket dropped unreported passes the probe's turn on.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::ErrorCategory;
/// use nika_retry::upstream::Upstream;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let upstream = Upstream::new("openai/gpt-4o");
/// let ticket = upstream.pass(None, Duration::from_secs(60)).await.unwrap();
/// // The attempt met a 429 with `Retry-After: 20`: every caller waits.
/// ticket.failed(ErrorCategory::RateLimited, Some(Duration::from_secs(20)), None);
/// assert_eq!(upstream.held_for(), Some(Duration::from_secs(20)));
/// # }
/// ```
#[must_use = "report how the attempt ended"]
#[derive(Debug)]
pub struct Ticket<'a> {
    upstream: &'a Upstream,
    probe: bool,
    waited: Duration,
}

impl Upstream {
    /// Whether nothing is in force (no hold, no probe owed, no allowance):
    /// one atomic load for the in-process store; a shared store is always
    /// asked.
    #[inline]
    pub fn is_open(&self) -> bool {
        match &self.inner.backing {
            Backing::Local(local) => local.open(),
            Backing::Shared(_) => false,
        }
    }

    /// The ticket of an attempt at an upstream [`is_open`](Self::is_open)
    /// said was open.
    ///
    /// ```
    /// # let upstream = nika_retry::upstream::Upstream::new("a");
    /// assert!(upstream.is_open());
    /// upstream.open_pass().succeeded();
    /// ```
    #[inline]
    pub fn open_pass(&self) -> Ticket<'_> {
        Ticket {
            upstream: self,
            probe: false,
            waited: Duration::ZERO,
        }
    }

    /// Waits until an attempt may start: while the upstream is held, for
    /// its end; then, as the probe, at once, or after the probe's outcome,
    /// spread with jitter over a tenth of the hold (at most 1 s).
    ///
    /// Fails at once with [`Held`] rather than wait for a hold that ends
    /// past `deadline` (the call's `total`) or is longer than `max_wait`
    /// (the call's `max_retry_after`). A store that does not answer lets
    /// the attempt start.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::{HoldReason, Upstream};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let upstream = Upstream::new("a");
    /// upstream.hold_for(Duration::from_secs(90));
    /// let held = upstream.pass(None, Duration::from_secs(60)).await.unwrap_err();
    /// assert_eq!((held.left(), held.reason()), (Duration::from_secs(90), HoldReason::ByHand));
    /// let ticket = upstream.pass(None, Duration::from_secs(120)).await.unwrap();
    /// assert_eq!(ticket.waited(), Duration::from_secs(90));
    /// ticket.succeeded();
    /// assert!(upstream.is_open());
    /// # }
    /// ```
    pub async fn pass(
        &self,
        deadline: Option<Instant>,
        max_wait: Duration,
    ) -> Result<Ticket<'_>, Held> {
        let start = Instant::now();
        let mut longest = Duration::ZERO;
        let mut last = HoldReason::ServerHint;
        loop {
            let notified = self.inner.probe_done.notified();
            tokio::pin!(notified);
            // Registered before asking, so a probe that ends in between still wakes it.
            notified.as_mut().enable();
            let turn = match &self.inner.backing {
                Backing::Local(local) => Ok(local.turn(PROBE_LEASE)),
                Backing::Shared(store) => store.turn(&self.inner.name, PROBE_LEASE).await,
            };
            let now = Instant::now();
            let beyond = |left: Duration| {
                deadline.is_some_and(|d| now.checked_add(left).is_none_or(|end| end > d))
            };
            match turn {
                Ok(Turn::Go) | Err(_) => {
                    let spread = (longest / 10).min(Duration::from_secs(1));
                    if !spread.is_zero() {
                        let jitter = spread.mul_f64(fastrand::f64());
                        tokio::time::sleep(jitter).await;
                    }
                    return Ok(self.ticket(false, start));
                }
                Ok(Turn::Probe) => return Ok(self.ticket(true, start)),
                Ok(Turn::Held { left, reason }) => {
                    if left > max_wait || beyond(left) {
                        return Err(Held::new(self.inner.name.clone(), left, reason));
                    }
                    longest = longest.max(left);
                    last = reason;
                    tokio::time::sleep(left).await;
                }
                Ok(Turn::Spent { left }) => {
                    self.hold_now(
                        left.max(Duration::from_millis(1)),
                        HoldReason::RateLimitHeaders,
                    );
                }
                Ok(Turn::Wait { lease }) => {
                    let until = crate::time::later(now, lease);
                    let until = deadline.map_or(until, |d| d.min(until));
                    if until <= now {
                        return Err(Held::new(self.inner.name.clone(), lease, last));
                    }
                    let _ = tokio::time::timeout_at(until, notified).await;
                }
            }
        }
    }

    fn ticket(&self, probe: bool, start: Instant) -> Ticket<'_> {
        Ticket {
            upstream: self,
            probe,
            waited: start.elapsed(),
        }
    }
}

impl Ticket<'_> {
    /// How long the attempt waited at the upstream before it could start.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// Whether the attempt is the probe, the first after a hold.
    pub fn is_probe(&self) -> bool {
        self.probe
    }

    /// The attempt succeeded: the breaker's count starts again, a probe
    /// releases the others.
    pub fn succeeded(mut self) {
        self.upstream.breaker_reset();
        self.end(true);
    }

    /// The attempt failed with an error of `category`: a server hint
    /// (`hint`) holds the upstream for it; a `RateLimited` failure without
    /// one holds it for the `backoff` its call drew before retrying (none if
    /// the call gives up); `Transient` counts towards the breaker. Nothing
    /// else holds; a probe that failed without pushback releases the others.
    pub fn failed(
        mut self,
        category: ErrorCategory,
        hint: Option<Duration>,
        backoff: Option<Duration>,
    ) {
        let hold = match (hint, category) {
            (Some(hint), _) => Some((hint, HoldReason::ServerHint)),
            (None, ErrorCategory::RateLimited) => backoff.map(|b| (b, HoldReason::ServerHint)),
            _ => None,
        };
        let breaker = match category {
            ErrorCategory::Transient => self.upstream.breaker_failed(),
            _ => {
                self.upstream.breaker_reset();
                None
            }
        };
        let mut pushed = false;
        for (hold, reason) in hold
            .into_iter()
            .chain(breaker.map(|b| (b, HoldReason::Breaker)))
        {
            if !hold.is_zero() {
                self.upstream.hold_now(hold, reason);
                pushed = true;
            }
        }
        self.end(!pushed);
    }

    fn end(&mut self, cleared: bool) {
        if !core::mem::take(&mut self.probe) {
            return;
        }
        let upstream = self.upstream;
        match &upstream.inner.backing {
            Backing::Local(local) => local.end_probe(cleared),
            // Not answered at once, it finishes on the runtime; without one, the lease expires.
            Backing::Shared(store) => fire(store.end_probe(&upstream.inner.name, cleared)),
        }
        upstream.inner.probe_done.notify_waiters();
    }
}

impl Drop for Ticket<'_> {
    /// A probe dropped unreported (its call cancelled) passes its turn on.
    fn drop(&mut self) {
        self.end(false);
    }
}
