//! The traits generated code puts on the user's types, each with a
//! `#[diagnostic::on_unimplemented]` message that says what to write.

use core::time::Duration;

use crate::upstream::{Held, Upstream};
use crate::vocab::config::RetryConfig;
use crate::vocab::timeout_error::TimeoutError;

/// A `#[timeout]` value given as an expression: `Duration` or `Option<Duration>`.
#[diagnostic::on_unimplemented(
    message = "a `#[timeout]` limit must be a `Duration` or an `Option<Duration>`, not `{Self}`",
    label = "expected `Duration` or `Option<Duration>`"
)]
pub trait IntoLimit {
    /// The limit; `None` for no limit.
    fn into_limit(self) -> Option<Duration>;
}

impl IntoLimit for Duration {
    fn into_limit(self) -> Option<Duration> {
        Some(self)
    }
}

impl IntoLimit for Option<Duration> {
    fn into_limit(self) -> Option<Duration> {
        self
    }
}

/// `#[retry(config = EXPR)]`: a `RetryConfig` or an `Option<RetryConfig>`.
#[diagnostic::on_unimplemented(
    message = "`config = …` must be a `RetryConfig` or an `Option<RetryConfig>`, not `{Self}`",
    label = "expected `RetryConfig` or `Option<RetryConfig>`"
)]
pub trait IntoConfig {
    /// The config; `None` keeps the attribute's literals.
    fn into_config(self) -> Option<RetryConfig>;
}

impl IntoConfig for RetryConfig {
    fn into_config(self) -> Option<RetryConfig> {
        Some(self)
    }
}

impl IntoConfig for Option<RetryConfig> {
    fn into_config(self) -> Option<RetryConfig> {
        self
    }
}

impl IntoConfig for &RetryConfig {
    fn into_config(self) -> Option<RetryConfig> {
        Some(self.clone())
    }
}

/// The error type of a `#[timeout]` fn: it must absorb a [`TimeoutError`].
// One of three traits for `E: From<TimeoutError>`, with `tower::FromTimeoutError`
// and `stream::StreamError`: the trait is its message, and a message is one
// per trait (`on_unimplemented` cannot tell its callers apart), so each place
// that needs the conversion names what to write there (here, the fn's own
// signature; not re-exported from one another for that reason).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold a timeout: `#[timeout]` needs `{Self}: From<nika_retry::TimeoutError>`",
    label = "this error type needs `From<nika_retry::TimeoutError>`",
    note = "for your own error type, add a variant such as `#[error(transparent)] #[category(transparent)] Timeout(#[from] nika_retry::TimeoutError)`",
    note = "for a type from another crate, which cannot take a new `From` impl, return your own error type that wraps it: an enum with one variant holding `{Self}` and one holding `nika_retry::TimeoutError` (`std::io::Error` already holds a timeout)"
)]
pub trait FromTimeout {
    /// Converts the expiry.
    fn from_timeout(error: TimeoutError) -> Self;
}

impl<E: From<TimeoutError>> FromTimeout for E {
    fn from_timeout(error: TimeoutError) -> Self {
        E::from(error)
    }
}

/// The error type of a `#[retry(upstream = …)]` fn: it must absorb a [`Held`].
// Twin of `tower::FromHeld`, for the same reason as `FromTimeout`'s: each
// says what to write where it fails.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot say that the upstream is held: `upstream = …` needs `{Self}: From<nika_retry::upstream::Held>`",
    label = "this error type needs `From<nika_retry::upstream::Held>`",
    note = "add a variant such as `#[error(transparent)] #[category(transparent)] Held(#[from] nika_retry::upstream::Held)`: a call that will not wait out a hold fails with it"
)]
pub trait FromHeld {
    /// Converts the hold.
    fn from_held(held: Held) -> Self;
}

impl<E: From<Held>> FromHeld for E {
    fn from_held(held: Held) -> Self {
        E::from(held)
    }
}

/// `#[retry(upstream = EXPR)]`: an `Upstream`, a reference to one, or an
/// `Option` of either (`None`: the call is alone).
#[diagnostic::on_unimplemented(
    message = "`upstream = …` must be a `nika_retry::upstream::Upstream`, a reference to one, or an `Option` of either, not `{Self}`",
    label = "expected `Upstream`, `&Upstream`, `Option<Upstream>` or `Option<&Upstream>`"
)]
pub trait AsUpstream {
    /// The upstream, if any.
    fn as_upstream(&self) -> Option<&Upstream>;
}

impl AsUpstream for Upstream {
    fn as_upstream(&self) -> Option<&Upstream> {
        Some(self)
    }
}

impl<U: AsUpstream + ?Sized> AsUpstream for &U {
    fn as_upstream(&self) -> Option<&Upstream> {
        (**self).as_upstream()
    }
}

impl<U: AsUpstream> AsUpstream for Option<U> {
    fn as_upstream(&self) -> Option<&Upstream> {
        self.as_ref().and_then(AsUpstream::as_upstream)
    }
}

/// An argument that the body of a `#[retry]` fn moves: every attempt runs
/// the body again, so each needs its own value. The macro checks this at
/// each use it can tell is a move, so that the error points at that use and
/// names `clone(…)` (rustc would say "value moved here, in previous
/// iteration of loop" at the attribute).
///
/// The shape keeps rustc's error to what the user can act on. The check is
/// the trait's own fn, called by path: the `Self: MovedByEachAttempt<T>` it
/// needs is the trait's, which rustc reports without a "required by a bound
/// in" note pointing here (a free fn with the bound added one). `T` is
/// always `Self`: it exists so that `&Self` does not implement the trait,
/// else rustc, seeing `&arg` would satisfy it, suggests borrowing at the
/// argument and drops the label and note below. The impl stays recommended
/// (no `#[diagnostic::do_not_recommend]`), so the help reads "the trait
/// `Copy` is not implemented for …" and, for a type parameter, rustc
/// suggests adding `Copy` to its bounds rather than this trait; the price is
/// one line, "required for `…` to implement `…MovedByEachAttempt<…>`", which
/// rustc prints for any blanket impl.
#[diagnostic::on_unimplemented(
    message = "the body moves this argument, and each attempt of `#[retry]` runs the body again: list it in `clone(…)` of `#[retry]` so that each attempt moves its own clone",
    label = "moved by every attempt; `{Self}` is not `Copy`",
    note = "`clone(arg)` clones the caller's value for each attempt (it needs `{Self}: Clone`); or lend it (`&arg`) where the callee can take a reference"
)]
pub trait MovedByEachAttempt<T: ?Sized> {
    /// Checks that `_value`, which the body moves, can be moved by each
    /// attempt. The closure is never called.
    #[inline(always)]
    fn moved_by_each_attempt<'a>(_value: impl FnOnce() -> &'a Self)
    where
        Self: 'a,
    {
    }
}

impl<T: Copy> MovedByEachAttempt<T> for T {}
