//! The exchange a call makes with what is around it on each poll of its
//! attempt: its attempt (and budget, if it owns one) in, the outer ones
//! back, and what the loops nested in it left: one access in and one out.
//! What a failing call reads as it decides, and its take from the budget
//! in force, are [`budget`](super::budget)'s: the poll pays for neither.

use super::{AttemptSlot, Budget, CONTEXT};
use crate::vocab::key::IdempotencyKey;
use crate::vocab::layer::Layer;

/// The attempt being polled, its key (the logical request's: drawn with
/// `draw` if it has none yet) and the budget in force (the outermost
/// call's, whose count is the retries taken across all layers).
pub(crate) fn attempt(
    draw: impl FnOnce() -> IdempotencyKey,
) -> Option<(AttemptSlot, IdempotencyKey, Option<Budget>)> {
    CONTEXT.with(|c| {
        let slot = c.attempt.get();
        if !slot.present() {
            return None;
        }
        let budget = c.budget.get();
        if slot.has_key() {
            return Some((slot, c.key.get(), budget));
        }
        let key = draw();
        c.key.set(key);
        c.attempt.set(slot.with_key());
        Some((slot, key, budget))
    })
}

/// The attempt in force, as a stream that started in it keeps it for a
/// resume: its slot, its key if it has drawn one (a key not yet drawn is
/// drawn by the resume, once, if anyone reads it), and the budget in
/// force. Never draws a key.
pub(crate) fn attempt_as_is() -> Option<(AttemptSlot, Option<IdempotencyKey>, Option<Budget>)> {
    CONTEXT.with(|c| {
        let slot = c.attempt.get();
        let key = slot.has_key().then(|| c.key.get());
        slot.present().then(|| (slot, key, c.budget.get()))
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
///
/// One key per logical request: the owner of the budget holds the key in
/// `key` between its polls and swaps it with the one in force when either
/// attempt has one, so that `key` holds the outer attempt's until
/// [`restore`] swaps them back; a nested call holds none of its own but
/// takes the bit of the attempt around it, and so reads the outermost
/// call's key. Inlined into the poll, where all of it stays in registers: a
/// poll costs one access in and one out.
#[inline(always)]
pub(crate) fn install(
    budget: Option<Budget>,
    slot: AttemptSlot,
    key: &mut IdempotencyKey,
) -> Outer {
    let owner = budget.is_some();
    let outer = CONTEXT.with(|c| {
        let budget = if owner {
            c.budget.replace(budget)
        } else {
            None
        };
        let attempt = c.attempt.get();
        c.attempt.set(if owner {
            slot
        } else {
            slot.sharing_key(attempt)
        });
        Outer { budget, attempt }
    });
    if owner && slot.either_has_key(outer.attempt) {
        swap_key(key);
    }
    outer
}

/// [`install`] on a call's first poll, in the same access as what is
/// around it is read: `slot` at `inner` put in force with, if no budget is
/// (the call is the outermost retried one), the `default` budget it then
/// owns, which it gets back. `None`, with nothing put in force, under a task
/// policy or in an attempt at a layer that `inner` breaks the rule under:
/// the caller reads those ([`around`]), then [`install`]s.
#[inline(always)]
pub(crate) fn install_first(
    inner: Layer,
    slot: AttemptSlot,
    default: Budget,
    key: &mut IdempotencyKey,
) -> Option<(Outer, Option<Budget>)> {
    let (outer, budget) = CONTEXT.with(|c| {
        let attempt = c.attempt.get();
        if c.scoped.get() || attempt.broken_by(inner) {
            return None;
        }
        let owner = c.budget.get().is_none();
        let budget = owner.then_some(default);
        if owner {
            c.budget.set(budget);
            c.attempt.set(slot);
        } else {
            c.attempt.set(slot.sharing_key(attempt));
        }
        Some((
            Outer {
                budget: None,
                attempt,
            },
            budget,
        ))
    })?;
    if budget.is_some() && slot.either_has_key(outer.attempt) {
        swap_key(key);
    }
    Some((outer, budget))
}

/// Puts back what [`install`] replaced, and the call's key (drawn during
/// the poll, perhaps) in `key`; hands the loops that broke the
/// stratification inside the poll to `report`, with `caller` (what the call
/// names itself with: a plain value and a fn pointer rather than a closure,
/// so that the fast path never even computes it) and the layer of the
/// attempt they started in; sets `streams` if a stream in the poll asked
/// for the call's frame; returns the call's budget as the nested loops
/// left it, if it owns it.
#[inline(always)]
pub(crate) fn restore<C>(
    outer: Outer,
    key: &mut IdempotencyKey,
    owns_budget: bool,
    streams: &mut bool,
    caller: C,
    report: fn(C, Layer, u32),
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
        let violations = settle(ours, outer.attempt, key, owns_budget, streams);
        if violations != 0 {
            report(caller, ours.layer(), violations);
        }
    }
    budget
}

/// The rare part of [`restore`]: the keys to swap back (the owner's), the
/// key a nested attempt drew handed to the attempt around it, a stream's
/// request for the frame; returns the violations to report.
#[cold]
#[inline(never)]
fn settle(
    ours: AttemptSlot,
    outer: AttemptSlot,
    key: &mut IdempotencyKey,
    owner: bool,
    streams: &mut bool,
) -> u32 {
    if owner {
        if ours.either_has_key(outer) {
            swap_key(key);
        }
    } else if ours.has_key() && !outer.has_key() && outer.present() {
        // Drawn in this nested attempt: the request's key, which the
        // attempts around it (up to the owner, which keeps it) now have.
        CONTEXT.with(|c| c.attempt.set(outer.with_key()));
    }
    *streams |= ours.wants_stream();
    ours.violations()
}

/// Swaps `key` with the key in force.
fn swap_key(key: &mut IdempotencyKey) {
    CONTEXT.with(|c| *key = c.key.replace(*key));
}
