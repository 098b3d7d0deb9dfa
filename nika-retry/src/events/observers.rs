//! The observers in force: a stack on the thread, outermost first, that
//! [`observe`] and `task::carry` add to for each poll of their future (the
//! one scoped value that adds to what is around it rather than replacing
//! it), and what is sent to it: every decision and every hold of a shared
//! upstream, to `tracing` too. A thread-local outside `ambient/`, beside
//! the observer type it holds and the public [`observe`] that fills it, so
//! that `ambient/` imports `events/` and never the other way
//! (`ambient/mod.rs` lists it with the others).

use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use super::upstream::UpstreamEvent;
use super::{RetryEvent, RetryObserver};
use crate::engine::Level;

std::thread_local! {
    /// The observers of the futures being polled, outermost first.
    static OBSERVERS: RefCell<Vec<Arc<dyn RetryObserver>>> = const { RefCell::new(Vec::new()) };
}

/// Runs `fut` with `observer` receiving the events of every retry loop inside
/// it, across `.await`s, in addition to any observer installed around it.
///
/// A `tokio::spawn`ed task starts without observers; wrap what you spawn in
/// [`task::carry`](crate::task::carry) to keep them.
pub fn observe<F: Future>(observer: Arc<dyn RetryObserver>, fut: F) -> Observed<F> {
    Observed {
        fut,
        observer: Some(observer),
    }
}

pin_project_lite::pin_project! {
    /// The future [`observe`] returns.
    #[must_use = "futures do nothing unless polled"]
    pub struct Observed<F> {
        #[pin]
        fut: F,
        // `None` only while it is on the thread's stack, during a poll.
        observer: Option<Arc<dyn RetryObserver>>,
    }
}

impl<F: Future> Future for Observed<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        struct TakeBack<'a>(&'a mut Option<Arc<dyn RetryObserver>>);
        impl Drop for TakeBack<'_> {
            fn drop(&mut self) {
                *self.0 = OBSERVERS.with(|o| o.borrow_mut().pop());
            }
        }
        let this = self.project();
        let Some(observer) = this.observer.take() else {
            return this.fut.poll(cx);
        };
        OBSERVERS.with(|o| o.borrow_mut().push(observer));
        let _back = TakeBack(this.observer);
        this.fut.poll(cx)
    }
}

/// Pushes `observers` for the duration of `f` and takes them back after,
/// even if `f` panics. Moves the `Arc`s rather than cloning them.
pub(crate) fn with_observers<R>(
    observers: &mut Vec<Arc<dyn RetryObserver>>,
    f: impl FnOnce() -> R,
) -> R {
    if observers.is_empty() {
        return f();
    }
    struct TakeBack<'a> {
        observers: &'a mut Vec<Arc<dyn RetryObserver>>,
        depth: usize,
    }
    impl Drop for TakeBack<'_> {
        fn drop(&mut self) {
            OBSERVERS.with(|o| self.observers.extend(o.borrow_mut().drain(self.depth..)));
        }
    }
    let depth = OBSERVERS.with(|o| {
        let mut stack = o.borrow_mut();
        let depth = stack.len();
        stack.append(observers);
        depth
    });
    let _back = TakeBack { observers, depth };
    f()
}

/// The observers in force on this thread right now, outermost first.
pub(crate) fn current() -> Vec<Arc<dyn RetryObserver>> {
    OBSERVERS.with(|o| o.borrow().clone())
}

/// Whether an event at `level` would reach anyone (a `tracing` subscriber
/// that enables it, or an observer); if not, it is not even built.
#[inline]
// Without `tracing`, only the observers listen, at every level.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn listening(level: Level) -> bool {
    #[cfg(feature = "tracing")]
    {
        let enabled = match level {
            Level::Debug => tracing::enabled!(target: "nika_retry", tracing::Level::DEBUG),
            Level::Warn => tracing::enabled!(target: "nika_retry", tracing::Level::WARN),
        };
        if enabled {
            return true;
        }
    }
    OBSERVERS.with(|o| !o.borrow().is_empty())
}

/// Sends `event` to `tracing`, at `level`, and to every observer in
/// force, innermost first.
#[cfg_attr(not(feature = "tracing"), allow(unused_variables))]
pub(crate) fn emit(event: &RetryEvent, level: Level) {
    #[cfg(feature = "tracing")]
    super::trace(event, level);
    OBSERVERS.with(|o| {
        for observer in o.borrow().iter().rev() {
            observer.on_event(event);
        }
    });
}

/// Sends an upstream's `event` to `tracing` and to every observer in
/// force, innermost first (its caller records it in the metrics first).
pub(crate) fn emit_upstream(event: &UpstreamEvent) {
    #[cfg(feature = "tracing")]
    super::upstream::trace(event);
    OBSERVERS.with(|o| {
        for observer in o.borrow().iter().rev() {
            observer.on_upstream(event);
        }
    });
}
