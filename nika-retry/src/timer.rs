//! Time limits on an attempt that cost nothing when the attempt is ready at once.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use tokio::time::{Instant, Sleep};

use crate::TimeoutError;

/// `limit` from now, saturating: a limit too long for the clock (say
/// `Duration::MAX` from a config) means about thirty years, not a panic.
pub(crate) fn from_now(limit: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(limit)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

pin_project_lite::pin_project! {
    /// Runs `inner` under a relative limit and/or an absolute deadline, whichever
    /// ends first; expiry yields `Err` with that limit's error.
    ///
    /// Unlike `tokio::time::timeout`, neither the clock nor the timer is touched
    /// unless `inner` is still pending after its first poll: the relative limit
    /// counts from that poll.
    pub(crate) struct Deadline<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Option<Sleep>,
        after: Option<(Duration, TimeoutError)>,
        at: Option<(Instant, TimeoutError)>,
        expired: Option<TimeoutError>,
    }
}

impl<F> Deadline<F> {
    /// `inner` with no limit yet.
    pub(crate) fn new(inner: F) -> Deadline<F> {
        Deadline {
            inner,
            sleep: None,
            after: None,
            at: None,
            expired: None,
        }
    }

    /// Bounds `inner` to `limit` from its first pending poll.
    pub(crate) fn after(mut self, limit: Option<(Duration, TimeoutError)>) -> Deadline<F> {
        self.after = limit;
        self
    }

    /// Bounds `inner` to the instant `deadline`.
    pub(crate) fn at(mut self, deadline: Option<(Instant, TimeoutError)>) -> Deadline<F> {
        self.at = deadline;
        self
    }
}

impl<F: Future> Future for Deadline<F> {
    type Output = Result<F::Output, TimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        if let Poll::Ready(out) = this.inner.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        if this.sleep.is_none() {
            let relative = this.after.take().map(|(d, e)| (from_now(d), e));
            let earliest = match (relative, this.at.take()) {
                (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
                (a, b) => a.or(b),
            };
            let Some((when, error)) = earliest else {
                return Poll::Pending;
            };
            *this.expired = Some(error);
            this.sleep.set(Some(tokio::time::sleep_until(when)));
        }
        match this.sleep.as_pin_mut().map(|s| s.poll(cx)) {
            Some(Poll::Ready(())) => match this.expired.take() {
                Some(error) => Poll::Ready(Err(error)),
                // Polled again after completing: stay pending, as a fused future does.
                None => Poll::Pending,
            },
            _ => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Boundary, Layer};

    fn err(b: Boundary) -> TimeoutError {
        TimeoutError::new(b, Duration::from_secs(1), Layer::Tool)
    }

    #[tokio::test(start_paused = true)]
    async fn ready_inner_wins_even_past_its_deadline() {
        let past = Some((Instant::now(), err(Boundary::Total)));
        assert_eq!(Deadline::new(async { 5 }).at(past).await, Ok(5));
    }

    #[tokio::test(start_paused = true)]
    async fn unlimited_inner_runs_to_completion() {
        let start = Instant::now();
        let inner = tokio::time::sleep(Duration::from_secs(3600));
        assert_eq!(Deadline::new(inner).await, Ok(()));
        assert_eq!(start.elapsed(), Duration::from_secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn the_earlier_limit_wins_with_its_own_error() {
        let start = Instant::now();
        let after = Some((Duration::from_secs(2), err(Boundary::Read)));
        let at = Some((start + Duration::from_secs(3), err(Boundary::Total)));
        let fut = Deadline::new(core::future::pending::<()>())
            .after(after.clone())
            .at(at);
        assert_eq!(fut.await, Err(err(Boundary::Read)));
        assert_eq!(start.elapsed(), Duration::from_secs(2));

        let start = Instant::now();
        let at = Some((start + Duration::from_secs(1), err(Boundary::Total)));
        let fut = Deadline::new(core::future::pending::<()>())
            .after(after)
            .at(at);
        assert_eq!(fut.await, Err(err(Boundary::Total)));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_too_long_for_the_clock_saturates() {
        let after = Some((Duration::MAX, err(Boundary::Attempt)));
        assert_eq!(Deadline::new(async { 1 }).after(after.clone()).await, Ok(1));
        let slow = async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            2
        };
        assert_eq!(Deadline::new(slow).after(after).await, Ok(2));
        assert!(from_now(Duration::MAX) > Instant::now());
    }

    #[tokio::test(start_paused = true)]
    async fn slow_inner_finishing_before_the_limit_succeeds() {
        let start = Instant::now();
        let inner = async {
            tokio::time::sleep(Duration::from_millis(999)).await;
            "done"
        };
        let after = Some((Duration::from_secs(1), err(Boundary::Attempt)));
        assert_eq!(Deadline::new(inner).after(after).await, Ok("done"));
        assert_eq!(start.elapsed(), Duration::from_millis(999));
    }
}
