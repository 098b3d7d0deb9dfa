//! Whether the store answers: an outage is warned of once, and while it
//! lasts the store is asked again only now and then, so that an attempt
//! does not wait [`STORE_WAIT`](crate::upstream::STORE_WAIT) each time.

use core::time::Duration;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::time::Instant;

/// How long a store that did not answer is passed over before it is asked
/// again.
pub(super) const ASK_AGAIN: Duration = Duration::from_millis(500);

#[derive(Default)]
pub(super) struct Health {
    down: AtomicBool,
    /// While down: when to ask again.
    again: Mutex<Option<Instant>>,
    outages: AtomicU64,
}

impl Health {
    /// Whether to ask the store now (it answers, or it is time to try it again).
    pub(super) fn ask(&self) -> bool {
        if !self.down.load(Ordering::Acquire) {
            return true;
        }
        let mut again = self.again.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match *again {
            Some(at) if at > now => false,
            _ => {
                // One caller tries; the others pass it over meanwhile.
                *again = Some(now + ASK_AGAIN);
                true
            }
        }
    }

    /// It answered: an outage is over.
    pub(super) fn answered(&self, store: &dyn core::fmt::Display) {
        if self.down.swap(false, Ordering::AcqRel) {
            #[cfg(feature = "tracing")]
            tracing::warn!(target: "nika_retry", store = %store, "the upstream store answers again: upstreams share their state again");
            #[cfg(not(feature = "tracing"))]
            let _ = store;
        }
    }

    /// It failed (`why`, with no secret in it): the first failure of an
    /// outage warns.
    pub(super) fn failed(&self, store: &dyn core::fmt::Display, why: &str) {
        *self.again.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Instant::now() + ASK_AGAIN);
        if !self.down.swap(true, Ordering::AcqRel) {
            self.outages.fetch_add(1, Ordering::Relaxed);
            #[cfg(feature = "tracing")]
            tracing::warn!(target: "nika_retry", store = %store, error = why, "the upstream store does not answer: upstreams go on with their in-process state");
            #[cfg(not(feature = "tracing"))]
            let _ = (store, why);
        }
    }

    pub(super) fn outages(&self) -> u64 {
        self.outages.load(Ordering::Relaxed)
    }

    pub(super) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn after_a_failure_the_store_is_asked_again_every_half_second_by_one_caller() {
        let health = Health::default();
        assert!(health.ask(), "up: always asked");
        health.failed(&"redis", "no answer");
        assert!(health.is_down() && health.outages() == 1);
        for _ in 0..3 {
            assert!(!health.ask(), "passed over right after");
            // The documented half second, not the constant: changing it is a
            // change of the promise.
            tokio::time::sleep(Duration::from_millis(499)).await;
            assert!(!health.ask(), "still passed over");
            tokio::time::sleep(Duration::from_millis(1)).await;
            assert!(health.ask(), "asked again after half a second");
            assert!(!health.ask(), "by one caller: the others pass it over");
            health.failed(&"redis", "no answer");
        }
        assert_eq!(health.outages(), 1, "one outage");
        health.answered(&"redis");
        assert!(!health.is_down() && health.ask());
    }
}
