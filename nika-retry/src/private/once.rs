//! `#[timeout]` alone: one run of the body under its limits, no retry loop.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use super::{Site, Timeouts};
use crate::connect::{self, ConnectLimit};
use crate::context;
use crate::timer::{Deadline, Progress};
use crate::{Boundary, TimeoutError};

/// Runs `fut` once under `limits` and `total`: what `#[timeout(layer = …)]`
/// without `#[retry]` expands to. There is no loop, so a task scope's
/// `retry:` never applies; a `Total` expiry is permanent, an `attempt` or
/// `read` expiry transient (for an outer layer that retries).
///
/// `total` and `attempt` both count from the run's first pending poll, so
/// the smaller of the two is the one that can expire.
///
/// `into_error` is `FromTimeout::from_timeout`, named by the expansion at the
/// fn's error type, so that a missing `From<TimeoutError>` is reported there.
#[inline]
pub fn once<F, T, E>(
    site: &'static Site,
    total: Option<Duration>,
    limits: Timeouts,
    fut: F,
    into_error: fn(TimeoutError) -> E,
) -> Once<F, E>
where
    F: Future<Output = Result<T, E>>,
{
    let whole = match (limits.attempt, total) {
        (Some(attempt), Some(total)) if total < attempt => (Some(total), Boundary::Total),
        (None, Some(total)) => (Some(total), Boundary::Total),
        (attempt, _) => (attempt, Boundary::Attempt),
    };
    Once {
        inner: Deadline::new(fut, site.layer)
            .after(whole.0, whole.1)
            .inactive(limits.read),
        connect: ConnectLimit::new(limits.connect, site.layer),
        site,
        progress: None,
        into_error,
    }
}

pin_project_lite::pin_project! {
    /// The future [`once`] returns.
    pub struct Once<F, E> {
        #[pin]
        inner: Deadline<F>,
        connect: Option<ConnectLimit>,
        site: &'static Site,
        progress: Option<Arc<Progress>>,
        into_error: fn(TimeoutError) -> E,
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
        let expired = |e| Err(into_error(e));
        let polled = match this.connect.as_mut() {
            Some(connect) => {
                let _in_force = context::enter_connect(*connect);
                let polled = this.inner.poll_with(
                    cx,
                    &None,
                    this.progress,
                    core::convert::identity,
                    expired,
                );
                connect.reached |= context::connect_reached();
                polled
            }
            None => {
                this.inner
                    .poll_with(cx, &None, this.progress, core::convert::identity, expired)
            }
        };
        if polled.is_ready() {
            connect::attempt_ended(*this.connect, this.site.operation);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::__private::Overrides;
    use crate::Layer;

    static SITE: Site = Overrides::NONE.site(Layer::Task, "tests::once");

    fn limits(read: Option<Duration>, attempt: Option<Duration>) -> Timeouts {
        Timeouts {
            connect: None,
            read,
            attempt,
        }
    }

    fn once<F: Future<Output = Result<u32, TimeoutError>>>(
        site: &'static Site,
        total: Option<Duration>,
        limits: Timeouts,
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
}
