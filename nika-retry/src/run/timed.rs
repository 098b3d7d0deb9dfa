//! A call of a fn with `#[retry]` and `#[timeout]` ([`TimedCall`], a
//! [`Call`] with its [`Timing`]), and [`Timed`], one of its attempts under
//! its time limits.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use tokio::time::Instant;

use super::state::{Call, Deadline};
use crate::ambient::{ConnectLimit, Frame, Swap};
use crate::connect;
use crate::time::{Progress, TimeLimited, Total};
use crate::vocab::timeout_error::TimeoutError;

/// What the time limits of a call with `#[timeout]` share across its
/// attempts: the `D` of its [`Call`].
#[derive(Debug)]
pub struct Timing {
    /// The total deadline, and the limit it came from (for the error).
    pub(super) deadline: Option<Total>,
    /// Tells the attempts' own wake-ups from others', for `read`: allocated
    /// once an attempt with a `read` limit has gone pending.
    progress: Option<Arc<Progress>>,
}

impl Timing {
    /// The share of a call bounded in all by `total`, if given.
    #[inline(always)]
    pub(super) fn new(total: Option<Duration>) -> Timing {
        Timing {
            deadline: Total::from_now(total),
            progress: None,
        }
    }
}

impl Deadline for Timing {
    #[inline(always)]
    fn deadline(&self) -> Option<Instant> {
        self.deadline.map(|total| total.at)
    }
}

/// One call of a fn with `#[retry]` and `#[timeout]`: a `Call` whose
/// attempts share its `Timing`.
pub type TimedCall = Call<Timing>;

pin_project_lite::pin_project! {
    /// One attempt under its time limits; an expiry becomes the fn's error.
    pub struct Timed<'a, F, E> {
        #[pin]
        pub(super) inner: TimeLimited<F>,
        pub(super) connect: Option<ConnectLimit>,
        // For its total deadline, its budget and its attempt's context.
        pub(super) call: &'a mut TimedCall,
        // A fn pointer rather than an `E: FromTimeout` bound here or the fn
        // item the expansion names (which would save its 8 bytes), so that
        // a missing `From<TimeoutError>` is reported once, where the
        // expansion names `FromTimeout::from_timeout`: a bound on `Fn`
        // would check the fn item's own bound again at each use.
        pub(super) into_error: fn(TimeoutError) -> E,
    }
}

impl<F, T, E> Future for Timed<'_, F, E>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let into_error = *this.into_error;
        let Call {
            state: call,
            timing,
        } = this.call;
        let inner = this.inner;
        connect::poll_under(this.connect, call.site.operation, || {
            let framed = call.streams;
            let mut frame = if framed {
                call.frame(inner.read_limit(), timing.deadline)
            } else {
                None
            };
            let _frame = framed.then(|| Swap::<Frame>::new(&mut frame));
            let entered = call.enter(framed);
            let call = &mut *entered.call;
            let timed_out = &mut call.timed_out;
            let Timing { deadline, progress } = timing;
            let polled = inner.poll_with(cx, deadline, progress, core::convert::identity, |e| {
                *timed_out = true;
                Err(into_error(e))
            });
            if polled.is_pending() {
                call.went_pending();
            }
            polled
        })
    }
}
