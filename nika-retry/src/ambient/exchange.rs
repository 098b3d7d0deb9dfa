//! The exchange a call makes with what is around it on each poll of its
//! attempt: its attempt (and budget, if it owns one) in, the outer ones
//! back, and what the loops nested in it left: one access in and one out.

use super::{AttemptSlot, Budget, CONTEXT};
use crate::Layer;
use crate::key::IdempotencyKey;

/// The budget in force (the outermost call's), if any.
pub(crate) fn budget() -> Option<Budget> {
    CONTEXT.with(|c| c.budget.get())
}

/// Counts one retry against the budget in force, if any.
pub(crate) fn take_from_budget() {
    CONTEXT.with(|c| c.budget.set(c.budget.get().map(Budget::took_one)));
}

/// The attempt being polled and its key, drawn with `draw` if it has none yet.
pub(crate) fn attempt(
    draw: impl FnOnce() -> IdempotencyKey,
) -> Option<(AttemptSlot, IdempotencyKey)> {
    CONTEXT.with(|c| {
        let slot = c.attempt.get();
        if !slot.present() {
            return None;
        }
        if slot.has_key() {
            return Some((slot, c.key.get()));
        }
        let key = draw();
        c.key.set(key);
        c.attempt.set(slot.with_key());
        Some((slot, key))
    })
}

/// The layer of the attempt in force, if `breaks(layer)` says that a loop
/// starting inside it breaks the stratification: that attempt's count of
/// violations to report goes up by one (for its [`restore`] to report with
/// its name). `None` past half a million in one poll: that one is not reported.
#[cold]
pub(crate) fn count_violation(breaks: impl FnOnce(Layer) -> bool) -> Option<Layer> {
    CONTEXT.with(|c| {
        let slot = c.attempt.get();
        if !slot.present() || !breaks(slot.layer()) {
            return None;
        }
        c.attempt.set(slot.with_violation()?);
        Some(slot.layer())
    })
}

/// What the loops and the scope around a call at `inner` being polled for
/// the first time say: whether a task policy is in force, whether a budget
/// is (then the call is nested in a retried call), and whether the attempt
/// it is nested in is at a layer that `inner` breaks the stratification
/// under (one bit test: the report is the rare path).
#[inline]
pub(crate) fn around(inner: Layer) -> (bool, bool, bool) {
    CONTEXT.with(|c| {
        let breaks = c.attempt.get().broken_by(inner);
        (c.scoped.get(), c.budget.get().is_some(), breaks)
    })
}

/// What [`install`] replaced, for [`restore`] to put back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outer {
    pub(super) attempt: AttemptSlot,
    /// The budget in force before an owner put its own in (an owner polled
    /// inside another retried call's attempt, say after a first poll outside).
    budget: Option<Budget>,
}

/// Puts a call's attempt in force for one poll, with its budget if it owns
/// one (the outermost call); returns what it replaced, for [`restore`].
/// If either attempt has a key, `key` (the call's) is swapped with the one
/// in force, so that `key` holds the outer attempt's until [`restore`]
/// swaps them back. Inlined into the poll, where all of it stays in
/// registers: a poll costs one access in and one out.
#[inline(always)]
pub(crate) fn install(
    budget: Option<Budget>,
    slot: AttemptSlot,
    key: &mut IdempotencyKey,
) -> Outer {
    let outer = CONTEXT.with(|c| Outer {
        budget: if budget.is_some() {
            c.budget.replace(budget)
        } else {
            None
        },
        attempt: c.attempt.replace(slot),
    });
    if slot.either_has_key(outer.attempt) {
        swap_key(key);
    }
    outer
}

/// Puts back what [`install`] replaced, and the call's key (drawn during
/// the poll, perhaps) in `key`; hands the loops that broke the
/// stratification inside the poll to `report` (with the layer of the
/// attempt they started in, for the call to name itself: the fast path
/// never calls it); sets `streams` if a stream in the poll asked for the
/// call's frame; returns the call's budget as the nested loops left it, if
/// it owns it.
#[inline(always)]
pub(crate) fn restore(
    outer: Outer,
    key: &mut IdempotencyKey,
    owns_budget: bool,
    streams: &mut bool,
    report: impl FnOnce(Layer, u32),
) -> Option<Budget> {
    let (ours, budget) = CONTEXT.with(|c| {
        let ours = c.attempt.replace(outer.attempt);
        let budget = if owns_budget {
            c.budget.replace(outer.budget)
        } else {
            None
        };
        (ours, budget)
    });
    if ours.to_settle(outer.attempt) {
        let violations = settle(ours, outer.attempt, key, streams);
        if violations != 0 {
            report(ours.layer(), violations);
        }
    }
    budget
}

/// The rare part of [`restore`]: the keys to swap back, a stream's request
/// for the frame; returns the violations to report.
#[cold]
#[inline(never)]
fn settle(
    ours: AttemptSlot,
    outer: AttemptSlot,
    key: &mut IdempotencyKey,
    streams: &mut bool,
) -> u32 {
    if ours.either_has_key(outer) {
        swap_key(key);
    }
    *streams |= ours.wants_stream();
    ours.violations()
}

/// Swaps `key` with the key in force.
fn swap_key(key: &mut IdempotencyKey) {
    CONTEXT.with(|c| *key = c.key.replace(*key));
}
