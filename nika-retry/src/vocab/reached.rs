//! [`Reached`]: whether a failed attempt may have reached the other side,
//! and so may have had its effect there.

use crate::vocab::category::ErrorCategory;
use core::fmt;
use std::io;

/// Whether a failed attempt may have reached the other side (and done
/// there what it asked for): what a call that is not idempotent
/// (`#[retry(…, idempotent = false)]`) needs to know before it repeats it.
///
/// Such a call retries `No` and `Refused`, which cannot have taken effect,
/// and gives up at once on `Maybe`
/// ([`GiveUp::MayHaveTakenEffect`](crate::engine::GiveUp::MayHaveTakenEffect)).
/// [`Classify::reached`](crate::Classify::reached) says which one an error
/// is; `Display` writes the snake-case name.
///
/// ```
/// use nika_retry::{ErrorCategory, Reached};
///
/// assert_eq!(Reached::default_for(ErrorCategory::RateLimited), Reached::Refused);
/// assert_eq!(Reached::default_for(ErrorCategory::Transient), Reached::Maybe);
/// assert!(Reached::No.is_repeatable() && !Reached::Maybe.is_repeatable());
/// assert_eq!(Reached::Refused.to_string(), "refused");
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reached {
    /// The request never left: the connection was refused, the name did
    /// not resolve, the TLS handshake failed, a `connect` limit expired.
    No,
    /// The other side answered that it did not act on it: HTTP 429, 503, 408.
    Refused,
    /// Anything else: it may have been received and acted on (a `read` or
    /// `attempt` timeout, a reset after the request was written, a 500,
    /// 502 or 504, a process's exit code).
    Maybe,
}

impl Reached {
    /// What an error of `category` says when it says nothing more:
    /// `RateLimited` is `Refused` (the server turned the request away),
    /// every other category `Maybe`.
    pub const fn default_for(category: ErrorCategory) -> Reached {
        match category {
            ErrorCategory::RateLimited => Reached::Refused,
            _ => Reached::Maybe,
        }
    }

    /// Whether an attempt that failed so certainly had no effect: `No`
    /// and `Refused`, the failures a call that is not idempotent retries.
    pub const fn is_repeatable(self) -> bool {
        matches!(self, Reached::No | Reached::Refused)
    }

    /// The snake-case name, as `Display` writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reached::No => "no",
            Reached::Refused => "refused",
            Reached::Maybe => "maybe",
        }
    }
}

impl fmt::Display for Reached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Whether an [`io::Error`] of `kind` may have reached the other side: a
/// connection refused, a host or network unreachable and an address not
/// available never left (`No`); anything else may have (`Maybe`), a reset
/// included, since it can come after the request was written.
///
/// ```
/// use std::io::ErrorKind;
/// use nika_retry::{io_kind_reached, Reached};
///
/// assert_eq!(io_kind_reached(ErrorKind::ConnectionRefused), Reached::No);
/// assert_eq!(io_kind_reached(ErrorKind::ConnectionReset), Reached::Maybe);
/// ```
pub const fn io_kind_reached(kind: io::ErrorKind) -> Reached {
    use io::ErrorKind as K;
    match kind {
        K::ConnectionRefused | K::HostUnreachable | K::NetworkUnreachable | K::AddrNotAvailable => {
            Reached::No
        }
        _ => Reached::Maybe,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_follows_the_category() {
        for category in ErrorCategory::ALL {
            let expected = if category == ErrorCategory::RateLimited {
                Reached::Refused
            } else {
                Reached::Maybe
            };
            assert_eq!(Reached::default_for(category), expected, "{category}");
        }
    }

    #[test]
    fn only_no_and_refused_are_repeatable() {
        let all = [Reached::No, Reached::Refused, Reached::Maybe];
        let repeatable: Vec<_> = all.into_iter().filter(|r| r.is_repeatable()).collect();
        assert_eq!(repeatable, [Reached::No, Reached::Refused]);
        let names: Vec<String> = all.iter().map(|r| format!("{r:>8}")).collect();
        assert_eq!(names, ["      no", " refused", "   maybe"]);
    }

    #[test]
    fn io_kinds_that_never_left() {
        use io::ErrorKind as K;
        for kind in [
            K::ConnectionRefused,
            K::HostUnreachable,
            K::NetworkUnreachable,
            K::AddrNotAvailable,
        ] {
            assert_eq!(io_kind_reached(kind), Reached::No, "{kind:?}");
        }
        for kind in [
            K::ConnectionReset,
            K::ConnectionAborted,
            K::BrokenPipe,
            K::UnexpectedEof,
            K::TimedOut,
            K::Other,
        ] {
            assert_eq!(io_kind_reached(kind), Reached::Maybe, "{kind:?}");
        }
    }
}
