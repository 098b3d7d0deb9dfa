//! What an attempt that started charged its upstream's pacer: its
//! [`Charge`], given back when it ends. Plain data, beneath the pacer
//! that fills it in and the adaptive rate that reads it.

use crate::events::WaitReason;

/// What a turn has charged the pacer, given back when its attempt ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Charge {
    /// One request.
    pub(super) request: bool,
    /// Its scout's turn: the others wait for its news.
    pub(super) scout: bool,
    /// Why its call waited, if it did.
    pub(super) reason: Option<WaitReason>,
    /// The adaptive rate's generation it was admitted at (0: off): a 429
    /// of an attempt admitted before the last decrease does not lower
    /// the rate again.
    pub(super) rate: u8,
    /// Tokens.
    pub(super) tokens: u32,
    /// A slot of the cold start's ramp, given back when it ends.
    pub(super) ramp: bool,
}

impl Charge {
    /// Whether the attempt's end tells the pacer anything.
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        !self.request && !self.scout && self.tokens == 0 && !self.ramp
    }
}
