//! What a retry loop needs to know about the loops and scopes around it.
//!
//! Each piece lives in a thread-local that the future owning it installs
//! only for the duration of its own `poll` (as `tokio::task_local!` does),
//! so it follows the future across `.await`s and threads, costs no
//! allocation, and is never shared by two tasks. Generated code reads it
//! synchronously, from inside those polls.

use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::thread::LocalKey;

/// The attempts shared by the nested retry loops under one outermost call:
/// the total (one plus every retry allowed) and the attempts used so far (one
/// plus every retry taken, at any layer), packed in one non-zero `u64`
/// (`total << 32 | used`) so that each copy in and out of the thread-local is one move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget(core::num::NonZeroU64);

impl Budget {
    #[inline]
    pub(crate) fn new(total: u32, used: u32) -> Budget {
        let packed = (u64::from(total.max(1)) << 32) | u64::from(used);
        Budget(core::num::NonZeroU64::new(packed).unwrap_or(core::num::NonZeroU64::MIN))
    }
    pub(crate) fn total(self) -> u32 {
        (self.0.get() >> 32) as u32
    }
    pub(crate) fn used(self) -> u32 {
        self.0.get() as u32
    }
    pub(crate) fn took_one(self) -> Budget {
        Budget::new(self.total(), self.used().saturating_add(1))
    }
    pub(crate) fn left(self) -> u32 {
        self.total().saturating_sub(self.used())
    }
}

std::thread_local! {
    /// The connect limit of the attempt being polled.
    pub(crate) static CONNECT: Cell<Option<crate::connect::ConnectLimit>> = const { Cell::new(None) };
    /// The budget of the outermost retried call being polled.
    pub(crate) static BUDGET: Cell<Option<Budget>> = const { Cell::new(None) };
}

/// `value` installed in `key` until the guard is dropped; then the outer value
/// is put back (even on a panic), and what the nested code left in `key` is
/// written to `back`, if given. A guard rather than a closure, so that the
/// polls using it are not instantiated once per closure.
pub(crate) struct Installed<'a, T: Copy + 'static> {
    key: &'static LocalKey<Cell<T>>,
    outer: T,
    back: Option<&'a mut T>,
}

/// Installs `value` in `key` for the life of the returned guard.
#[inline]
pub(crate) fn install<'a, T: Copy + 'static>(
    key: &'static LocalKey<Cell<T>>,
    value: T,
    back: Option<&'a mut T>,
) -> Installed<'a, T> {
    let outer = key.with(|c| c.replace(value));
    Installed { key, outer, back }
}

impl<T: Copy + 'static> Drop for Installed<'_, T> {
    #[inline]
    fn drop(&mut self) {
        let inner = self.key.with(|c| c.replace(self.outer));
        if let Some(back) = self.back.take() {
            *back = inner;
        }
    }
}

pin_project_lite::pin_project! {
    /// A future that installs `value` in `key` while it is polled: the
    /// mechanism of `task::scope`, `task::carry` and `events::observe`.
    pub struct Scoped<T: 'static, F> {
        #[pin]
        fut: F,
        value: Option<T>,
        key: &'static LocalKey<RefCell<Option<T>>>,
    }
}

impl<T: 'static, F> Scoped<T, F> {
    /// `fut` with `value` installed in `key` (`None` hides an outer value).
    pub(crate) fn new(
        key: &'static LocalKey<RefCell<Option<T>>>,
        value: Option<T>,
        fut: F,
    ) -> Self {
        Scoped { fut, value, key }
    }
}

impl<T: 'static, F: Future> Future for Scoped<T, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        struct SwapBack<'a, T: 'static> {
            key: &'static LocalKey<RefCell<Option<T>>>,
            slot: &'a mut Option<T>,
        }
        impl<T: 'static> Drop for SwapBack<'_, T> {
            fn drop(&mut self) {
                self.key
                    .with(|c| core::mem::swap(&mut *c.borrow_mut(), self.slot));
            }
        }
        let this = self.project();
        let key = *this.key;
        key.with(|c| core::mem::swap(&mut *c.borrow_mut(), this.value));
        let _back = SwapBack {
            key,
            slot: this.value,
        };
        this.fut.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    std::thread_local! {
        static NAME: RefCell<Option<&'static str>> = const { RefCell::new(None) };
    }

    fn current() -> Option<&'static str> {
        NAME.with(|c| *c.borrow())
    }

    #[tokio::test]
    async fn scopes_nest_and_restore_across_awaits() {
        let inner = async {
            tokio::task::yield_now().await;
            current()
        };
        let outer = async {
            let before = current();
            let nested = Scoped::new(&NAME, Some("inner"), inner).await;
            tokio::task::yield_now().await;
            (before, nested, current())
        };
        let got = Scoped::new(&NAME, Some("outer"), outer).await;
        assert_eq!(got, (Some("outer"), Some("inner"), Some("outer")));
        assert_eq!(current(), None);
    }

    #[test]
    fn install_writes_the_inner_value_back_and_restores_the_outer() {
        let budget = Budget::new(9, 1);
        let mut own = Some(budget);
        {
            let _installed = install(&BUDGET, own, Some(&mut own));
            assert_eq!(BUDGET.with(Cell::get), Some(budget));
            BUDGET.with(|c| c.set(Some(Budget::new(9, 4))));
        }
        assert_eq!(own, Some(Budget::new(9, 4)));
        assert_eq!(BUDGET.with(Cell::get), None);
        assert_eq!(budget.left(), 8);
    }
}
