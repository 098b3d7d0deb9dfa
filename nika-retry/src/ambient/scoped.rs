//! [`Scoped`]: a future that puts an [`Ambient`] value in force while it is
//! polled, and [`Policy`], the task policy's place.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::{Ambient, CONTEXT, POLICY, Swap};
use crate::vocab::policy::TaskPolicy;

pin_project_lite::pin_project! {
    /// `fut`, polled with `value` in force at `A`'s place: the mechanism of
    /// `task::scope` and `task::carry`.
    pub struct Scoped<A: Ambient, F> {
        #[pin]
        fut: F,
        value: A::Value,
    }
}

impl<A: Ambient, F> Scoped<A, F> {
    /// `fut` with `value` in force.
    pub(crate) fn new(value: A::Value, fut: F) -> Self {
        Scoped { fut, value }
    }
}

impl<A: Ambient, F: Future> Future for Scoped<A, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _in = Swap::<A>::new(this.value);
        this.fut.poll(cx)
    }
}

/// The place of the task policy (`None` hides an outer one). Its swap also
/// keeps the `scoped` flag that a call's first poll reads with the rest of
/// the context: the policy is stored once, and the flag only follows it.
pub(crate) struct Policy;

impl Ambient for Policy {
    type Value = Option<TaskPolicy>;

    fn swap(value: &mut Option<TaskPolicy>) {
        let scoped = POLICY.with(|p| {
            let mut policy = p.borrow_mut();
            core::mem::swap(&mut *policy, value);
            policy.is_some()
        });
        CONTEXT.with(|c| c.scoped.set(scoped));
    }
}

/// `read` applied to the task policy in force, if any.
pub(crate) fn with_policy<R>(read: impl FnOnce(Option<&TaskPolicy>) -> R) -> R {
    POLICY.with(|p| read(p.borrow().as_ref()))
}
