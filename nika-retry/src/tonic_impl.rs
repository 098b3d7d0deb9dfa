//! [`Classify`] for a [`tonic::Status`] (feature `tonic`), after gRPC's
//! retry design (A6): what a tonic client's failed call is to the engine.

use core::time::Duration;

use tonic::{Code, Status};

use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::reached::{Reached, io_kind_reached};

/// The trailer a gRPC server pushes back with (A6): how long, in
/// milliseconds, before the client tries again; a negative or malformed
/// value says not to try again.
pub const PUSHBACK: &str = "grpc-retry-pushback-ms";

/// The server's pushback: `Some(Ok(wait))`, `Some(Err(()))` for "do not
/// retry", `None` when it says nothing.
fn pushback(status: &Status) -> Option<Result<Duration, ()>> {
    let value = status.metadata().get(PUSHBACK)?;
    let millis = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok());
    Some(match millis {
        Some(ms) if ms >= 0 => Ok(Duration::from_millis(ms.unsigned_abs())),
        _ => Err(()),
    })
}

/// The first `io::Error` in the sources of `status` (a connection refused,
/// reset, timed out under the transport).
fn io_source(status: &Status) -> Option<&std::io::Error> {
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        source = e.source();
    }
    None
}

#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
impl Classify for Status {
    /// By its code, after gRPC A6: `UNAVAILABLE` transient (the server, or
    /// the connection to it, is down for now); `RESOURCE_EXHAUSTED` rate
    /// limited; `DEADLINE_EXCEEDED` transient (the call's deadline, a
    /// timeout); `UNAUTHENTICATED` and `PERMISSION_DENIED` auth;
    /// `NOT_FOUND` not found; every other code permanent. A server's
    /// pushback that says not to retry (`grpc-retry-pushback-ms` negative or
    /// malformed) makes any code permanent.
    ///
    /// ```
    /// use nika_retry::{Classify, ErrorCategory, Reached};
    /// use std::time::Duration;
    ///
    /// let mut busy = tonic::Status::resource_exhausted("quota");
    /// busy.metadata_mut().insert("grpc-retry-pushback-ms", "1500".parse().unwrap());
    /// assert_eq!(busy.category(), ErrorCategory::RateLimited);
    /// assert_eq!(busy.retry_after(), Some(Duration::from_millis(1500)));
    /// assert_eq!(busy.reached(), Reached::Refused);
    ///
    /// assert_eq!(tonic::Status::unavailable("down").category(), ErrorCategory::Transient);
    /// assert_eq!(tonic::Status::invalid_argument("bad").category(), ErrorCategory::Permanent);
    /// ```
    fn category(&self) -> ErrorCategory {
        if let Some(Err(())) = pushback(self) {
            return ErrorCategory::Permanent;
        }
        match self.code() {
            Code::Unavailable | Code::DeadlineExceeded => ErrorCategory::Transient,
            Code::ResourceExhausted => ErrorCategory::RateLimited,
            Code::Unauthenticated | Code::PermissionDenied => ErrorCategory::Auth,
            Code::NotFound => ErrorCategory::NotFound,
            _ => ErrorCategory::Permanent,
        }
    }

    /// The server's `grpc-retry-pushback-ms`, when it is a wait.
    fn retry_after(&self) -> Option<Duration> {
        pushback(self)?.ok()
    }

    /// `UNAVAILABLE` with the transport's `io::Error` beneath it as that
    /// error says (a connection refused: `No`, the request never left);
    /// `RESOURCE_EXHAUSTED` `Refused` (the server turned it away unacted);
    /// anything else `Maybe`.
    fn reached(&self) -> Reached {
        match self.code() {
            Code::Unavailable => {
                io_source(self).map_or(Reached::Maybe, |io| io_kind_reached(io.kind()))
            }
            Code::ResourceExhausted => Reached::Refused,
            _ => Reached::Maybe,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_pushback(mut status: Status, value: &str) -> Status {
        status
            .metadata_mut()
            .insert(PUSHBACK, value.parse().unwrap());
        status
    }

    #[test]
    fn each_code_classifies_after_a6() {
        let cases = [
            (Code::Unavailable, ErrorCategory::Transient),
            (Code::DeadlineExceeded, ErrorCategory::Transient),
            (Code::ResourceExhausted, ErrorCategory::RateLimited),
            (Code::Unauthenticated, ErrorCategory::Auth),
            (Code::PermissionDenied, ErrorCategory::Auth),
            (Code::NotFound, ErrorCategory::NotFound),
            (Code::Internal, ErrorCategory::Permanent),
            (Code::Aborted, ErrorCategory::Permanent),
            (Code::InvalidArgument, ErrorCategory::Permanent),
            (Code::Unknown, ErrorCategory::Permanent),
        ];
        for (code, category) in cases {
            assert_eq!(Status::new(code, "").category(), category, "{code:?}");
        }
    }

    #[test]
    fn a_pushback_is_the_hint_and_a_negative_one_stops_retrying() {
        let busy = with_pushback(Status::resource_exhausted(""), "250");
        assert_eq!(busy.retry_after(), Some(Duration::from_millis(250)));
        assert_eq!(busy.category(), ErrorCategory::RateLimited);
        for refusal in ["-1", "soon"] {
            let stop = with_pushback(Status::unavailable(""), refusal);
            assert_eq!(stop.category(), ErrorCategory::Permanent, "{refusal}");
            assert_eq!(stop.retry_after(), None);
        }
        assert_eq!(Status::unavailable("").retry_after(), None);
    }

    #[test]
    fn unavailable_reached_as_the_transport_says() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        // What a channel's connect error is: `UNAVAILABLE` over the io error.
        let mut status = Status::unavailable("tcp connect error");
        status.set_source(std::sync::Arc::new(refused));
        assert_eq!(status.reached(), Reached::No);
        assert_eq!(Status::unavailable("").reached(), Reached::Maybe);
        assert_eq!(Status::resource_exhausted("").reached(), Reached::Refused);
        assert_eq!(Status::internal("").reached(), Reached::Maybe);
    }
}
