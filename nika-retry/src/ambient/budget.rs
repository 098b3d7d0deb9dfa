//! [`Budget`]: the attempts shared by the nested loops under one outermost
//! call; and what a failing call reads of what is around it as it decides
//! ([`around_failure`]: the budget in force among it, one access), and
//! its take from that budget after a retry ([`take_from_budget`]). The
//! poll's own exchange, every poll, is [`exchange`](super::exchange)'s.

use super::CONTEXT;

/// What a failing call reads of what is around it, in one access as it
/// decides: its attempt's last poll has just returned, and nothing ran
/// since, so this is what that poll left in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AroundFailure {
    /// The budget in force (the outermost call's), if any.
    pub(crate) budget: Option<Budget>,
    /// Whether the attempt around the call is not idempotent: a call that
    /// says nothing itself is not either.
    pub(crate) not_idempotent: bool,
    /// Whether a task policy is in force (then its `retry:` may replace the
    /// call's config).
    pub(crate) scoped: bool,
}

/// What is around a call that has just failed.
#[inline]
pub(crate) fn around_failure() -> AroundFailure {
    CONTEXT.with(|c| AroundFailure {
        budget: c.budget.get(),
        not_idempotent: c.attempt.get().not_idempotent(),
        scoped: c.scoped.get(),
    })
}

/// The budget in force (the outermost call's), if any.
pub(crate) fn budget() -> Option<Budget> {
    CONTEXT.with(|c| c.budget.get())
}

/// Counts one retry against the budget in force, if any; returns it as it
/// is then.
pub(crate) fn take_from_budget() -> Option<Budget> {
    CONTEXT.with(|c| {
        let taken = c.budget.get().map(Budget::took_one);
        c.budget.set(taken);
        taken
    })
}

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

    pub(super) fn total(self) -> u32 {
        ((self.0.get() & !EXPLICIT) >> 32) as u32
    }
    pub(crate) fn used(self) -> u32 {
        self.0.get() as u32
    }
    pub(super) fn is_explicit(self) -> bool {
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
