//! What `#[derive(Classify)]` calls on the fields it names.

use crate::vocab::category::ErrorCategory;
use crate::vocab::timeout_error::TimeoutError;
use core::time::Duration;

/// `#[category(http_status = field)]`: a status code, or `None` when the
/// request got no response at all.
#[diagnostic::on_unimplemented(
    message = "`http_status = …` names a field of type `{Self}`, which is not an HTTP status",
    label = "expected `u16`, `Option<u16>` or `StatusCode`",
    note = "`http::StatusCode` (`reqwest::StatusCode`) needs nika-retry's feature `reqwest`; for another type, keep the code in a `u16` field"
)]
pub trait HttpStatus {
    /// The status code; `None` if there was no response.
    fn status(&self) -> Option<u16>;
}

impl HttpStatus for u16 {
    fn status(&self) -> Option<u16> {
        Some(*self)
    }
}

#[cfg(feature = "reqwest")]
impl HttpStatus for reqwest::StatusCode {
    fn status(&self) -> Option<u16> {
        Some(self.as_u16())
    }
}

impl<S: HttpStatus> HttpStatus for Option<S> {
    fn status(&self) -> Option<u16> {
        self.as_ref().and_then(HttpStatus::status)
    }
}

/// The category of the status in a `http_status` field. No status means the
/// request failed before a response, as a connection does: transient.
#[inline]
pub fn status_category<S: HttpStatus + ?Sized>(status: &S) -> ErrorCategory {
    match status.status() {
        Some(code) => crate::http::status_category(code),
        None => ErrorCategory::Transient,
    }
}

/// What the status in a `http_status` field says the attempt reached (429,
/// 503, 408: refused). No status: the request may have been sent.
#[inline]
pub fn status_reached<S: HttpStatus + ?Sized>(status: &S) -> crate::vocab::reached::Reached {
    match status.status() {
        Some(code) => crate::http::status_reached(code),
        None => crate::vocab::reached::Reached::Maybe,
    }
}

/// `#[category(from = field)]`: the category itself, decided at run time.
#[diagnostic::on_unimplemented(
    message = "`from = …` names a field of type `{Self}`; it takes an `ErrorCategory`",
    label = "expected `nika_retry::ErrorCategory`",
    note = "keep the category `nika_retry::http::classify_response` returns in the field; for a status code, use `http_status = field`"
)]
pub trait CategoryField {
    /// The category.
    fn category(&self) -> ErrorCategory;
}

impl CategoryField for ErrorCategory {
    fn category(&self) -> ErrorCategory {
        *self
    }
}

/// The category in a `from` field.
#[inline]
pub fn category_from<C: CategoryField + ?Sized>(field: &C) -> ErrorCategory {
    field.category()
}

/// `#[category(retry_after = field)]`: a `Duration` or `Option<Duration>`.
#[diagnostic::on_unimplemented(
    message = "`retry_after = …` names a field of type `{Self}`; it takes a `Duration` or an `Option<Duration>`",
    label = "expected `Duration` or `Option<Duration>` (for milliseconds, use `retry_after_ms`)"
)]
pub trait DurationHint {
    /// The hint.
    fn hint(&self) -> Option<Duration>;
}

impl DurationHint for Duration {
    fn hint(&self) -> Option<Duration> {
        Some(*self)
    }
}

impl DurationHint for Option<Duration> {
    fn hint(&self) -> Option<Duration> {
        *self
    }
}

/// `#[category(retry_after_ms = field)]`: a `u64` or `Option<u64>` of milliseconds.
#[diagnostic::on_unimplemented(
    message = "`retry_after_ms = …` names a field of type `{Self}`; it takes a `u64` or an `Option<u64>` of milliseconds",
    label = "expected `u64` or `Option<u64>` (for a `Duration`, use `retry_after`)"
)]
pub trait MillisHint {
    /// The hint.
    fn hint(&self) -> Option<Duration>;
}

impl MillisHint for u64 {
    fn hint(&self) -> Option<Duration> {
        Some(Duration::from_millis(*self))
    }
}

impl MillisHint for Option<u64> {
    fn hint(&self) -> Option<Duration> {
        self.map(Duration::from_millis)
    }
}

/// The hint in a `retry_after` field.
#[inline]
pub fn hint_duration<H: DurationHint + ?Sized>(hint: &H) -> Option<Duration> {
    hint.hint()
}

/// The hint in a `retry_after_ms` field.
#[inline]
pub fn hint_millis<H: MillisHint + ?Sized>(hint: &H) -> Option<Duration> {
    hint.hint()
}

/// A variant's one field whose type is written `…TimeoutError`, for the
/// derived `Classify::timeout`: ours gives itself, another crate's type of
/// that name `None`, so that such a type compiles as it did. Autoref
/// specialisation: on `(&&TimeoutProbe(field)).timeout_field()`, method
/// lookup tries `&&TimeoutProbe<TimeoutError>` ([`OurTimeout`]) before
/// `&TimeoutProbe<T>` ([`NotOurTimeout`]).
pub struct TimeoutProbe<'a, T: ?Sized>(pub &'a T);

/// The field is ours: see [`TimeoutProbe`].
pub trait OurTimeout<'a> {
    /// `Some(field)`.
    fn timeout_field(self) -> Option<&'a TimeoutError>;
}

impl<'a> OurTimeout<'a> for &&TimeoutProbe<'a, TimeoutError> {
    #[inline]
    fn timeout_field(self) -> Option<&'a TimeoutError> {
        Some(self.0)
    }
}

/// The field is another type of that name: see [`TimeoutProbe`].
pub trait NotOurTimeout<'a> {
    /// `None`.
    fn timeout_field(self) -> Option<&'a TimeoutError>;
}

impl<'a, T: ?Sized> NotOurTimeout<'a> for &TimeoutProbe<'a, T> {
    #[inline]
    fn timeout_field(self) -> Option<&'a TimeoutError> {
        None
    }
}
