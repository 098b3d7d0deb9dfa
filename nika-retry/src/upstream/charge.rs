//! What an attempt that started charged its upstream's pacer: its
//! [`Charge`], given back when it ends. Plain data, beneath the pacer
//! that fills it in and the adaptive rate that reads it.

use crate::events::WaitReason;

/// What a turn has charged the pacer, given back when its attempt ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Charge {
    /// What it holds besides tokens (one request, the scout's turn, a
    /// slot of the ramp), a bit each: a success at an open upstream asks
    /// whether the charge is empty twice, one compare each.
    pub(super) holds: Holds,
    /// Why its call waited, if it did.
    pub(super) reason: Option<WaitReason>,
    /// The adaptive rate's generation it was admitted at (0: off): a 429
    /// of an attempt admitted before the last decrease does not lower
    /// the rate again.
    pub(super) rate: u8,
    /// Tokens.
    pub(super) tokens: u32,
}

impl Charge {
    /// Whether the attempt's end tells the pacer anything.
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.holds == Holds::NONE && self.tokens == 0
    }
}

/// What a charge holds besides tokens, a bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Holds(u8);

impl Holds {
    pub(super) const NONE: Holds = Holds(0);
    /// One request of the requests' bucket.
    pub(super) const REQUEST: Holds = Holds(1);
    /// Its scout's turn: the others wait for its news.
    pub(super) const SCOUT: Holds = Holds(2);
    /// A slot of the cold start's ramp, given back when it ends.
    pub(super) const RAMP: Holds = Holds(4);

    /// Whether it holds `what`.
    #[inline(always)]
    pub(super) fn has(self, what: Holds) -> bool {
        self.0 & what.0 != 0
    }

    /// Holds `what` if `on`, else not.
    #[inline(always)]
    pub(super) fn set(&mut self, what: Holds, on: bool) {
        if on {
            self.0 |= what.0;
        } else {
            self.0 &= !what.0;
        }
    }
}
