//! [`Store`]: where an upstream's hold lives beyond one process.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::HoldReason;
use super::state::MAX_HOLD;

/// What a store call returns: it may wait on the network, and fail.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = std::io::Result<T>> + Send + 'a>>;

/// Keeps the holds of upstreams where several [`Upstream`](super::Upstream)s
/// see them: every process of a fleet, on a shared server.
///
/// Holds are durations, measured by the store's own clock (so that no two
/// processes' clocks are compared), and only ever extended. Every attempt
/// of an upstream with a store asks it first; a store that fails or takes
/// longer than [`STORE_WAIT`] is passed over for that attempt, and the
/// upstream goes on with its own in-process state.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{HoldReason, InProcess, Store};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let store = InProcess::default();
/// store.hold("openai/gpt-4o", Duration::from_secs(20), HoldReason::ServerHint);
/// store.hold("openai/gpt-4o", Duration::from_secs(5), HoldReason::ByHand); // shorter: ignored
/// let held = store.held_for("openai/gpt-4o").await.unwrap();
/// assert_eq!(held, Some((Duration::from_secs(20), HoldReason::ServerHint)));
/// # }
/// ```
pub trait Store: fmt::Debug + Send + Sync + 'static {
    /// What is left of `upstream`'s hold, and why; `None` if it is not held.
    fn held_for<'a>(&'a self, upstream: &'a str)
    -> StoreFuture<'a, Option<(Duration, HoldReason)>>;

    /// Holds `upstream` for `held_for` from now, unless it is held longer.
    /// Never blocks: a store on the network sends it in the background.
    fn hold(&self, upstream: &str, held_for: Duration, reason: HoldReason);
}

/// The longest an attempt waits for its upstream's store before it goes on
/// with the in-process state.
pub const STORE_WAIT: Duration = Duration::from_millis(50);

/// A store in this process's memory: upstreams of one name that share it
/// share their holds. Clones share one map.
#[derive(Clone, Default)]
pub struct InProcess {
    holds: Arc<Mutex<HashMap<String, (Instant, HoldReason)>>>,
}

impl fmt::Debug for InProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcess").finish_non_exhaustive()
    }
}

impl Store for InProcess {
    fn held_for<'a>(
        &'a self,
        upstream: &'a str,
    ) -> StoreFuture<'a, Option<(Duration, HoldReason)>> {
        let now = Instant::now();
        let holds = self.holds.lock().unwrap_or_else(PoisonError::into_inner);
        let left = holds
            .get(upstream)
            .map(|&(until, reason)| (until.saturating_duration_since(now), reason))
            .filter(|(left, _)| !left.is_zero());
        Box::pin(core::future::ready(Ok(left)))
    }

    fn hold(&self, upstream: &str, held_for: Duration, reason: HoldReason) {
        let until = Instant::now() + held_for.min(MAX_HOLD);
        let mut holds = self.holds.lock().unwrap_or_else(PoisonError::into_inner);
        match holds.get_mut(upstream) {
            Some(hold) if hold.0 >= until => {}
            Some(hold) => *hold = (until, reason),
            None => {
                holds.insert(upstream.to_owned(), (until, reason));
            }
        }
    }
}
