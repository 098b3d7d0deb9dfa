//! `#[retry(idempotent = …)]`: whether a call may repeat an attempt that
//! may have taken effect, said once as the call starts, and carried inward
//! to the calls nested in its attempts (DESIGN.md, "Calls with side
//! effects", Inward): a nested fn without the key that runs inside a call
//! that is not idempotent is not idempotent either; an explicit `true` stands.

use super::call::Call;
use super::timed::TimedCall;
use crate::ambient::{Idempotence, exchange};

impl Call {
    /// As the call starts: whether it is idempotent, as `idempotent` (the
    /// attribute's expression, evaluated here, once per call) says; the
    /// engine then retries only what certainly had no effect
    /// ([`Reached`](crate::Reached)), here and in the calls nested in its
    /// attempts that do not say `idempotent = true` themselves.
    #[inline(always)]
    pub fn said_idempotent(&mut self, idempotent: impl FnOnce() -> bool) {
        self.idempotent = Idempotence::said(idempotent());
    }

    /// Whether this call, having failed, may repeat an attempt that may
    /// have taken effect: what it said, or, if it said nothing, what the
    /// attempt around it says (read on the failure path only).
    #[inline]
    pub(super) fn idempotent_now(&self) -> bool {
        match self.idempotent {
            Idempotence::Said => true,
            Idempotence::Not => false,
            Idempotence::Unsaid => !exchange::not_idempotent_around(),
        }
    }
}

impl TimedCall {
    /// [`Call::said_idempotent`].
    #[inline(always)]
    pub fn said_idempotent(&mut self, idempotent: impl FnOnce() -> bool) {
        self.call.said_idempotent(idempotent);
    }
}
