//! The cold start: an upstream that knows no limit yet lets one attempt go
//! first (the scout); the others wait until its response's headers are
//! observed or it ends, at most the cold start's max.

use core::pin::pin;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use super::handle::Gates;
use crate::events::WaitReason;

/// The scout's turn before its attempt starts: dropped then (its call
/// cancelled, or failed with `Held`), the others go.
pub(super) struct Scout<'u> {
    gates: &'u Gates,
    pub(super) armed: bool,
}

impl<'u> Scout<'u> {
    /// Not the scout.
    pub(super) fn none(gates: &'u Gates) -> Scout<'u> {
        Scout {
            gates,
            armed: false,
        }
    }
}

impl Drop for Scout<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.gates.pacer.warm();
            self.gates.publish_pacing();
        }
    }
}

impl Gates {
    /// Waits out the cold start, if it is pending: this caller's scout
    /// turn (armed if it is the scout), and why it waited, if it did.
    pub(super) async fn cold_start(&self) -> (Scout<'_>, Option<WaitReason>) {
        let pacer = &self.pacer;
        let mut scout = Scout::none(self);
        let mut reason = None;
        loop {
            // Registered before the look: news after it is seen.
            let mut news = pin!(pacer.scouted().notified());
            news.as_mut().enable();
            if !pacer.cold.load(Ordering::Acquire) {
                break;
            }
            match pacer.scout_turn(Instant::now()) {
                Ok(()) => {
                    scout.armed = true;
                    break;
                }
                Err(None) => {
                    pacer.warm();
                    self.publish_pacing();
                    break;
                }
                Err(Some(until)) => {
                    reason = Some(WaitReason::ColdStart);
                    // The scout's news, or the end of the wait for it.
                    let _ = tokio::time::timeout_at(until, &mut news).await;
                }
            }
        }
        (scout, reason)
    }
}
