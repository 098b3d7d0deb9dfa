//! The cold start's ramp, for an upstream whose scout came back without a
//! word of its limits: the others do not all leave at once, but in rounds
//! that double, as TCP's slow start does: 2 attempts out at first, one
//! more for each that succeeds. It ends at the first thing that says more
//! (a response's rate-limit headers, a 429, which turns the adaptive rate
//! on) or once [`LAST`] attempts may be out together.
//!
//! A round waits for its successes at most the cold start's max (as the
//! others waited for the scout): an LLM call may take half a minute, and
//! a server that sends no headers and counts no limit (a self-hosted
//! model) would otherwise take five such rounds to have 50 calls out. A
//! waiter that finds the round's time over doubles the window itself.
//!
//! Without it, a fan-out on a server that sends no rate-limit headers sent
//! all its calls the moment the scout came back, and met a 429 for each
//! one beyond the limit (37 of 50 on the fan-out benchmark) before the
//! adaptive rate could hear of the first.

use core::time::Duration;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::{Semaphore, TryAcquireError};
use tokio::time::Instant;

/// The attempts out at once when the ramp starts: the scout's, and one.
const FIRST: u32 = 2;
/// The ramp ends when this many may be out together.
const LAST: u32 = 64;

/// The ramp of one upstream; it runs at most once (from its scout's end).
#[derive(Debug)]
pub(super) struct Ramp {
    on: AtomicBool,
    /// How many may be out together.
    window: AtomicU32,
    /// One permit for each attempt that may start; waiters in arrival
    /// order. Closed when the ramp ends: every waiter goes.
    slots: Semaphore,
    /// How long a round waits for its successes, and when the current
    /// one's wait is over (touched only by waiters).
    round: Mutex<(Duration, Option<Instant>)>,
}

impl Default for Ramp {
    fn default() -> Ramp {
        Ramp {
            on: AtomicBool::new(false),
            window: AtomicU32::new(0),
            slots: Semaphore::new(0),
            round: Mutex::new((Duration::ZERO, None)),
        }
    }
}

impl Ramp {
    /// Whether the attempts wait for a slot.
    #[inline]
    pub(super) fn on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// How many may be out together, while the ramp runs.
    pub(super) fn window(&self) -> Option<u32> {
        self.on().then(|| self.window.load(Ordering::Relaxed))
    }

    /// The scout came back and said nothing of the limits: the ramp
    /// starts, each round waiting for its successes at most `round`
    /// (unless it ran, or ended before it could start).
    pub(super) fn start(&self, round: Duration) {
        if self.slots.is_closed() || self.on.swap(true, Ordering::AcqRel) {
            return;
        }
        *self.round() = (round, Some(crate::time::later(Instant::now(), round)));
        self.window.store(FIRST, Ordering::Relaxed);
        self.slots.add_permits(FIRST as usize);
    }

    fn round(&self) -> std::sync::MutexGuard<'_, (Duration, Option<Instant>)> {
        self.round.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Something said more of the limits than the ramp knows: it ends, and
    /// every waiter goes (to the buckets, or the adaptive rate).
    pub(super) fn stop(&self) {
        self.slots.close();
        self.on.store(false, Ordering::Release);
    }

    /// A free slot, without a wait (no lock, no allocation): `Ok(None)`
    /// if the ramp is over, `Err(Taken)` if every slot is out.
    pub(super) fn try_slot(&self) -> Result<Option<Slot<'_>>, Taken> {
        match self.slots.try_acquire() {
            Ok(permit) => {
                permit.forget();
                Ok(Some(Slot {
                    ramp: self,
                    armed: true,
                }))
            }
            Err(TryAcquireError::Closed) => Ok(None),
            Err(TryAcquireError::NoPermits) => Err(Taken),
        }
    }

    /// Waits for a slot, and says whether it waited: `Some` holds the
    /// slot until its attempt ends, `None` if the ramp ended meanwhile.
    pub(super) async fn slot(&self) -> (Option<Slot<'_>>, bool) {
        if let Ok(slot) = self.try_slot() {
            return (slot, false);
        }
        loop {
            let over = self.round().1;
            let acquired = match over {
                Some(over) => tokio::time::timeout_at(over, self.slots.acquire()).await,
                None => Ok(self.slots.acquire().await),
            };
            match acquired {
                Ok(permit) => {
                    let slot = permit.ok().map(|permit| {
                        permit.forget();
                        Slot {
                            ramp: self,
                            armed: true,
                        }
                    });
                    return (slot, true);
                }
                Err(_) => self.round_over(),
            }
        }
    }

    /// The round's time is over before its successes came: the window
    /// doubles (once, whichever waiter comes first).
    fn round_over(&self) {
        let now = Instant::now();
        {
            let mut round = self.round();
            let (length, over) = *round;
            if over.is_none_or(|over| over > now) {
                return;
            }
            round.1 = Some(crate::time::later(now, length));
        }
        let window = self.window.load(Ordering::Relaxed);
        self.widen(window);
    }

    /// An attempt that held a slot ended: its slot goes to the next
    /// waiter, and a success opens one more.
    pub(super) fn end(&self, succeeded: bool) {
        if self.slots.is_closed() {
            return;
        }
        self.slots.add_permits(1);
        if succeeded {
            self.widen(1);
        }
    }

    /// `more` may be out together: the ramp ends at [`LAST`].
    fn widen(&self, more: u32) {
        if self.slots.is_closed() {
            return;
        }
        let window = self.window.fetch_add(more, Ordering::Relaxed) + more;
        if window >= LAST {
            self.stop();
            return;
        }
        self.slots.add_permits(more as usize);
    }
}

/// Every slot of the ramp is out: the attempt waits for one.
#[derive(Debug)]
pub(super) struct Taken;

/// A slot taken and not yet handed to its attempt's charge: given back if
/// the attempt never starts.
pub(super) struct Slot<'r> {
    ramp: &'r Ramp,
    armed: bool,
}

impl Slot<'_> {
    /// The attempt starts: its charge holds the slot from here.
    pub(super) fn start(mut self) -> bool {
        core::mem::take(&mut self.armed)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.ramp.end(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn rounds_double_as_attempts_succeed_and_a_stop_lets_everyone_go() {
        let ramp = Ramp::default();
        assert!(!ramp.on());
        ramp.start(Duration::from_secs(1));
        assert!(ramp.on());
        let first: Vec<_> = [ramp.slot().await, ramp.slot().await]
            .into_iter()
            .map(|(s, waited)| !waited && s.expect("slot").start())
            .collect();
        assert_eq!(first, [true, true]);
        assert_eq!(ramp.slots.available_permits(), 0, "two out at first");
        for _ in first {
            ramp.end(true);
        }
        assert_eq!(
            ramp.slots.available_permits(),
            4,
            "each success opens one more"
        );
        ramp.end(false);
        assert_eq!(
            ramp.slots.available_permits(),
            5,
            "a failure gives its slot back only"
        );
        ramp.stop();
        assert!(!ramp.on());
        assert!(ramp.slot().await.0.is_none(), "ended: nobody waits");
        ramp.start(Duration::from_secs(1));
        assert!(!ramp.on(), "it runs once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slot_never_started_is_given_back_and_the_ramp_ends_at_its_last_round() {
        let ramp = Ramp::default();
        ramp.start(Duration::from_secs(1));
        drop(ramp.slot().await.0);
        assert_eq!(ramp.slots.available_permits(), 2);
        for _ in FIRST..LAST - 1 {
            ramp.end(true);
        }
        assert!(ramp.on());
        ramp.end(true);
        assert!(!ramp.on(), "{LAST} out together: the ramp is over");
    }
}
