//! `reqwest` support (feature `reqwest`): classify its errors and responses.

use std::time::SystemTime;

use crate::http::{response_category, retry_hint, status_category, status_reached};
use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::reached::Reached;

#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
impl Classify for reqwest::Error {
    /// A [`TimeoutError`](crate::TimeoutError) in its source chain as that
    /// timeout; a status error by its status; a failure of the connection itself
    /// (refused, reset, stalled: an `io::Error` anywhere in the source chain,
    /// or a connect, timeout, request or body error) is transient; a builder,
    /// redirect or decode error is permanent.
    fn category(&self) -> ErrorCategory {
        // A limit of ours that expired inside reqwest (the connect limit of
        // `http::client_builder`) classifies as that limit.
        if let Some(timeout) = crate::vocab::timeout_error::TimeoutError::find(self) {
            return timeout.category();
        }
        if let Some(status) = self.status() {
            return status_category(status.as_u16());
        }
        // A body cut by a reset surfaces as a decode error whose source is the io error.
        if let Some(io) = io_source(self) {
            return crate::vocab::classify::io_kind_category(io.kind());
        }
        if self.is_builder() || self.is_redirect() || self.is_decode() {
            return ErrorCategory::Permanent;
        }
        if self.is_connect() || self.is_timeout() || self.is_request() || self.is_body() {
            return ErrorCategory::Transient;
        }
        ErrorCategory::Permanent
    }

    /// The [`TimeoutError`](crate::TimeoutError) in its sources: the connect
    /// limit that expired in the connector of
    /// [`client_builder`](crate::http::client_builder). reqwest's own
    /// timeouts (`ClientBuilder::timeout`) are not one.
    fn timeout(&self) -> Option<&crate::vocab::timeout_error::TimeoutError> {
        crate::vocab::timeout_error::TimeoutError::find(self)
    }

    /// A limit of ours in its sources as that limit says (`connect`: `No`);
    /// a status error by its status ([`status_reached`]: 429, 503, 408 are
    /// `Refused`); a connect error (`is_connect()`) `No`; an `io::Error` in
    /// its sources by kind; anything else `Maybe`.
    fn reached(&self) -> Reached {
        if let Some(timeout) = crate::vocab::timeout_error::TimeoutError::find(self) {
            return timeout.reached();
        }
        if let Some(status) = self.status() {
            return status_reached(status.as_u16());
        }
        if self.is_connect() {
            return Reached::No;
        }
        io_source(self).map_or(Reached::Maybe, |io| {
            crate::vocab::reached::io_kind_reached(io.kind())
        })
    }
}

/// The first `io::Error` in the source chain of `error`.
fn io_source(error: &reqwest::Error) -> Option<&std::io::Error> {
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = e.source();
    }
    None
}

/// The category of a response and the server's wait hint from its headers
/// (`retry-after-ms`, `x-amz-retry-after`, `grpc-retry-pushback-ms`, then
/// `Retry-After` in either form), for a transport that turns a non-success
/// response into its own error. The category is the status's, unless an
/// `x-should-retry: true / false` header says otherwise
/// ([`response_category`](crate::http::response_category)).
///
/// Whether the attempt reached the other side is its companion,
/// [`response_reached`].
///
/// ```
/// # async fn demo(response: reqwest::Response) {
/// let (category, hint) = nika_retry::http::classify_response(&response);
/// let reached = nika_retry::http::response_reached(&response);
/// # }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub fn classify_response(
    response: &reqwest::Response,
) -> (ErrorCategory, Option<std::time::Duration>) {
    (
        response_category(response.status().as_u16(), response.headers()),
        retry_hint(response.headers(), SystemTime::now()),
    )
}

/// Whether a non-success response says that the server did not act on the
/// request: `Refused` for 429, 503 and 408 ([`status_reached`]), `Maybe`
/// otherwise. The companion of [`classify_response`], for an error type
/// that keeps it (`#[category(…, reached = …)]` fixed per variant, or a
/// hand-written [`Classify::reached`]).
///
/// ```
/// # async fn demo(response: reqwest::Response) {
/// use nika_retry::Reached;
///
/// if nika_retry::http::response_reached(&response) == Reached::Refused {
///     // Safe to send again, even for a call that is not idempotent.
/// }
/// # }
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "reqwest")))]
pub fn response_reached(response: &reqwest::Response) -> Reached {
    status_reached(response.status().as_u16())
}
