//! [`ErrorCategory`]: the one vocabulary every layer classifies its errors into.

use core::fmt;
use core::str::FromStr;

/// What kind of failure an error is, as far as retrying goes.
///
/// Only [`Transient`](ErrorCategory::Transient) and
/// [`RateLimited`](ErrorCategory::RateLimited) are ever retried; the other
/// three say that the same request would fail the same way again.
///
/// `Display` and `FromStr` use snake case, the spelling of the attributes and
/// of the workflow YAML:
///
/// ```
/// use nika_retry::ErrorCategory;
///
/// assert_eq!(ErrorCategory::RateLimited.to_string(), "rate_limited");
/// assert_eq!("not_found".parse(), Ok(ErrorCategory::NotFound));
/// assert!(ErrorCategory::Transient.is_retryable());
/// assert!(!ErrorCategory::Auth.is_retryable());
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCategory {
    /// A failure that may not happen again: connection refused or reset, 5xx, a timeout.
    Transient,
    /// The server asked the client to slow down (HTTP 429), often with a hint of how long.
    RateLimited,
    /// The credentials were refused (HTTP 401 / 403): retrying cannot fix them.
    Auth,
    /// What was asked for does not exist (HTTP 404 / 410).
    NotFound,
    /// Anything else: a bad request, a semantic failure, a bug.
    Permanent,
}

impl ErrorCategory {
    /// Every category, in declaration order.
    pub const ALL: [ErrorCategory; 5] = [
        ErrorCategory::Transient,
        ErrorCategory::RateLimited,
        ErrorCategory::Auth,
        ErrorCategory::NotFound,
        ErrorCategory::Permanent,
    ];

    /// The snake-case name, as `Display` writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::Transient => "transient",
            ErrorCategory::RateLimited => "rate_limited",
            ErrorCategory::Auth => "auth",
            ErrorCategory::NotFound => "not_found",
            ErrorCategory::Permanent => "permanent",
        }
    }

    /// Whether any retry policy may retry this category: only `Transient` and `RateLimited`.
    pub const fn is_retryable(self) -> bool {
        matches!(self, ErrorCategory::Transient | ErrorCategory::RateLimited)
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The error of parsing an [`ErrorCategory`] from a string that names none.
///
/// The refused text is `.0`. `#[non_exhaustive]`: the crate's rule for
/// public structs (only the crate builds one).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown error category `{0}`; expected one of transient, rate_limited, auth, not_found, permanent"
)]
pub struct ParseCategoryError(pub String);

impl FromStr for ErrorCategory {
    type Err = ParseCategoryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorCategory::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| ParseCategoryError(s.to_owned()))
    }
}

/// A set of [`ErrorCategory`] values: the categories a [`RetryConfig`](crate::RetryConfig) retries.
///
/// ```
/// use nika_retry::{CategorySet, ErrorCategory};
///
/// let set = CategorySet::RETRYABLE;
/// assert!(set.contains(ErrorCategory::RateLimited));
/// assert_eq!(set.to_string(), "[transient, rate_limited]");
/// let only: CategorySet = [ErrorCategory::Transient].into_iter().collect();
/// assert!(!only.contains(ErrorCategory::RateLimited));
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CategorySet(u8);

impl CategorySet {
    /// The empty set: nothing is retried.
    pub const EMPTY: CategorySet = CategorySet(0);
    /// `Transient` alone: what the `http` layer retries.
    pub const TRANSIENT: CategorySet = CategorySet(ErrorCategory::Transient.bit());
    /// `Transient` and `RateLimited`: every category that may be retried.
    pub const RETRYABLE: CategorySet =
        CategorySet(ErrorCategory::Transient.bit() | ErrorCategory::RateLimited.bit());

    /// This set with `category` added.
    #[must_use]
    pub const fn with(self, category: ErrorCategory) -> CategorySet {
        CategorySet(self.0 | category.bit())
    }

    /// Whether `category` is in the set.
    pub const fn contains(self, category: ErrorCategory) -> bool {
        self.0 & category.bit() != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The categories in the set, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = ErrorCategory> {
        ErrorCategory::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }

    /// The first category in the set that may never be retried, if any.
    pub fn first_unretryable(self) -> Option<ErrorCategory> {
        self.iter().find(|c| !c.is_retryable())
    }
}

impl FromIterator<ErrorCategory> for CategorySet {
    fn from_iter<I: IntoIterator<Item = ErrorCategory>>(iter: I) -> Self {
        iter.into_iter().fold(CategorySet::EMPTY, CategorySet::with)
    }
}

impl fmt::Debug for CategorySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl fmt::Display for CategorySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, c) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(c.as_str())?;
        }
        f.write_str("]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_and_from_str_round_trip_every_category() {
        for c in ErrorCategory::ALL {
            assert_eq!(c.to_string().parse::<ErrorCategory>(), Ok(c));
        }
        assert_eq!(ErrorCategory::NotFound.to_string(), "not_found");
    }

    #[test]
    fn from_str_rejects_other_spellings() {
        for bad in ["RateLimited", "rate-limited", "", " transient"] {
            assert_eq!(
                bad.parse::<ErrorCategory>(),
                Err(ParseCategoryError(bad.to_owned()))
            );
        }
    }

    #[test]
    fn only_transient_and_rate_limited_are_retryable() {
        let retryable: Vec<_> = ErrorCategory::ALL
            .into_iter()
            .filter(|c| c.is_retryable())
            .collect();
        assert_eq!(
            retryable,
            [ErrorCategory::Transient, ErrorCategory::RateLimited]
        );
    }

    #[test]
    fn set_membership_and_unretryable_detection() {
        let set: CategorySet = [ErrorCategory::Transient, ErrorCategory::Auth]
            .into_iter()
            .collect();
        assert!(set.contains(ErrorCategory::Transient));
        assert!(!set.contains(ErrorCategory::RateLimited));
        assert_eq!(set.first_unretryable(), Some(ErrorCategory::Auth));
        assert_eq!(CategorySet::RETRYABLE.first_unretryable(), None);
        assert!(CategorySet::EMPTY.is_empty());
        assert_eq!(format!("{set:?}"), "{Transient, Auth}");
    }
}
