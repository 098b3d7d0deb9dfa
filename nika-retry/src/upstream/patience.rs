//! [`Patience`]: how long a call may wait for its upstream, beneath every
//! wait that honours it (the hold's, the pacer's, the store's).

use core::time::Duration;

use tokio::time::Instant;

/// How long a call may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Patience {
    /// The longest server hint the call sleeps on (`max_retry_after`).
    pub(crate) cap: Duration,
    /// The call's `total` deadline.
    pub(crate) deadline: Option<Instant>,
}
