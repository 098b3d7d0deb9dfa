//! [`Upstream`]: the handle the calls to one upstream share, and the
//! gates' state behind it ([`Gates`]), side by side: fields only. Its
//! behaviour is in `mod.rs` (the handle's, all of it) and each gate's file
//! (`hold`, `pace`, `adapt`, `fleet`). The types alone stand here, beneath
//! them, so that what holds a handle (the thread-local of the upstream in
//! force, `in_force.rs`) needs none of that behaviour.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::hold::Hold;
use super::pacer::Pacer;
use super::store::Store;

/// The state the calls to one upstream share. Clones are handles to the
/// same state; it is `Send + Sync` and cheap to clone.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::Upstream;
///
/// let upstream = Upstream::new(format!("openai/{}", "gpt-4o"))
///     .with_breaker(5, Duration::from_secs(30));
/// assert_eq!(upstream.name(), "openai/gpt-4o");
/// assert_eq!(upstream.held_for(), None);
/// ```
#[derive(Clone)]
pub struct Upstream {
    pub(super) gates: Arc<Gates>,
}

/// The gates' state: the hold gate's (its bit of `looks`, `counting`,
/// `hold`, `released`), the pace and adapt gates' (their bit of `looks`,
/// `pacer`, `queue`, `queued`), the fleet gate's (`store`, `token`; its
/// waiters queue in `queue` too).
pub(super) struct Gates {
    pub(super) name: Cow<'static, str>,
    /// What an attempt must look at before it starts, a bit each
    /// ([`GUARDED`], [`PACING`]): none is the open upstream's one load.
    pub(super) looks: AtomicU8,
    pub(super) pacer: Pacer,
    /// Whether a success tells the breaker something: failures counted,
    /// or opened and not closed since (a success then resets them).
    pub(super) counting: AtomicBool,
    pub(super) hold: Mutex<Hold>,
    /// The waiters for a probe's outcome.
    pub(super) released: Notify,
    pub(super) store: Option<Arc<dyn Store>>,
    /// This state's name for its probe's turn in a store.
    pub(super) token: u64,
    /// The paced waiters, in arrival order (a refill of the pacer's
    /// buckets, or of the store's): only its head looks when its cost
    /// fits, none holds a place, and an admission that does not wait goes
    /// behind them all.
    pub(super) queue: tokio::sync::Mutex<()>,
    /// How many are in `queue` or on their way into it: while any are, an
    /// admission that does not wait is refused.
    pub(super) queued: AtomicU32,
}

/// A bit of `Gates::looks`: an attempt must look at `hold` before it
/// starts (a hold, an allowance, a probe's turn, a store).
pub(super) const GUARDED: u8 = 1;
/// A bit of `Gates::looks`: an attempt must pass the pacer (limits known,
/// a cold start pending, an adaptive rate): no lock unless it waits.
pub(super) const PACING: u8 = 2;

impl Gates {
    pub(super) fn new(name: Cow<'static, str>, hold: Hold, store: Option<Arc<dyn Store>>) -> Gates {
        Gates {
            name,
            // A cold start until the first response (`with_cold_start`).
            looks: AtomicU8::new(PACING),
            pacer: Pacer::default(),
            counting: AtomicBool::new(false),
            hold: Mutex::new(hold),
            released: Notify::new(),
            store,
            token: fastrand::u64(..),
            queue: tokio::sync::Mutex::new(()),
            queued: AtomicU32::new(0),
        }
    }
}
