//! [`Resume`]: what the closure of [`Started::resume_with`](super::Started::resume_with)
//! is told when a stream broke after its content.

use crate::vocab::category::ErrorCategory;
use crate::vocab::classify::Classify;
use crate::vocab::timeout_error::Boundary;

/// Why a started stream is resumed, and how far it had come: given to the
/// closure of [`Started::resume_with`](super::Started::resume_with), which
/// opens the rest of the response from there.
///
/// `delivered` counts the items the caller was given, every resume's
/// included: for a server that numbers its events from 0, one item per
/// event, it is the first number still wanted (OpenAI's `starting_after`
/// is one less). A closure that continues from the text so far keeps that
/// text itself (the caller's loop appends to it; the closure reads it).
///
/// ```
/// use nika_retry::stream::Resume;
/// use nika_retry::{Boundary, ErrorCategory, Layer, TimeoutError};
///
/// let stall = TimeoutError::new(Boundary::Read, std::time::Duration::from_secs(30), Layer::Provider);
/// let resume = Resume::new(12, 2, &stall);
/// assert_eq!(resume.delivered(), 12);
/// assert_eq!(resume.attempt(), 2);
/// assert_eq!(resume.category(), ErrorCategory::Transient);
/// assert_eq!(resume.boundary(), Some(Boundary::Read));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resume {
    delivered: u64,
    attempt: u32,
    category: ErrorCategory,
    boundary: Option<Boundary>,
}

impl Resume {
    /// A resume, as attempt `attempt` of the call, after `delivered` items
    /// and the error `broke` (for tests of a closure; the stream makes
    /// its own).
    pub fn new<E: Classify + ?Sized>(delivered: u64, attempt: u32, broke: &E) -> Resume {
        Resume {
            delivered,
            attempt,
            category: broke.category(),
            boundary: broke.timeout().map(|t| t.boundary()),
        }
    }

    /// The items the caller was given before this resume.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The attempt of the call this resume is (1-based; the first resume of
    /// a call whose first attempt delivered is attempt 2), as
    /// [`current_attempt`](crate::current_attempt) says inside it too.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The category of the error that broke the stream (or of the last
    /// resume's, if it failed before its content).
    pub fn category(&self) -> ErrorCategory {
        self.category
    }

    /// The limit that broke it, if one did: `Read` for a stall.
    pub fn boundary(&self) -> Option<Boundary> {
        self.boundary
    }
}
