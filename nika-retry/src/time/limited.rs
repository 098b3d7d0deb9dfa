//! [`TimeLimited`]: a future under the time limits of `#[timeout]`, which
//! cost nothing when it is ready at once: on its whole duration (`attempt`,
//! `connect`), on inactivity (`read`), and an absolute deadline (`total`).
//! What an expiry reports is [`TimeoutError`], in `timeout_error.rs`.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Waker;

use futures_task::{ArcWake, waker_ref};
use tokio::time::{Instant, Sleep};

use super::{Nanos, Total};
use crate::vocab::layer::Layer;
use crate::vocab::timeout_error::{Boundary, TimeoutError};

/// What tells an attempt's own wake-ups from everyone else's, for `read`:
/// the attempt is polled with a waker of its own that notes each wake-up
/// and passes it on to the task's waker. A wake-up of a sibling in a
/// `join!` reaches the task's waker only, so it is not the attempt's progress.
///
/// One per call of an annotated fn, allocated once an attempt with a `read`
/// limit has gone pending, and reused by its later attempts.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    woken: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Progress {
    /// The task's waker, to pass the attempt's wake-ups on to.
    fn register(&self, task: &Waker) {
        let mut slot = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if !slot.as_ref().is_some_and(|w| w.will_wake(task)) {
            *slot = Some(task.clone());
        }
    }

    /// Whether the attempt was woken since the last call.
    fn take_woken(&self) -> bool {
        self.woken.swap(false, Ordering::AcqRel)
    }
}

impl ArcWake for Progress {
    fn wake_by_ref(this: &Arc<Self>) {
        this.woken.store(true, Ordering::Release);
        // Cloned out, so that the task's waker does not run under the lock.
        let task = this
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(task) = task {
            task.wake();
        }
    }
}

pin_project_lite::pin_project! {
    /// Runs `inner` under up to three limits, whichever expires first; expiry
    /// yields the `TimeoutError` of that limit:
    ///
    /// - a limit on its whole duration (`attempt`, `connect`), from its
    ///   first pending poll;
    /// - `read`, an inactivity limit: it expires only after `inner` has gone
    ///   that long without a wake-up of its own (see [`Progress`]);
    /// - an absolute deadline passed on each poll (`total`).
    ///
    /// Unlike `tokio::time::timeout`, neither the clock nor the timer is
    /// touched unless `inner` is still pending after its first poll. One
    /// timer serves the three limits: set for the earliest, and when it
    /// fires early because the attempt made progress since, set again for
    /// the new end rather than on every wake-up. The error is only built
    /// when a limit expires, so the future holds the limits, not errors.
    pub(crate) struct TimeLimited<F> {
        #[pin]
        inner: F,
        #[pin]
        sleep: Option<Sleep>,
        // The limit on the whole duration and the boundary it guards.
        whole: Nanos,
        boundary: Boundary,
        read: Nanos,
        layer: Layer,
        // From the first pending poll: when it was, and the last progress
        // after it (with `read`).
        started: Option<Instant>,
        last: Nanos,
    }
}

impl<F> TimeLimited<F> {
    /// `inner`, with no limit yet, for the limits of `layer`.
    pub(crate) fn new(inner: F, layer: Layer) -> TimeLimited<F> {
        TimeLimited {
            inner,
            sleep: None,
            whole: Nanos::NONE,
            boundary: Boundary::Attempt,
            read: Nanos::NONE,
            layer,
            started: None,
            last: Nanos::NONE,
        }
    }

    /// Bounds `inner` to `limit` from its first pending poll, guarding `boundary`.
    pub(crate) fn after(mut self, limit: Option<Duration>, boundary: Boundary) -> TimeLimited<F> {
        self.whole = Nanos::new(limit);
        self.boundary = boundary;
        self
    }

    /// Cuts `inner` once it has gone `limit` without progress.
    pub(crate) fn inactive(mut self, limit: Option<Duration>) -> TimeLimited<F> {
        self.read = Nanos::new(limit);
        self
    }

    /// The `read` limit: what a stream started in the attempt carries past it.
    pub(crate) fn read_limit(&self) -> Option<Duration> {
        self.read.get()
    }
}

impl<F: Future> TimeLimited<F> {
    /// Polls `inner` under its limits and under `at`, an absolute deadline
    /// set by a `Total` limit (the instant and the limit). `at` is passed on
    /// each poll rather than stored, so that a retry loop's attempts share
    /// the one its call holds; `progress` likewise, the call's [`Progress`]
    /// (allocated here on first need when there is a `read` limit).
    ///
    /// The first poll of an attempt that needs no waker of its own (no
    /// `read`, or no attempt of the call has gone pending yet) is inlined
    /// into the caller: an attempt ready there costs one poll and two
    /// tests, the rest is out of line.
    #[inline(always)]
    pub(crate) fn poll_until(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        at: &Option<Total>,
        progress: &mut Option<Arc<Progress>>,
    ) -> Poll<Result<F::Output, TimeoutError>> {
        self.poll_with(cx, at, progress, Ok, Err)
    }

    /// [`poll_until`](TimeLimited::poll_until), with the output of `inner`
    /// given to `ok` and an expiry to `expired`: for an `inner` whose output
    /// holds its own error, a ready attempt's output goes out as it came,
    /// with no rewrapping to copy.
    #[inline(always)]
    pub(crate) fn poll_with<O>(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        at: &Option<Total>,
        progress: &mut Option<Arc<Progress>>,
        ok: impl FnOnce(F::Output) -> O,
        expired: impl FnOnce(TimeoutError) -> O,
    ) -> Poll<O> {
        let this = self.as_mut().project();
        // `started` is set by the first poll that finds `inner` pending.
        let polled = if this.started.is_none() && (this.read.is_none() || progress.is_none()) {
            match this.inner.poll(cx) {
                Poll::Ready(out) => return Poll::Ready(ok(out)),
                Poll::Pending => self.went_pending(cx, at, progress),
            }
        } else {
            self.poll_again(cx, at, progress)
        };
        polled.map(|out| out.map_or_else(expired, ok))
    }

    /// A poll after the attempt's first, or the first of a later attempt
    /// of a call whose `read` limit has its [`Progress`] already.
    fn poll_again(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        at: &Option<Total>,
        progress: &mut Option<Arc<Progress>>,
    ) -> Poll<Result<F::Output, TimeoutError>> {
        let this = self.as_mut().project();
        // Under `read`, once the call has its `Progress` (a later attempt
        // reuses it from its first poll), the attempt has its own waker.
        let polled = match progress.as_ref().filter(|_| this.read.is_some()) {
            Some(shared) => {
                shared.register(cx.waker());
                if shared.take_woken()
                    && let Some(started) = *this.started
                {
                    *this.last = Nanos::between(started, Instant::now());
                }
                this.inner
                    .poll(&mut Context::from_waker(&waker_ref(shared)))
            }
            None => this.inner.poll(cx),
        };
        match polled {
            Poll::Ready(out) => Poll::Ready(Ok(out)),
            Poll::Pending if this.started.is_none() => self.went_pending(cx, at, progress),
            Poll::Pending => self.wait(cx, at),
        }
    }

    /// The attempt's first poll found `inner` pending: starts the clock of
    /// its limits and arms the timer.
    fn went_pending(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        at: &Option<Total>,
        progress: &mut Option<Arc<Progress>>,
    ) -> Poll<Result<F::Output, TimeoutError>> {
        let mut this = self.as_mut().project();
        if this.whole.is_none() && this.read.is_none() && at.is_none() {
            // No limit to start (a connect boundary outside any connect
            // limit, a task scope without `timeout:`): no clock to read.
            return Poll::Pending;
        }
        if this.read.is_some() && progress.is_none() {
            // The call's first attempt to go pending: from now on its
            // attempts are polled with their own waker. Polled again at
            // once, so that what it waits on holds that waker rather than
            // the task's.
            let shared = progress.insert(Arc::default());
            shared.register(cx.waker());
            let own = waker_ref(shared);
            if let Poll::Ready(out) = this.inner.as_mut().poll(&mut Context::from_waker(&own)) {
                return Poll::Ready(Ok(out));
            }
        }
        *this.started = Some(Instant::now());
        *this.last = Nanos::ZERO;
        // Some limit is set (checked above), so there is an end.
        if let Some((end, _)) = first_end(*this.whole, *this.read, *this.started, *this.last, at) {
            this.sleep.set(Some(tokio::time::sleep_until(end)));
        }
        self.wait(cx, at)
    }

    /// Polls the timer; on expiry, the error of the limit that expired.
    fn wait(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        at: &Option<Total>,
    ) -> Poll<Result<F::Output, TimeoutError>> {
        let mut this = self.project();
        loop {
            let Some(mut sleep) = this.sleep.as_mut().as_pin_mut() else {
                return Poll::Pending;
            };
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let Some((end, which)) =
                first_end(*this.whole, *this.read, *this.started, *this.last, at)
            else {
                return Poll::Pending;
            };
            if end <= Instant::now() {
                let (boundary, limit) = match which {
                    Expiring::Read => (Boundary::Read, this.read.get().unwrap_or_default()),
                    Expiring::Whole => (*this.boundary, this.whole.get().unwrap_or_default()),
                    Expiring::Total => (Boundary::Total, at.map_or(Duration::ZERO, Total::limit)),
                };
                return Poll::Ready(Err(TimeoutError::new(boundary, limit, *this.layer)));
            }
            // The attempt made progress since the timer was set: set it again.
            sleep.reset(end);
        }
    }
}

/// Which of a [`TimeLimited`]'s limits ends first. Ordered: on a tie, the
/// per-attempt limits win over `total`, and `read` over the whole duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Expiring {
    /// `read`: the inactivity limit.
    Read,
    /// The limit on the whole duration (`attempt`, `connect`).
    Whole,
    /// The absolute deadline (`total`).
    Total,
}

/// The earliest end of the limits once the first pending poll has set
/// `started`, and which limit it is; ties go to the per-attempt limits.
/// The attempt's own ends are compared as spans after `started`, so that
/// only the earlier becomes an instant.
fn first_end(
    whole: Nanos,
    read: Nanos,
    started: Option<Instant>,
    last: Nanos,
    at: &Option<Total>,
) -> Option<(Instant, Expiring)> {
    let own = [(last.plus(read), Expiring::Read), (whole, Expiring::Whole)]
        .into_iter()
        .filter(|(end, _)| end.is_some())
        .min()
        .and_then(|(end, which)| Some((end.after(started?)?, which)));
    let total = at.map(|total| (total.at, Expiring::Total));
    own.into_iter().chain(total).min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::from_now;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn deadline<F>(inner: F) -> TimeLimited<F> {
        TimeLimited::new(inner, Layer::Tool)
    }

    pin_project_lite::pin_project! {
        /// A [`TimeLimited`] awaited on its own, with the `Progress` a call would hold.
        pub(crate) struct Alone<F> {
            #[pin]
            limited: TimeLimited<F>,
            progress: Option<Arc<Progress>>,
        }
    }

    impl<F: Future> Future for Alone<F> {
        type Output = Result<F::Output, TimeoutError>;

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            let this = self.project();
            this.limited.poll_until(cx, &None, this.progress)
        }
    }

    impl<F: Future> core::future::IntoFuture for TimeLimited<F> {
        type Output = Result<F::Output, TimeoutError>;
        type IntoFuture = Alone<F>;

        fn into_future(self) -> Alone<F> {
            Alone {
                limited: self,
                progress: None,
            }
        }
    }

    /// Polls `d` to completion under the absolute deadline `at`.
    async fn until<F: Future>(
        d: TimeLimited<F>,
        at: Option<Total>,
    ) -> Result<F::Output, TimeoutError> {
        let mut d = std::pin::pin!(d);
        let mut progress = None;
        core::future::poll_fn(|cx| d.as_mut().poll_until(cx, &at, &mut progress)).await
    }

    #[test]
    fn on_a_tie_read_wins_then_the_whole_duration_then_total() {
        let start = Instant::now();
        let (at, limit) = (Some(Total::new(start + secs(5), secs(5))), Some(secs(5)));
        let (limit, none, now) = (Nanos::new(limit), Nanos::NONE, Nanos::ZERO);
        let end = |whole, read| first_end(whole, read, Some(start), now, &at);
        assert_eq!(end(limit, limit), Some((start + secs(5), Expiring::Read)));
        assert_eq!(end(limit, none), Some((start + secs(5), Expiring::Whole)));
        assert_eq!(end(none, none), Some((start + secs(5), Expiring::Total)));
        let sooner = Nanos::new(Some(secs(4)));
        assert_eq!(end(sooner, limit), Some((start + secs(4), Expiring::Whole)));
    }

    #[tokio::test(start_paused = true)]
    async fn ready_inner_wins_even_past_its_deadline() {
        let past = Some(Total::new(Instant::now(), secs(1)));
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
        let fut = deadline(core::future::pending::<()>()).inactive(Some(secs(2)));
        let fut = until(fut, Some(Total::new(start + secs(3), secs(3))));
        let read = TimeoutError::new(Boundary::Read, secs(2), Layer::Tool);
        assert_eq!(fut.await, Err(read));
        assert_eq!(start.elapsed(), secs(2));

        let start = Instant::now();
        let fut = deadline(core::future::pending::<()>()).inactive(Some(secs(2)));
        let fut = until(fut, Some(Total::new(start + secs(1), secs(9))));
        let total = TimeoutError::new(Boundary::Total, secs(9), Layer::Tool);
        assert_eq!(fut.await, Err(total));
        assert_eq!(start.elapsed(), secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_too_long_for_the_clock_saturates() {
        let limit = Some(Duration::MAX);
        let slow = async {
            tokio::time::sleep(secs(3600)).await;
            2
        };
        // Pending at its first poll: the limit is added to the clock.
        assert_eq!(deadline(slow).after(limit, Boundary::Attempt).await, Ok(2));
        let read = deadline(tokio::time::sleep(secs(3600))).inactive(limit);
        assert_eq!(read.await, Ok(()));
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Receives a chunk every `every` for `chunks` chunks, after an optional stall.
    async fn stream(every: Duration, chunks: u32, stall_after: u32, stall: Duration) -> u32 {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            for i in 0..chunks {
                if i == stall_after {
                    tokio::time::sleep(stall).await;
                }
                tokio::time::sleep(every).await;
                if tx.send(i).await.is_err() {
                    return;
                }
            }
        });
        let mut n = 0;
        while rx.recv().await.is_some() {
            n += 1;
        }
        n
    }

    #[tokio::test(start_paused = true)]
    async fn read_is_restarted_by_every_wake_up_and_cuts_a_stall() {
        let start = Instant::now();
        let fut = deadline(stream(ms(100), 30, u32::MAX, Duration::ZERO)).inactive(Some(ms(500)));
        assert_eq!(
            fut.await,
            Ok(30),
            "3 s of chunks 100 ms apart pass a 500 ms read limit"
        );
        assert_eq!(start.elapsed(), secs(3));

        let start = Instant::now();
        let fut = deadline(stream(ms(100), 30, 10, secs(1))).inactive(Some(ms(500)));
        let read = TimeoutError::new(Boundary::Read, ms(500), Layer::Tool);
        assert_eq!(fut.await, Err(read));
        // The tenth chunk at 1 s, then nothing: cut 500 ms later.
        assert_eq!(start.elapsed(), ms(1500));
    }

    #[tokio::test(start_paused = true)]
    async fn attempt_bounds_a_busy_attempt_that_read_lets_live() {
        let start = Instant::now();
        let fut = deadline(stream(ms(100), 30, u32::MAX, Duration::ZERO))
            .inactive(Some(ms(500)))
            .after(Some(secs(2)), Boundary::Attempt);
        let attempt = TimeoutError::new(Boundary::Attempt, secs(2), Layer::Tool);
        assert_eq!(fut.await, Err(attempt));
        assert_eq!(start.elapsed(), secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_attempt_beside_a_busy_sibling_expires_on_time() {
        let start = Instant::now();
        let stalled = async {
            let out = deadline(core::future::pending::<()>())
                .inactive(Some(ms(500)))
                .await;
            (out, start.elapsed())
        };
        let busy = async {
            for _ in 0..30 {
                tokio::time::sleep(ms(50)).await;
            }
        };
        let ((out, at), ()) = tokio::join!(stalled, busy);
        assert!(out.is_err());
        assert_eq!(at, ms(500));
    }

    #[tokio::test(start_paused = true)]
    async fn later_attempts_reuse_the_calls_progress() {
        let mut progress: Option<Arc<Progress>> = None;
        let mut seen = Vec::new();
        for _ in 0..3 {
            let d = deadline(stream(ms(100), 3, u32::MAX, Duration::ZERO)).inactive(Some(ms(500)));
            let mut d = std::pin::pin!(d);
            let out = core::future::poll_fn(|cx| {
                let polled = d.as_mut().poll_until(cx, &None, &mut progress);
                // The progress each attempt runs under, while it runs.
                seen.extend(progress.as_ref().map(Arc::as_ptr));
                polled
            });
            assert_eq!(out.await, Ok(3));
        }
        let first = seen.first().copied().expect("the attempts went pending");
        assert!(seen.len() >= 3, "{} polls", seen.len());
        assert!(
            seen.iter().all(|p| core::ptr::eq(*p, first)),
            "every attempt ran under the first attempt's progress"
        );
        let shared = progress.expect("allocated by the first attempt that went pending");
        assert_eq!(
            Arc::strong_count(&shared),
            1,
            "the attempts' wakers are gone"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_ready_at_once_allocates_no_progress() {
        let mut progress = None;
        let d = deadline(async { 1 }).inactive(Some(ms(500)));
        let mut d = std::pin::pin!(d);
        let out = core::future::poll_fn(|cx| d.as_mut().poll_until(cx, &None, &mut progress));
        assert_eq!(out.await, Ok(1));
        assert!(progress.is_none());
    }
}
