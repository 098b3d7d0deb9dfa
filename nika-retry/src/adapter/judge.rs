//! An attempt's result as the engine reads it: an error through its
//! [`Classify`], a response through its status and headers, as
//! [`http::classify_response`](crate::http) does for reqwest.

use core::time::Duration;
use std::time::SystemTime;

use crate::engine::Failure;
use crate::http::{Headers, response_category, retry_hint, status_reached};
use crate::run::RetryResult;
use crate::upstream::{Upstream, in_force};
use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::reached::Reached;
use crate::vocab::timeout_error::TimeoutError;

/// A response of `status` with `headers` as a failure, or `None` for one
/// that is not (below 400: a success, a redirect the inner service did not
/// follow). Its category is the status's unless `x-should-retry` says
/// otherwise, its hint the server's (`retry-after-ms`, `Retry-After`, …),
/// and it reached the server as the status says (429, 503, 408: refused).
/// Its rate-limit headers, a success's too, go to `upstream` (the
/// adapter's own, else the one in force around the request).
pub(crate) fn response_failure<H: Headers + ?Sized>(
    upstream: Option<&Upstream>,
    status: u16,
    headers: &H,
) -> Option<Failure> {
    observe(upstream, headers);
    if status < 400 {
        return None;
    }
    let category = response_category(status, headers);
    let hint = retry_hint(headers, SystemTime::now());
    Some(Failure::new(category, hint).with_reached(status_reached(status)))
}

/// `headers` to the upstream that counts them, if any.
fn observe<H: Headers + ?Sized>(upstream: Option<&Upstream>, headers: &H) {
    match upstream {
        Some(upstream) => upstream.observe(headers),
        // The upstream in force around the request (an annotated fn's),
        // read where it is kept: `upstream::current()` only forwards there.
        None => {
            if let Some(upstream) = in_force::upstream() {
                upstream.observe(headers);
            }
        }
    }
}

/// What failed in an attempt: the service's error, or a response that is a
/// failure.
pub(super) enum Judged<'a, E> {
    Error(&'a E),
    Response(Failure),
}

impl<E: Classify> Classify for Judged<'_, E> {
    fn category(&self) -> ErrorCategory {
        match self {
            Judged::Error(e) => e.category(),
            Judged::Response(f) => f.category,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Judged::Error(e) => e.retry_after(),
            Judged::Response(f) => f.retry_after,
        }
    }

    fn timeout(&self) -> Option<&TimeoutError> {
        match self {
            Judged::Error(e) => e.timeout(),
            Judged::Response(_) => None,
        }
    }

    fn reached(&self) -> Reached {
        match self {
            Judged::Error(e) => e.reached(),
            Judged::Response(f) => f.reached,
        }
    }
}

/// An attempt's result for `Call::next_after`: its failure, if it failed,
/// and whether its request was kept for another attempt (a copy was sent).
pub(super) struct Verdict<'a, E>(pub(super) Option<Judged<'a, E>>, pub(super) bool);

impl<'a, E> RetryResult for Verdict<'a, E> {
    type Error = Judged<'a, E>;

    #[inline(always)]
    fn error(&self) -> Option<&Judged<'a, E>> {
        self.0.as_ref()
    }

    #[inline(always)]
    fn replayable(&self) -> bool {
        self.1
    }
}
