//! Time limits on an attempt that cost nothing when the attempt is ready at once.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::{Boundary, Layer, TimeoutError};

/// `limit` from now, saturating: a limit too long for the clock (say
/// `Duration::MAX` from a config) means about thirty years, not a panic.
pub(crate) fn from_now(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

/// Which limit the timer was set for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Armed {
    No,
    Relative,
    Absolute,
}

pin_project_lite::pin_project! {
    /// Runs `inner` under a relative limit and/or an absolute deadline, whichever
    /// ends first; expiry yields the `TimeoutError` of that limit.
    ///
    /// Unlike `tokio::time::timeout`, neither the clock nor the timer is touched
    /// unless `inner` is still pending after its first poll: the relative limit
    /// counts from that poll. The error is only built when a limit expires, so
    /// the future holds the limits, not three errors.
    pub(crate) struct Deadline<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Option<Sleep>,
        // The relative limit and the boundary it guards.
        after: Option<Duration>,
        boundary: Boundary,
        layer: Layer,
        armed: Armed,
    }
}

impl<F> Deadline<F> {
    /// `inner`, with no limit yet, for the limits of `layer`.
    pub(crate) fn new(inner: F, layer: Layer) -> Deadline<F> {
        Deadline {
            inner,
            sleep: None,
            after: None,
            boundary: Boundary::Attempt,
            layer,
            armed: Armed::No,
        }
    }

    /// Bounds `inner` to `limit` from its first pending poll, guarding `boundary`.
    pub(crate) fn after(mut self, limit: Option<Duration>, boundary: Boundary) -> Deadline<F> {
        self.after = limit;
        self.boundary = boundary;
        self
    }
}

impl<F: Future> Deadline<F> {
    /// Polls `inner` under the relative limit and under `at`, an absolute
    /// deadline set by a `Total` limit (the instant and the limit). `at` is
    /// passed on each poll rather than stored, so that a retry loop's
    /// attempts share the one its call holds.
    pub(crate) fn poll_until(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        at: Option<(Instant, Duration)>,
    ) -> Poll<Result<F::Output, TimeoutError>> {
        let mut this = self.project();
        if let Poll::Ready(out) = this.inner.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        if *this.armed == Armed::No {
            let relative = this.after.map(from_now);
            let (when, armed) = match (relative, at) {
                (Some(rel), Some((abs, _))) if abs < rel => (abs, Armed::Absolute),
                (Some(rel), _) => (rel, Armed::Relative),
                (None, Some((abs, _))) => (abs, Armed::Absolute),
                (None, None) => return Poll::Pending,
            };
            *this.armed = armed;
            this.sleep.set(Some(tokio::time::sleep_until(when)));
        }
        match this.sleep.as_pin_mut().map(|s| s.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Err(match *this.armed {
                Armed::Absolute => {
                    let total = at.map_or(Duration::ZERO, |(_, limit)| limit);
                    TimeoutError::new(Boundary::Total, total, *this.layer)
                }
                _ => TimeoutError::new(*this.boundary, this.after.unwrap_or_default(), *this.layer),
            })),
            _ => Poll::Pending,
        }
    }
}

impl<F: Future> Future for Deadline<F> {
    type Output = Result<F::Output, TimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_until(cx, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn deadline<F>(inner: F) -> Deadline<F> {
        Deadline::new(inner, Layer::Tool)
    }

    /// Polls `d` to completion under the absolute deadline `at`.
    async fn until<F: Future>(
        d: Deadline<F>,
        at: Option<(Instant, Duration)>,
    ) -> Result<F::Output, TimeoutError> {
        let mut d = std::pin::pin!(d);
        core::future::poll_fn(|cx| d.as_mut().poll_until(cx, at)).await
    }

    #[tokio::test(start_paused = true)]
    async fn ready_inner_wins_even_past_its_deadline() {
        let past = Some((Instant::now(), secs(1)));
        assert_eq!(until(deadline(async { 5 }), past).await, Ok(5));
    }

    #[tokio::test(start_paused = true)]
    async fn unlimited_inner_runs_to_completion() {
        let start = Instant::now();
        let inner = tokio::time::sleep(secs(3600));
        assert_eq!(deadline(inner).await, Ok(()));
        assert_eq!(start.elapsed(), secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn the_earlier_limit_wins_with_its_own_error() {
        let start = Instant::now();
        let fut = deadline(core::future::pending::<()>()).after(Some(secs(2)), Boundary::Read);
        let fut = until(fut, Some((start + secs(3), secs(3))));
        let read = TimeoutError::new(Boundary::Read, secs(2), Layer::Tool);
        assert_eq!(fut.await, Err(read));
        assert_eq!(start.elapsed(), secs(2));

        let start = Instant::now();
        let fut = deadline(core::future::pending::<()>()).after(Some(secs(2)), Boundary::Read);
        let fut = until(fut, Some((start + secs(1), secs(9))));
        let total = TimeoutError::new(Boundary::Total, secs(9), Layer::Tool);
        assert_eq!(fut.await, Err(total));
        assert_eq!(start.elapsed(), secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_too_long_for_the_clock_saturates() {
        let limit = Some(Duration::MAX);
        assert_eq!(
            deadline(async { 1 }).after(limit, Boundary::Attempt).await,
            Ok(1)
        );
        let slow = async {
            tokio::time::sleep(secs(3600)).await;
            2
        };
        assert_eq!(deadline(slow).after(limit, Boundary::Attempt).await, Ok(2));
        assert!(from_now(Duration::MAX) > Instant::now());
    }

    #[tokio::test(start_paused = true)]
    async fn slow_inner_finishing_before_the_limit_succeeds() {
        let start = Instant::now();
        let inner = async {
            tokio::time::sleep(Duration::from_millis(999)).await;
            "done"
        };
        let fut = deadline(inner).after(Some(secs(1)), Boundary::Attempt);
        assert_eq!(fut.await, Ok("done"));
        assert_eq!(start.elapsed(), Duration::from_millis(999));
    }
}
