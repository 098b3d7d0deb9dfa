//! `#[timeout]` alone: one run of the body under its limits, no retry loop.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use tokio::time::Instant;

use super::site::{AttemptLimits, Site};
use crate::ambient::{Alone, AloneMark, ConnectLimit, OnceFrame, StreamFrame, Swap};
use crate::connect;
use crate::time::{Progress, TimeLimited, Total};
use crate::vocab::timeout_error::TimeoutError;

/// Runs `fut` once under `limits` and `total`: what `#[timeout(layer = …)]`
/// without `#[retry]` expands to. There is no loop, so a task scope's
/// `retry:` never applies; a `Total` expiry is permanent, an `attempt` or
/// `read` expiry transient (for an outer layer that retries).
///
/// `total` counts from the call (the first poll of the fn's future, where
/// this runs), as a retry loop's does; `attempt` and `read` from the run's
/// first pending poll, so a run ready at once reads the clock only for `total`.
///
/// `into_error` is `FromTimeout::from_timeout`, named by the expansion at the
/// fn's error type, so that a missing `From<TimeoutError>` is reported there.
#[inline]
pub fn once<F, T, E>(
    site: &'static Site,
    total: Option<Duration>,
    limits: AttemptLimits,
    fut: F,
    into_error: fn(TimeoutError) -> E,
) -> Once<F, E>
where
    F: Future<Output = Result<T, E>>,
{
    let (inner, connect) = limits.arm(fut, site.layer);
    Once {
        inner,
        deadline: Total::from_now(total),
        connect,
        site,
        progress: None,
        start: None,
        streams: false,
        into_error,
    }
}

pin_project_lite::pin_project! {
    /// The future [`once`] returns.
    pub struct Once<F, E> {
        #[pin]
        inner: TimeLimited<F>,
        // `total`, from the call: the instant and the limit.
        deadline: Option<Total>,
        connect: Option<ConnectLimit>,
        site: &'static Site,
        progress: Option<Arc<Progress>>,
        // From the run's first pending poll, for a stream in its body.
        start: Option<Instant>,
        // A stream in the body asked for the frame: it is in force from then on.
        streams: bool,
        into_error: fn(TimeoutError) -> E,
    }
}

impl<F, E> Once<F, E> {
    /// For a fn whose return type names [`Started`](crate::stream::Started):
    /// the frame is in force from the first poll, so the stream the body
    /// awaits finds it at once rather than asking for it and waiting a poll.
    #[inline]
    #[must_use]
    pub fn streamed(self) -> Once<F, E> {
        Once {
            streams: true,
            ..self
        }
    }
}

impl<F, T, E> Future for Once<F, E>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let into_error = *this.into_error;
        let (inner, deadline, progress) = (this.inner, this.deadline, this.progress);
        let (site, start, streams) = (*this.site, this.start, this.streams);
        connect::poll_under(this.connect, site.operation, || {
            let mut poll = |inner: Pin<&mut TimeLimited<F>>| {
                inner.poll_with(cx, deadline, progress, core::convert::identity, |e| {
                    Err(into_error(e))
                })
            };
            let polled = if *streams {
                let frame = StreamFrame {
                    start: *start,
                    read: inner.read_limit(),
                    total: *deadline,
                    layer: site.layer,
                    of: crate::metrics::StreamOf::new(site.operation),
                    site: None,
                };
                let mut frame = (Some(frame), false);
                let _frame = Swap::<OnceFrame>::new(&mut frame);
                poll(inner)
            } else {
                // Until a stream asks (and wakes the task to be polled again),
                // only a mark that it may.
                let mut alone = Alone::default();
                let polled = {
                    let _mark = Swap::<AloneMark>::new(&mut alone);
                    poll(inner)
                };
                *streams = alone.asked;
                polled
            };
            if polled.is_pending() && start.is_none() {
                *start = Some(Instant::now());
            }
            polled
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::site::Overrides;
    use crate::vocab::layer::Layer;
    use crate::vocab::timeout_error::Boundary;

    static SITE: Site = Overrides::NONE.site(Layer::Task, "tests::once");

    fn limits(read: Option<Duration>, attempt: Option<Duration>) -> AttemptLimits {
        AttemptLimits {
            connect: None,
            read,
            attempt,
        }
    }

    fn once<F: Future<Output = Result<u32, TimeoutError>>>(
        site: &'static Site,
        total: Option<Duration>,
        limits: AttemptLimits,
        fut: F,
    ) -> Once<F, TimeoutError> {
        super::once(site, total, limits, fut, core::convert::identity)
    }

    async fn slow(d: Duration) -> Result<u32, TimeoutError> {
        tokio::time::sleep(d).await;
        Ok(1)
    }

    #[tokio::test(start_paused = true)]
    async fn the_smaller_of_total_and_attempt_expires_with_its_boundary() {
        let s = Duration::from_secs;
        let out = once(&SITE, Some(s(5)), limits(None, Some(s(9))), slow(s(60))).await;
        assert_eq!(
            out,
            Err(TimeoutError::new(Boundary::Total, s(5), Layer::Task))
        );
        let out = once(&SITE, Some(s(5)), limits(None, Some(s(2))), slow(s(60))).await;
        assert_eq!(
            out,
            Err(TimeoutError::new(Boundary::Attempt, s(2), Layer::Task))
        );
        let out = once(&SITE, Some(s(5)), limits(None, None), slow(s(4))).await;
        assert_eq!(out, Ok(1));
    }

    #[tokio::test(start_paused = true)]
    async fn total_counts_from_the_call_and_attempt_from_the_first_pending_poll() {
        let s = Duration::from_secs;
        // Made (the fn's first poll), then first polled 3 s later: `total`
        // has 2 s left, `attempt` all of its 4 s.
        let run = once(&SITE, Some(s(5)), limits(None, None), slow(s(4)));
        tokio::time::sleep(s(3)).await;
        let start = Instant::now();
        let total = TimeoutError::new(Boundary::Total, s(5), Layer::Task);
        assert_eq!(run.await, Err(total));
        assert_eq!(start.elapsed(), s(2));

        let run = once(&SITE, None, limits(None, Some(s(4))), slow(s(3)));
        tokio::time::sleep(s(3)).await;
        assert_eq!(run.await, Ok(1));
    }
}
