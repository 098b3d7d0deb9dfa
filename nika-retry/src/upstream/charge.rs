//! What an attempt charges its upstream's pacer: the reservations of an
//! admission ([`Pending`], given back if its attempt never starts) and,
//! once it starts, its [`Charge`] (given back when it ends).

use super::bucket::{Bucket, Reserved};
use super::pace::Pacer;
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
}

impl Charge {
    /// Whether the attempt's end tells the pacer anything.
    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        !self.request && !self.scout && self.tokens == 0
    }
}

/// An admission's reservations, given back if it never starts.
pub(crate) struct Pending<'p> {
    pub(super) pacer: &'p Pacer,
    pub(super) requests: Option<Reserved>,
    pub(super) tokens: Option<Reserved>,
}

impl Pending<'_> {
    pub(super) fn at(&self) -> u64 {
        let at = |bucket: &Bucket, r: &Option<Reserved>| r.map_or(0, |r| bucket.at(&r));
        at(&self.pacer.requests, &self.requests).max(at(&self.pacer.tokens, &self.tokens))
    }

    /// Whether every reservation was counted at its bucket's current rate.
    pub(super) fn current(&self) -> bool {
        let current = |bucket: &Bucket, r: &Option<Reserved>| r.is_none_or(|r| bucket.current(&r));
        current(&self.pacer.requests, &self.requests) && current(&self.pacer.tokens, &self.tokens)
    }

    /// The attempt starts: its cost stays in flight until it ends.
    pub(super) fn start(mut self) -> Charge {
        let requests = self.requests.take();
        let tokens = self.tokens.take();
        let windowed = [requests, tokens].iter().flatten().any(|r| r.id != 0);
        let now = if windowed { self.pacer.now() } else { 0 };
        if let Some(r) = requests {
            self.pacer.requests.start(r, now);
        }
        if let Some(t) = tokens {
            self.pacer.tokens.start(t, now);
        }
        Charge {
            request: requests.is_some(),
            scout: false,
            reason: None,
            rate: self.pacer.adaptive.generation(),
            tokens: tokens.map_or(0, |t| u32::try_from(t.cost).unwrap_or(u32::MAX)),
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.requests.take() {
            self.pacer.requests.give_back(r);
        }
        if let Some(t) = self.tokens.take() {
            self.pacer.tokens.give_back(t);
        }
    }
}
