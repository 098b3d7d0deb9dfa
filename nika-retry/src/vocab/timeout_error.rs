//! [`TimeoutError`]: which time limit expired, how long it was and whose it was.

use crate::vocab::layer::Layer;
use core::fmt;
use core::time::Duration;

/// The boundary a time limit guards (ADR-019 "Timeout ownership": connect and
/// read belong to the http transport, a tool's and a task's limits to their layer).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Boundary {
    /// Establishing a connection: what the body wraps in [`connect`](crate::connect).
    Connect,
    /// Inactivity: the attempt went this long without progress
    /// (`#[timeout(read = …)]`, as an HTTP client's read timeout).
    Read,
    /// One attempt's whole duration (`#[timeout(attempt = …)]`).
    Attempt,
    /// The whole call, its retries and its sleeps (`#[timeout(total = …)]`).
    Total,
}

impl Boundary {
    /// The lowercase name, as the attribute key spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Boundary::Connect => "connect",
            Boundary::Read => "read",
            Boundary::Attempt => "attempt",
            Boundary::Total => "total",
        }
    }

    /// Whether the limit applies to one attempt (so a retry gets a fresh one).
    pub const fn is_per_attempt(self) -> bool {
        !matches!(self, Boundary::Total)
    }
}

impl fmt::Display for Boundary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A time limit expired.
///
/// A per-attempt boundary ([`Connect`](Boundary::Connect), [`Read`](Boundary::Read),
/// [`Attempt`](Boundary::Attempt)) classifies as
/// [`Transient`](crate::ErrorCategory::Transient): the next attempt may be
/// faster. [`Total`](Boundary::Total) classifies as
/// [`Permanent`](crate::ErrorCategory::Permanent): there is no time left to retry in.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::{Boundary, Classify, ErrorCategory, Layer, TimeoutError};
///
/// let err = TimeoutError::new(Boundary::Read, Duration::from_secs(120), Layer::Http);
/// assert_eq!(err.to_string(), "read timeout of 2m expired (layer http)");
/// assert_eq!(err.category(), ErrorCategory::Transient);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TimeoutError {
    boundary: Boundary,
    limit: Duration,
    layer: Layer,
}

impl TimeoutError {
    /// A timeout of `boundary` after `limit`, owned by `layer`.
    pub const fn new(boundary: Boundary, limit: Duration, layer: Layer) -> TimeoutError {
        TimeoutError {
            boundary,
            limit,
            layer,
        }
    }

    /// Which boundary expired.
    pub const fn boundary(&self) -> Boundary {
        self.boundary
    }

    /// The limit that expired.
    pub const fn limit(&self) -> Duration {
        self.limit
    }

    /// The layer whose limit it was.
    pub const fn layer(&self) -> Layer {
        self.layer
    }

    /// The `TimeoutError` in `error` or in its chain of sources: where a
    /// library such as reqwest wraps the one a connect limit produced.
    ///
    /// **Not through `#[error(transparent)]`.** thiserror's `transparent`
    /// forwards `source()` to the inner error's own source, so for the error
    /// shape these docs recommend, `#[error(transparent)] #[category(transparent)]
    /// Timeout(#[from] TimeoutError)`, `find` returns `None` for exactly that
    /// variant: the `TimeoutError` is never anyone's source. Ask the error
    /// itself with [`Classify::timeout`](crate::Classify::timeout), which the
    /// derive implements for that variant (and `io::Error` and
    /// `reqwest::Error` implement from their sources).
    ///
    /// ```
    /// use std::io;
    /// use std::time::Duration;
    /// use nika_retry::{Boundary, Layer, TimeoutError};
    ///
    /// let connect = TimeoutError::new(Boundary::Connect, Duration::from_secs(10), Layer::Http);
    /// let wrapped = io::Error::other(io::Error::from(connect.clone()));
    /// assert_eq!(TimeoutError::find(&wrapped), Some(&connect));
    /// assert_eq!(TimeoutError::find(&io::Error::other("no")), None);
    /// ```
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a TimeoutError> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(timeout) = error.downcast_ref::<TimeoutError>() {
                return Some(timeout);
            }
            // An `io::Error`'s `source` skips the error it holds.
            next = match error.downcast_ref::<std::io::Error>() {
                Some(io) => io.get_ref().map(|inner| inner as _),
                None => error.source(),
            };
        }
        None
    }
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} timeout of {} expired (layer {})",
            self.boundary,
            humantime::format_duration(self.limit),
            self.layer
        )
    }
}

impl std::error::Error for TimeoutError {}

/// An `io::Error` of kind [`TimedOut`](std::io::ErrorKind::TimedOut) that
/// holds the `TimeoutError` as its inner error, as tokio does for its
/// `Elapsed`: a fn returning `io::Error` (a tool, a shell command) takes
/// `#[timeout]` and [`task::scope`](crate::task::scope) as it is.
/// [`get_ref`](std::io::Error::get_ref) and
/// [`downcast`](std::io::Error::downcast) give the `TimeoutError` back, and
/// [`Classify`](crate::Classify) for `io::Error` classifies such an error as
/// the `TimeoutError` it holds: a `Total` expiry stays permanent.
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use nika_retry::{Boundary, Classify, ErrorCategory, Layer, TimeoutError};
///
/// let total = TimeoutError::new(Boundary::Total, Duration::from_secs(5), Layer::Tool);
/// let err = io::Error::from(total.clone());
/// assert_eq!(err.kind(), io::ErrorKind::TimedOut);
/// assert_eq!(err.category(), ErrorCategory::Permanent);
/// assert_eq!(err.get_ref().and_then(|e| e.downcast_ref::<TimeoutError>()), Some(&total));
/// assert_eq!(err.downcast::<TimeoutError>().ok(), Some(total));
/// ```
impl From<TimeoutError> for std::io::Error {
    fn from(error: TimeoutError) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::TimedOut, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_boundary_limit_and_layer() {
        let err = TimeoutError::new(
            Boundary::Total,
            Duration::from_millis(1500),
            Layer::Provider,
        );
        assert_eq!(
            err.to_string(),
            "total timeout of 1s 500ms expired (layer provider)"
        );
        assert!(!Boundary::Total.is_per_attempt());
        assert!(Boundary::Connect.is_per_attempt());
    }
}
