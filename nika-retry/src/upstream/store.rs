//! Where an upstream's state lives: the [`Store`] trait, and the in-process
//! store every upstream has unless given another.
//!
//! The state is three pieces, each expressed so that a store shared by many
//! processes (Redis) can keep it with its own clock: the hold (an expiring
//! mark that only ever lengthens), the probe's turn (a lease that expires,
//! so a crashed probe passes its turn on), and the allowance (a counter
//! that expires at its reset). Durations cross the trait, never instants.

use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::time::Instant;

use super::HoldReason;
use crate::time::later;

/// A store call's future: `'static` and `Send`, so that a call made from a
/// synchronous method (`observe`, `hold_for`) can be spawned.
pub type StoreFuture<T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'static>>;

/// A store that did not answer. An upstream never fails or blocks a call on
/// it: it falls back to letting the attempt start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("upstream store: {0}")]
pub struct StoreError(pub String);

/// What [`Store::turn`] says an attempt may do now.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Start.
    Go,
    /// Start as the probe: the first attempt after a hold. Its outcome is
    /// reported with [`Store::end_probe`].
    Probe,
    /// The upstream is held for `left` more.
    Held {
        /// What is left of the hold.
        left: Duration,
        /// Why it is held.
        reason: HoldReason,
    },
    /// A probe is out: wait for its outcome, at most `lease` (what is left
    /// of its lease).
    Wait {
        /// What is left of the probe's lease.
        lease: Duration,
    },
    /// The allowance is used up until its reset, `left` from now.
    Spent {
        /// Time until the allowance's reset.
        left: Duration,
    },
}

/// The shared state of an upstream, keyed by its name.
///
/// Every method answers from the store's own clock: a hold of 20 s set by
/// one process is a hold of 20 s for every process, whatever their clocks.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{HoldReason, Store, StoreError, StoreFuture, Turn};
///
/// /// A store that is never reachable: every call falls back and starts.
/// #[derive(Debug)]
/// struct Down;
///
/// impl Store for Down {
///     fn extend(&self, _: &str, _: Duration, _: HoldReason) -> StoreFuture<Option<bool>> {
///         Box::pin(async { Err(StoreError("down".into())) })
///     }
///     fn turn(&self, _: &str, _: Duration) -> StoreFuture<Turn> {
///         Box::pin(async { Err(StoreError("down".into())) })
///     }
///     fn end_probe(&self, _: &str, _: bool) -> StoreFuture<()> {
///         Box::pin(async { Err(StoreError("down".into())) })
///     }
///     fn allow(&self, _: &str, _: u64, _: Duration) -> StoreFuture<()> {
///         Box::pin(async { Err(StoreError("down".into())) })
///     }
///     fn held_for(&self, _: &str) -> StoreFuture<Option<Duration>> {
///         Box::pin(async { Err(StoreError("down".into())) })
///     }
/// }
/// ```
pub trait Store: Send + Sync + core::fmt::Debug + 'static {
    /// Holds `upstream` for at least `hold` from now: only ever lengthens a
    /// hold in force, and every lengthening makes the next attempt after it
    /// a probe. `None` if the hold in force already ran as long;
    /// `Some(extended)` if it started (`false`) or grew (`true`).
    fn extend(
        &self,
        upstream: &str,
        hold: Duration,
        reason: HoldReason,
    ) -> StoreFuture<Option<bool>>;

    /// What an attempt may do now; taking the probe's turn (for `lease`)
    /// or one attempt of the allowance is part of the answer.
    fn turn(&self, upstream: &str, lease: Duration) -> StoreFuture<Turn>;

    /// The probe ended; `cleared` if without pushback (the others may go),
    /// otherwise the turn passes on to the next attempt.
    fn end_probe(&self, upstream: &str, cleared: bool) -> StoreFuture<()>;

    /// At most `remaining` more attempts start before `reset` from now;
    /// replaces the count in force.
    fn allow(&self, upstream: &str, remaining: u64, reset: Duration) -> StoreFuture<()>;

    /// What is left of the hold, if any.
    fn held_for(&self, upstream: &str) -> StoreFuture<Option<Duration>>;
}

#[derive(Debug, Default)]
struct State {
    held_until: Option<Instant>,
    reason: Option<HoldReason>,
    /// A hold was set and no probe has ended cleared since.
    pending: bool,
    /// The probe's lease, while one is out.
    probe_until: Option<Instant>,
    /// At most `.0` more attempts before `.1`.
    allowance: Option<(u64, Instant)>,
}

impl State {
    fn quiet(&self) -> bool {
        self.held_until.is_none() && !self.pending && self.allowance.is_none()
    }
}

/// The in-process store: one upstream's state behind a mutex, and a flag
/// read with one atomic load that says nothing is in force, so that an
/// attempt at an open upstream takes no lock.
#[derive(Debug)]
pub(crate) struct Local {
    quiet: AtomicBool,
    state: Mutex<State>,
}

impl Local {
    pub(crate) fn new() -> Self {
        Local {
            quiet: AtomicBool::new(true),
            state: Mutex::new(State::default()),
        }
    }

    /// Nothing in force: no hold, no probe owed, no allowance.
    #[inline]
    pub(crate) fn open(&self) -> bool {
        self.quiet.load(Ordering::Acquire)
    }

    fn with<R>(&self, f: impl FnOnce(&mut State, Instant) -> R) -> R {
        // A panic under the lock leaves plain data: go on with it.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let r = f(&mut state, now);
        self.quiet.store(state.quiet(), Ordering::Release);
        r
    }

    pub(crate) fn extend(&self, hold: Duration, reason: HoldReason) -> Option<bool> {
        self.with(|s, now| {
            let until = later(now, hold);
            let held = s.held_until.filter(|u| *u > now);
            match held {
                Some(u) if u >= until => None,
                held => {
                    s.held_until = Some(until);
                    s.reason = Some(reason);
                    s.pending = true;
                    Some(held.is_some())
                }
            }
        })
    }

    pub(crate) fn turn(&self, lease: Duration) -> Turn {
        self.with(|s, now| {
            match s.held_until {
                Some(u) if u > now => {
                    return Turn::Held {
                        left: u - now,
                        reason: s.reason.unwrap_or(HoldReason::ByHand),
                    };
                }
                Some(_) => s.held_until = None,
                None => {}
            }
            let probe = match (s.pending, s.probe_until) {
                (false, _) => false,
                (true, Some(p)) if p > now => return Turn::Wait { lease: p - now },
                (true, _) => true,
            };
            match s.allowance {
                Some((_, reset)) if reset <= now => s.allowance = None,
                Some((0, reset)) => return Turn::Spent { left: reset - now },
                Some((ref mut n, _)) => *n -= 1,
                None => {}
            }
            if probe {
                s.probe_until = Some(later(now, lease));
                Turn::Probe
            } else {
                Turn::Go
            }
        })
    }

    pub(crate) fn end_probe(&self, cleared: bool) {
        self.with(|s, now| {
            s.probe_until = None;
            if cleared && s.held_until.is_none_or(|u| u <= now) {
                s.held_until = None;
                s.pending = false;
            }
        });
    }

    pub(crate) fn allow(&self, remaining: u64, reset: Duration) {
        self.with(|s, now| s.allowance = Some((remaining, later(now, reset))));
    }

    pub(crate) fn held_for(&self) -> Option<Duration> {
        self.with(|s, now| s.held_until.filter(|u| *u > now).map(|u| u - now))
    }
}
