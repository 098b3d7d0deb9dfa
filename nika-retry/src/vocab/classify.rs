//! [`Classify`]: how an error tells the retry loop what kind of failure it is.

use crate::vocab::category::ErrorCategory;
use crate::vocab::reached::{Reached, io_kind_reached};
use crate::vocab::timeout_error::{Boundary, TimeoutError};
use core::time::Duration;
use std::io;

/// Classifies an error for the retry loop.
///
/// Derive it with [`#[derive(Classify)]`](derive@crate::Classify), or implement it by hand:
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{Classify, ErrorCategory};
///
/// struct Throttled { wait_ms: u64 }
///
/// impl Classify for Throttled {
///     fn category(&self) -> ErrorCategory { ErrorCategory::RateLimited }
///     fn retry_after(&self) -> Option<Duration> { Some(Duration::from_millis(self.wait_ms)) }
/// }
///
/// assert_eq!(Throttled { wait_ms: 5 }.retry_after(), Some(Duration::from_millis(5)));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not implement `nika_retry::Classify`, so its errors cannot be classified for retrying",
    label = "this error type needs a retry classification",
    note = "derive it with `#[derive(nika_retry::Classify)]` and a `#[category(...)]` on each variant, or implement `Classify` by hand",
    note = "for a type from another crate, classify the variant that holds it with a category instead of `transparent`"
)]
pub trait Classify {
    /// The kind of failure this error is.
    fn category(&self) -> ErrorCategory;

    /// How long the server asked the client to wait before the next attempt, if it said.
    ///
    /// A hint replaces the computed backoff (and still uses up an attempt);
    /// one above the config's `max_retry_after` makes the call give up at once.
    fn retry_after(&self) -> Option<Duration> {
        None
    }

    /// The time limit this error is, if it is one: "was this the task's
    /// timeout?", in every error shape the crate's docs recommend.
    ///
    /// Implemented for [`TimeoutError`] (itself), `io::Error` (the
    /// `TimeoutError` inside it, if any), `reqwest::Error` (its sources,
    /// feature `reqwest`) and by `#[derive(Classify)]` for a `transparent`
    /// variant (the field's `timeout`) and a variant whose one field is a
    /// `TimeoutError`. Prefer it to [`TimeoutError::find`] on a derived
    /// error: thiserror's `#[error(transparent)]` forwards `source()` to the
    /// inner error's source, so `find` cannot see the variant's own timeout.
    ///
    /// ```
    /// use std::{io, time::Duration};
    /// use nika_retry::{Boundary, Classify, Layer, TimeoutError};
    ///
    /// let limit = TimeoutError::new(Boundary::Attempt, Duration::from_secs(5), Layer::Tool);
    /// // What a `#[timeout]` fn returning `io::Error` gives back.
    /// let err = io::Error::from(limit.clone());
    /// assert_eq!(err.timeout(), Some(&limit));
    /// assert_eq!(io::Error::other("disk full").timeout(), None);
    ///
    /// #[derive(Debug, thiserror::Error, Classify)]
    /// enum ToolError {
    ///     #[error(transparent)]
    ///     #[category(transparent)]
    ///     Timeout(#[from] TimeoutError),
    ///     #[error("exit code {0}")]
    ///     #[category(permanent)]
    ///     Exit(i32),
    /// }
    ///
    /// let err = ToolError::from(limit.clone());
    /// assert_eq!(err.timeout(), Some(&limit));
    /// assert_eq!(TimeoutError::find(&err), None, "hidden by #[error(transparent)]");
    /// assert_eq!(ToolError::Exit(75).timeout(), None);
    /// ```
    fn timeout(&self) -> Option<&TimeoutError> {
        None
    }

    /// Whether the failed attempt may have reached the other side and taken
    /// effect there: what a call that is not idempotent
    /// (`#[retry(…, idempotent = false)]`) repeats only when it certainly
    /// did not ([`Reached::No`], [`Reached::Refused`]).
    ///
    /// By default from the category ([`Reached::default_for`]):
    /// `RateLimited` is `Refused`, every other `Maybe`. Implemented for
    /// [`TimeoutError`] (a `connect` limit is `No`), `io::Error` (by kind,
    /// [`io_kind_reached`]), `reqwest::Error` (`is_connect()` is `No`, a
    /// 429, 503 or 408 `Refused`) and by `#[derive(Classify)]`
    /// (`#[category(transient, reached = no)]`, `transparent` delegating).
    ///
    /// ```
    /// use std::io;
    /// use nika_retry::{Classify, Reached};
    ///
    /// assert_eq!(io::Error::from(io::ErrorKind::ConnectionRefused).reached(), Reached::No);
    /// assert_eq!(io::Error::from(io::ErrorKind::ConnectionReset).reached(), Reached::Maybe);
    /// ```
    fn reached(&self) -> Reached {
        Reached::default_for(self.category())
    }
}

impl<T: Classify + ?Sized> Classify for &T {
    fn category(&self) -> ErrorCategory {
        (**self).category()
    }
    fn retry_after(&self) -> Option<Duration> {
        (**self).retry_after()
    }
    fn timeout(&self) -> Option<&TimeoutError> {
        (**self).timeout()
    }
    fn reached(&self) -> Reached {
        (**self).reached()
    }
}

impl<T: Classify + ?Sized> Classify for Box<T> {
    fn category(&self) -> ErrorCategory {
        (**self).category()
    }
    fn retry_after(&self) -> Option<Duration> {
        (**self).retry_after()
    }
    fn timeout(&self) -> Option<&TimeoutError> {
        (**self).timeout()
    }
    fn reached(&self) -> Reached {
        (**self).reached()
    }
}

impl Classify for TimeoutError {
    fn category(&self) -> ErrorCategory {
        if self.boundary() == Boundary::Total {
            ErrorCategory::Permanent
        } else {
            ErrorCategory::Transient
        }
    }

    /// Itself.
    fn timeout(&self) -> Option<&TimeoutError> {
        Some(self)
    }

    /// A `connect` limit expired before the connection was made: `No`;
    /// any other limit cut an attempt that may have been sent: `Maybe`.
    fn reached(&self) -> Reached {
        if self.boundary() == Boundary::Connect {
            Reached::No
        } else {
            Reached::Maybe
        }
    }
}

impl Classify for tokio::time::error::Elapsed {
    /// A plain `tokio::time::timeout` around one attempt: the next may be faster.
    fn category(&self) -> ErrorCategory {
        ErrorCategory::Transient
    }

    /// The attempt it cut may have been sent: `Maybe`.
    fn reached(&self) -> Reached {
        Reached::Maybe
    }
}

impl Classify for io::Error {
    /// By kind ([`io_kind_category`]), except an error that holds a
    /// [`TimeoutError`] (`io::Error::from(TimeoutError)`), which classifies
    /// as that `TimeoutError`: a `Total` expiry stays permanent.
    fn category(&self) -> ErrorCategory {
        match self
            .get_ref()
            .and_then(|e| e.downcast_ref::<TimeoutError>())
        {
            Some(timeout) => timeout.category(),
            None => io_kind_category(self.kind()),
        }
    }

    /// The [`TimeoutError`] it holds (`io::Error::from(TimeoutError)`), or
    /// one further down its inner errors and their sources.
    fn timeout(&self) -> Option<&TimeoutError> {
        TimeoutError::find(self)
    }

    /// By kind ([`io_kind_reached`]: refused, unreachable, address not
    /// available are `No`), except an error that holds a [`TimeoutError`],
    /// which says what that timeout says.
    fn reached(&self) -> Reached {
        match self
            .get_ref()
            .and_then(|e| e.downcast_ref::<TimeoutError>())
        {
            Some(timeout) => timeout.reached(),
            None => io_kind_reached(self.kind()),
        }
    }
}

/// The category of an [`io::ErrorKind`]: network hiccups are transient (a
/// connection refused, reset, aborted or closed mid-response, a host or
/// network unreachable or down, a timeout), `NotFound` and
/// `PermissionDenied` keep their meaning, the rest is permanent.
///
/// ```
/// use std::io::ErrorKind;
/// use nika_retry::{io_kind_category, ErrorCategory};
///
/// assert_eq!(io_kind_category(ErrorKind::ConnectionRefused), ErrorCategory::Transient);
/// assert_eq!(io_kind_category(ErrorKind::InvalidData), ErrorCategory::Permanent);
/// ```
pub fn io_kind_category(kind: io::ErrorKind) -> ErrorCategory {
    use io::ErrorKind as K;
    match kind {
        K::ConnectionRefused
        | K::ConnectionReset
        | K::ConnectionAborted
        | K::NotConnected
        | K::TimedOut
        | K::Interrupted
        | K::BrokenPipe
        | K::WouldBlock
        | K::UnexpectedEof
        | K::HostUnreachable
        | K::NetworkUnreachable
        | K::NetworkDown => ErrorCategory::Transient,
        K::NotFound => ErrorCategory::NotFound,
        K::PermissionDenied => ErrorCategory::Auth,
        _ => ErrorCategory::Permanent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::layer::Layer;
    use io::ErrorKind as K;

    #[test]
    fn io_kinds_map_as_designed() {
        let transient = [
            K::ConnectionRefused,
            K::ConnectionReset,
            K::ConnectionAborted,
            K::NotConnected,
            K::TimedOut,
            K::Interrupted,
            K::BrokenPipe,
            K::WouldBlock,
            K::UnexpectedEof,
            K::HostUnreachable,
            K::NetworkUnreachable,
            K::NetworkDown,
        ];
        for kind in transient {
            assert_eq!(
                io::Error::from(kind).category(),
                ErrorCategory::Transient,
                "{kind:?}"
            );
        }
        assert_eq!(
            io::Error::from(K::NotFound).category(),
            ErrorCategory::NotFound
        );
        assert_eq!(
            io::Error::from(K::PermissionDenied).category(),
            ErrorCategory::Auth
        );
        for kind in [K::InvalidInput, K::InvalidData, K::AlreadyExists, K::Other] {
            assert_eq!(
                io::Error::from(kind).category(),
                ErrorCategory::Permanent,
                "{kind:?}"
            );
        }
        assert_eq!(io::Error::from(K::TimedOut).retry_after(), None);
    }

    #[test]
    fn timeouts_are_transient_per_attempt_and_permanent_in_total() {
        let d = Duration::from_secs(1);
        for b in [Boundary::Connect, Boundary::Read, Boundary::Attempt] {
            assert_eq!(
                TimeoutError::new(b, d, Layer::Http).category(),
                ErrorCategory::Transient
            );
        }
        let total = TimeoutError::new(Boundary::Total, d, Layer::Http);
        assert_eq!(total.category(), ErrorCategory::Permanent);
        assert_eq!(Classify::category(&&total), ErrorCategory::Permanent);
        assert_eq!(Box::new(total).category(), ErrorCategory::Permanent);
    }

    #[test]
    fn an_io_error_holding_a_timeout_classifies_as_the_timeout() {
        let d = Duration::from_secs(1);
        let total = io::Error::from(TimeoutError::new(Boundary::Total, d, Layer::Task));
        assert_eq!(total.kind(), K::TimedOut);
        assert_eq!(total.category(), ErrorCategory::Permanent);
        let read = io::Error::from(TimeoutError::new(Boundary::Read, d, Layer::Http));
        assert_eq!(read.category(), ErrorCategory::Transient);
        // Another error inside a TimedOut io::Error keeps the kind's category.
        let other = io::Error::new(K::TimedOut, "slow disk");
        assert_eq!(other.category(), ErrorCategory::Transient);
    }

    #[test]
    fn the_timeout_is_found_in_itself_an_io_error_and_through_references() {
        let limit = TimeoutError::new(Boundary::Connect, Duration::from_secs(2), Layer::Http);
        assert_eq!(limit.timeout(), Some(&limit));
        assert_eq!(Classify::timeout(&&limit), Some(&limit));
        assert_eq!(Box::new(limit.clone()).timeout(), Some(&limit));
        // Held by an io::Error, and by one that wraps that one.
        let io = io::Error::from(limit.clone());
        assert_eq!(io.timeout(), Some(&limit));
        let wrapped = io::Error::other(io::Error::from(limit.clone()));
        assert_eq!(wrapped.timeout(), Some(&limit));
        // A TimedOut of another origin is not one of ours.
        assert_eq!(io::Error::new(K::TimedOut, "slow disk").timeout(), None);
        assert_eq!(io::Error::from(K::TimedOut).timeout(), None);
    }

    #[test]
    fn what_reached_the_other_side() {
        let d = Duration::from_secs(1);
        let limit = |b| TimeoutError::new(b, d, Layer::Http);
        assert_eq!(limit(Boundary::Connect).reached(), Reached::No);
        for b in [Boundary::Read, Boundary::Attempt, Boundary::Total] {
            assert_eq!(limit(b).reached(), Reached::Maybe, "{b}");
        }
        // Through an io::Error, a reference and a box.
        assert_eq!(
            io::Error::from(limit(Boundary::Connect)).reached(),
            Reached::No
        );
        assert_eq!(
            io::Error::from(limit(Boundary::Read)).reached(),
            Reached::Maybe
        );
        assert_eq!(Classify::reached(&&limit(Boundary::Connect)), Reached::No);
        assert_eq!(Box::new(limit(Boundary::Read)).reached(), Reached::Maybe);
        assert_eq!(io::Error::from(K::ConnectionRefused).reached(), Reached::No);
        assert_eq!(io::Error::from(K::AddrNotAvailable).reached(), Reached::No);
        assert_eq!(
            io::Error::from(K::ConnectionReset).reached(),
            Reached::Maybe
        );
        // A hand-written impl without `reached` takes it from its category.
        struct Throttled;
        impl Classify for Throttled {
            fn category(&self) -> ErrorCategory {
                ErrorCategory::RateLimited
            }
        }
        assert_eq!(Throttled.reached(), Reached::Refused);
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_elapsed_is_transient() {
        let elapsed = tokio::time::timeout(Duration::from_millis(1), core::future::pending::<()>())
            .await
            .unwrap_err();
        assert_eq!(elapsed.category(), ErrorCategory::Transient);
        assert_eq!(elapsed.timeout(), None, "tokio's, not one of ours");
        assert_eq!(elapsed.reached(), Reached::Maybe);
    }
}
