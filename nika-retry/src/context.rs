//! What a retry loop needs to know about the loops and scopes around it.
//!
//! It lives in thread-locals that the future owning each piece installs only
//! for the duration of its own `poll` (as `tokio::task_local!` does), so it
//! follows the future across `.await`s and threads, costs no allocation,
//! and is never shared by two tasks. Generated code reads it synchronously,
//! from inside those polls.
//!
//! Everything a call puts in force for one poll of its attempt (the shared
//! budget, the connect limit, the attempt's own number and key) and the
//! marker of a task scope sit in one `Copy` cell, [`Frame`], so that a poll
//! costs one exchange in and one out, and nothing else.

use core::cell::{Cell, RefCell};
use core::future::Future;
use core::pin::Pin;
use core::task::{Context as TaskContext, Poll};
use core::time::Duration;
use std::thread::LocalKey;

use crate::Layer;
use crate::attempt::IdempotencyKey;
use crate::connect::ConnectLimit;

/// The attempts shared by the nested retry loops under one outermost call:
/// the total (one plus every retry allowed), whether the task set it, and
/// the attempts used so far (one plus every retry taken, at any layer),
/// packed in one non-zero `u64` (`explicit << 63 | total << 32 | used`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget(core::num::NonZeroU64);

const EXPLICIT: u64 = 1 << 63;

impl Budget {
    /// The default budget of `total`: it never cuts a loop below its own attempts.
    #[inline]
    pub(crate) fn new(total: u32, used: u32) -> Budget {
        Budget::pack(total, used, false)
    }

    /// A budget of `total` that the task set: it always holds.
    pub(crate) fn explicit(total: u32, used: u32) -> Budget {
        Budget::pack(total, used, true)
    }

    #[inline]
    fn pack(total: u32, used: u32, explicit: bool) -> Budget {
        let total = u64::from(total.clamp(1, i32::MAX as u32));
        let flag = if explicit { EXPLICIT } else { 0 };
        let packed = flag | (total << 32) | u64::from(used);
        Budget(core::num::NonZeroU64::new(packed).unwrap_or(core::num::NonZeroU64::MIN))
    }

    pub(crate) fn total(self) -> u32 {
        ((self.0.get() & !EXPLICIT) >> 32) as u32
    }
    pub(crate) fn used(self) -> u32 {
        self.0.get() as u32
    }
    pub(crate) fn is_explicit(self) -> bool {
        self.0.get() & EXPLICIT != 0
    }
    pub(crate) fn took_one(self) -> Budget {
        Budget::pack(
            self.total(),
            self.used().saturating_add(1),
            self.is_explicit(),
        )
    }
    /// Attempts left for a loop allowing `own_attempts`: a default budget is
    /// raised to them, so that it only ever stops loops from multiplying.
    pub(crate) fn left(self, own_attempts: u32) -> u32 {
        let total = if self.is_explicit() {
            self.total()
        } else {
            self.total().max(own_attempts)
        };
        total.saturating_sub(self.used())
    }
}

/// The attempt being polled, as [`current_attempt`](crate::current_attempt) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AttemptSlot {
    pub(crate) layer: Layer,
    pub(crate) attempt: u32,
    pub(crate) max_attempts: u32,
    /// [`IdempotencyKey::UNDRAWN`] until the body first reads it.
    pub(crate) key: IdempotencyKey,
}

/// What is in force for the attempt being polled: the context of this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The budget of the outermost retried call.
    pub(crate) budget: Option<Budget>,
    /// The connect limit of the attempt, its layer, and whether a connect
    /// boundary has read it.
    pub(crate) connect: Option<ConnectLimit>,
    /// The innermost attempt.
    pub(crate) attempt: Option<AttemptSlot>,
    /// Whether a task policy is in force (then `task` has it).
    pub(crate) scoped: bool,
}

impl Frame {
    const EMPTY: Frame = Frame {
        budget: None,
        connect: None,
        attempt: None,
        scoped: false,
    };
}

std::thread_local! {
    static CONTEXT: Cell<Frame> = const { Cell::new(Frame::EMPTY) };
}

/// The connect limit of the attempt being polled, noted as reached: what a
/// connect boundary ([`connect`](crate::connect), the reqwest connector) reads.
#[inline]
pub(crate) fn connect_limit() -> Option<(Duration, Layer)> {
    CONTEXT.with(|c| {
        let mut ctx = c.get();
        let connect = ctx.connect.as_mut()?;
        connect.reached = true;
        let out = (connect.limit, connect.layer);
        c.set(ctx);
        Some(out)
    })
}

/// Whether a connect boundary has read the connect limit in force.
#[inline]
pub(crate) fn connect_reached() -> bool {
    CONTEXT.with(|c| c.get().connect.is_some_and(|l| l.reached))
}

/// `connect` in force, over the limit around it, until the guard drops: for
/// `#[timeout]` alone, which has no call of its own to enter.
pub(crate) fn enter_connect(connect: ConnectLimit) -> ConnectScope {
    CONTEXT.with(|c| {
        let mut ctx = c.get();
        let outer = ctx.connect.replace(connect);
        c.set(ctx);
        ConnectScope(outer)
    })
}

/// The guard [`enter_connect`] returns: it puts the outer limit back.
pub(crate) struct ConnectScope(Option<ConnectLimit>);

impl Drop for ConnectScope {
    fn drop(&mut self) {
        CONTEXT.with(|c| {
            let mut ctx = c.get();
            ctx.connect = self.0;
            c.set(ctx);
        });
    }
}

/// `connect` in force until the guard drops, for tests.
#[cfg(test)]
pub(crate) fn with_connect(connect: Option<ConnectLimit>) -> impl Drop {
    struct Restore(Frame);
    impl Drop for Restore {
        fn drop(&mut self) {
            CONTEXT.with(|c| c.set(self.0));
        }
    }
    Restore(CONTEXT.with(|c| c.replace(Frame { connect, ..c.get() })))
}

/// The budget in force (the outermost call's), if any.
pub(crate) fn budget() -> Option<Budget> {
    CONTEXT.with(|c| c.get().budget)
}

/// Counts one retry against the budget in force, if any.
pub(crate) fn take_from_budget() {
    CONTEXT.with(|c| {
        let mut ctx = c.get();
        ctx.budget = ctx.budget.map(Budget::took_one);
        c.set(ctx);
    });
}

/// Runs `f` on the attempt being polled, writing back what it changed.
pub(crate) fn with_attempt<R>(f: impl FnOnce(&mut AttemptSlot) -> R) -> Option<R> {
    CONTEXT.with(|c| {
        let mut ctx = c.get();
        let out = f(ctx.attempt.as_mut()?);
        c.set(ctx);
        Some(out)
    })
}

/// Puts in force the context `enter` builds from the one around it, until
/// the guard drops. On drop, the outer context is restored, carrying the
/// budget as the nested loops left it, and what the poll changed in the
/// call's own part is written to `own` (its budget, if it owns one, and its
/// attempt's key).
#[inline]
pub(crate) fn enter<'a>(
    own: Own<'a>,
    enter: impl FnOnce(&Frame, &mut Own<'a>) -> Frame,
) -> Entered<'a> {
    let mut own = own;
    let outer = CONTEXT.with(|c| {
        let outer = c.get();
        c.set(enter(&outer, &mut own));
        outer
    });
    Entered { outer, own }
}

/// The parts of a call that a poll may change.
pub(crate) struct Own<'a> {
    /// `Some` for the outermost call, which owns the budget.
    pub(crate) budget: &'a mut Option<Budget>,
    pub(crate) key: &'a mut IdempotencyKey,
}

/// The guard [`enter`] returns.
pub(crate) struct Entered<'a> {
    outer: Frame,
    own: Own<'a>,
}

impl Drop for Entered<'_> {
    #[inline]
    fn drop(&mut self) {
        let own_budget = self.own.budget.is_some();
        let mut outer = self.outer;
        let inner = CONTEXT.with(|c| {
            let inner = c.get();
            if !own_budget {
                outer.budget = inner.budget;
            }
            c.set(outer);
            inner
        });
        if own_budget {
            *self.own.budget = inner.budget;
        }
        if let Some(slot) = inner.attempt {
            *self.own.key = slot.key;
        }
    }
}

/// Marks a task policy in force (or hidden, for `false`) until the guard drops.
pub(crate) fn enter_scope(scoped: bool) -> ScopeMark {
    CONTEXT.with(|c| {
        let mut ctx = c.get();
        let outer = core::mem::replace(&mut ctx.scoped, scoped);
        c.set(ctx);
        ScopeMark(outer)
    })
}

/// The guard [`enter_scope`] returns.
pub(crate) struct ScopeMark(bool);

impl Drop for ScopeMark {
    fn drop(&mut self) {
        CONTEXT.with(|c| {
            let mut ctx = c.get();
            ctx.scoped = self.0;
            c.set(ctx);
        });
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

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
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
    fn a_default_budget_never_cuts_a_loop_below_its_own_attempts() {
        let default = Budget::new(9, 9);
        assert_eq!((default.left(3), default.left(10)), (0, 1));
        let explicit = Budget::explicit(9, 9);
        assert_eq!((explicit.left(3), explicit.left(10)), (0, 0));
        assert!(explicit.took_one().is_explicit());
        assert_eq!(explicit.took_one().used(), 10);
        assert_eq!(Budget::new(u32::MAX, 0).total(), i32::MAX as u32);
    }

    #[test]
    fn a_poll_writes_its_changes_back_and_restores_the_outer_context() {
        let mut budget = None;
        let mut key = IdempotencyKey::UNDRAWN;
        let slot = AttemptSlot {
            layer: Layer::Http,
            attempt: 1,
            max_attempts: 3,
            key,
        };
        {
            let own = Own {
                budget: &mut budget,
                key: &mut key,
            };
            let _entered = enter(own, |outer, own| {
                assert_eq!(*outer, Frame::EMPTY);
                *own.budget = Some(Budget::new(9, 1));
                Frame {
                    budget: *own.budget,
                    attempt: Some(slot),
                    ..*outer
                }
            });
            take_from_budget();
            with_attempt(|slot| slot.key = IdempotencyKey::draw());
        }
        assert_eq!(budget, Some(Budget::new(9, 2)));
        assert_ne!(key, IdempotencyKey::UNDRAWN);
        assert_eq!(CONTEXT.with(Cell::get), Frame::EMPTY);
    }

    #[test]
    fn a_budget_packs_its_total_use_and_kind() {
        let budget = Budget::new(9, 4);
        assert_eq!(
            (budget.total(), budget.used(), budget.is_explicit()),
            (9, 4, false)
        );
        let explicit = Budget::explicit(5, 2).took_one();
        assert_eq!(
            (explicit.total(), explicit.used(), explicit.is_explicit()),
            (5, 3, true)
        );
    }

    #[test]
    fn the_accessors_read_the_frame_in_force() {
        let limit = ConnectLimit::new(Some(Duration::from_secs(2)), Layer::Http);
        {
            let _connect = with_connect(limit);
            assert_eq!(connect_limit(), Some((Duration::from_secs(2), Layer::Http)));
        }
        assert_eq!(connect_limit(), None);

        let mut budget = Some(Budget::new(9, 3));
        let mut key = IdempotencyKey::UNDRAWN;
        {
            let own = Own {
                budget: &mut budget,
                key: &mut key,
            };
            let _entered = enter(own, |outer, own| Frame {
                budget: *own.budget,
                ..*outer
            });
            assert_eq!(super::budget(), Some(Budget::new(9, 3)));
        }
        assert_eq!(super::budget(), None);

        let scoped = || CONTEXT.with(Cell::get).scoped;
        {
            let _outer = enter_scope(true);
            {
                let _hidden = enter_scope(false);
                assert!(!scoped());
            }
            assert!(scoped(), "the inner mark put the outer one back");
        }
        assert!(!scoped());
    }
}
