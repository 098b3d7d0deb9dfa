//! `#[retry(idempotent = …)]`: whether a call may repeat an attempt that
//! may have taken effect, said after each failed attempt.

use super::bounds::RetryResult;
use super::call::Call;
use super::timed::TimedCall;

impl Call {
    /// After an attempt: if it failed, whether the call is idempotent, as
    /// `idempotent` (the attribute's expression) says; the engine then
    /// retries only what certainly had no effect
    /// ([`Reached`](crate::Reached)). Not evaluated after a success.
    #[inline(always)]
    pub fn idempotent<R: RetryResult>(&mut self, result: &R, idempotent: impl FnOnce() -> bool) {
        if result.error().is_some() {
            self.idempotent = idempotent();
        }
    }
}

impl TimedCall {
    /// [`Call::idempotent`].
    #[inline(always)]
    pub fn idempotent<R: RetryResult>(&mut self, result: &R, idempotent: impl FnOnce() -> bool) {
        self.call.idempotent(result, idempotent);
    }
}
