//! [`Classify`] for a [`reqwest_middleware::Error`](::reqwest_middleware::Error):
//! what [`Retry`](super::Retry) reads of a failed attempt, and what an
//! annotated fn over a `ClientWithMiddleware` reads through
//! `#[category(transparent)]`.

use core::time::Duration;

use ::reqwest_middleware::Error;

use crate::upstream::Held;
use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::reached::Reached;
use crate::vocab::timeout_error::TimeoutError;

/// What a middleware's own error is, when it is one of ours.
enum Ours<'a> {
    Timeout(&'a TimeoutError),
    Held(&'a Held),
    Other,
}

/// A middleware's error (`&**e`: what the `anyhow::Error` holds): a
/// [`TimeoutError`] or a [`Held`] of ours in its chain (a [`Retry`](super::Retry)
/// below gave up on a limit or a hold), else something only that
/// middleware knows.
fn ours<'a>(error: &'a (dyn std::error::Error + Send + Sync + 'static)) -> Ours<'a> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = next {
        if let Some(timeout) = e.downcast_ref::<TimeoutError>() {
            return Ours::Timeout(timeout);
        }
        if let Some(held) = e.downcast_ref::<Held>() {
            return Ours::Held(held);
        }
        next = e.source();
    }
    Ours::Other
}

#[cfg_attr(docsrs, doc(cfg(feature = "reqwest-middleware")))]
impl Classify for Error {
    /// `Reqwest`: as [`reqwest::Error`] classifies. `Middleware`: a
    /// [`TimeoutError`] or a [`Held`] in it as that; anything else a
    /// middleware failed with is `Permanent` (retrying it would only fail
    /// it again).
    fn category(&self) -> ErrorCategory {
        match self {
            Error::Reqwest(e) => e.category(),
            Error::Middleware(e) => match ours(&**e) {
                Ours::Timeout(timeout) => timeout.category(),
                Ours::Held(held) => held.category(),
                Ours::Other => ErrorCategory::Permanent,
            },
        }
    }

    /// A [`Held`]'s time left; none otherwise.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Reqwest(e) => e.retry_after(),
            Error::Middleware(e) => match ours(&**e) {
                Ours::Held(held) => held.retry_after(),
                _ => None,
            },
        }
    }

    fn timeout(&self) -> Option<&TimeoutError> {
        match self {
            Error::Reqwest(e) => e.timeout(),
            Error::Middleware(e) => match ours(&**e) {
                Ours::Timeout(timeout) => Some(timeout),
                _ => None,
            },
        }
    }

    /// `Reqwest`: as [`reqwest::Error`] says. A hold: `No` (it was never
    /// sent); a limit as it says; anything else `Maybe`.
    fn reached(&self) -> Reached {
        match self {
            Error::Reqwest(e) => e.reached(),
            Error::Middleware(e) => match ours(&**e) {
                Ours::Timeout(timeout) => timeout.reached(),
                Ours::Held(_) => Reached::No,
                Ours::Other => Reached::Maybe,
            },
        }
    }
}
