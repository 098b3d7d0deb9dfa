//! [`Upstream`]: the handle the calls to one upstream share, and the
//! gates' state behind it ([`Gates`]), side by side: fields only. Its
//! behaviour is in `mod.rs` (the handle's, all of it) and each gate's file
//! (`hold`, `pace`, `adapt`, `fleet`). The types alone stand here, beneath
//! them, with what holds a handle ([`in_force`], the thread-local of the
//! upstream in force), which needs none of that behaviour.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::fleet::Store;
use super::hold::Hold;
use super::pacer::Pacer;

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

pub(crate) mod in_force {
    //! [`InForceUpstream`]: the upstream of the innermost call in force that
    //! names one, for [`upstream::current`](crate::upstream::current), and
    //! when its attempt left, for the headers that attempt reads. A place of
    //! `ambient`'s kind, kept beside the handle it holds rather than in
    //! `ambient/`, so that `ambient/` imports nothing of this module
    //! (`ambient/mod.rs` lists it with the others).

    use core::cell::Cell;
    use core::mem::ManuallyDrop;

    use super::Upstream;
    use crate::ambient::Ambient;

    std::thread_local! {
        /// A thread-local of its own, as `ambient`'s `POLICY`, touched only by the polls of
        /// calls that name an upstream. `ManuallyDrop`, so that the
        /// thread-local needs no destructor, and each access no check that it
        /// is alive: outside a poll it always holds `None` (every handle swapped
        /// in is swapped back out by its guard, a panic included), so nothing
        /// is left to drop when the thread ends.
        static UPSTREAM: Cell<ManuallyDrop<Option<Upstream>>> =
            const { Cell::new(ManuallyDrop::new(None)) };
        /// When the attempt in force left, on its upstream's pacer clock (0:
        /// not recorded: its upstream paced nothing when it started).
        static DEPARTED: Cell<u64> = const { Cell::new(0) };
    }

    /// What an attempt of a call that names an upstream puts in force while
    /// it is polled.
    pub(crate) struct InForce {
        /// A clone of the call's handle.
        pub(crate) handle: Option<Upstream>,
        /// When the attempt left ([`Upstream::departure`]).
        pub(crate) departed: u64,
    }

    /// The place of the upstream in force: each poll of an attempt of a call
    /// that names one swaps its handle in, and back when the poll returns.
    pub(crate) struct InForceUpstream;

    impl Ambient for InForceUpstream {
        type Value = InForce;

        #[inline(always)]
        fn swap(value: &mut InForce) {
            // A move each way: no count touched, nothing dropped.
            let mine = ManuallyDrop::new(value.handle.take());
            let outer = UPSTREAM.with(|place| place.replace(mine));
            // `value` was emptied above: forgetting its `None` skips a drop check.
            core::mem::forget(core::mem::replace(
                &mut value.handle,
                ManuallyDrop::into_inner(outer),
            ));
            value.departed = DEPARTED.with(|place| place.replace(value.departed));
        }
    }

    /// A clone of the handle in force (no allocation), if any.
    pub(crate) fn upstream() -> Option<Upstream> {
        UPSTREAM.with(|place| {
            let handle = place.take();
            let clone = Option::clone(&handle);
            place.set(handle);
            clone
        })
    }

    /// When the attempt in force left, if its upstream is `upstream` and it
    /// was recorded.
    pub(crate) fn departed(upstream: &Upstream) -> Option<u64> {
        let departed = DEPARTED.with(Cell::get);
        if departed == 0 {
            return None;
        }
        UPSTREAM.with(|place| {
            let handle = place.take();
            let same = handle.as_ref().is_some_and(|h| h.same(upstream));
            place.set(handle);
            same.then_some(departed)
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::ambient::Swap;

        #[test]
        fn the_innermost_handle_is_in_force_and_the_outer_comes_back() {
            assert!(upstream().is_none());
            let mut outer = InForce {
                handle: Some(Upstream::new("outer")),
                departed: 7,
            };
            {
                let _outer = Swap::<InForceUpstream>::new(&mut outer);
                assert_eq!(upstream().unwrap().name(), "outer");
                let inner_handle = Upstream::new("inner");
                let mut inner = InForce {
                    handle: Some(inner_handle.clone()),
                    departed: 9,
                };
                {
                    let _inner = Swap::<InForceUpstream>::new(&mut inner);
                    assert_eq!(upstream().unwrap().name(), "inner");
                    assert_eq!(departed(&inner_handle), Some(9));
                    assert_eq!(
                        departed(&Upstream::new("inner")),
                        None,
                        "another upstream of that name"
                    );
                }
                assert_eq!(
                    inner.handle.unwrap().name(),
                    "inner",
                    "given back to its owner"
                );
                assert_eq!(inner.departed, 9);
                assert_eq!(upstream().unwrap().name(), "outer");
                assert_eq!(departed(&inner_handle), None);
            }
            assert_eq!(outer.handle.unwrap().name(), "outer");
            assert!(upstream().is_none());
        }
    }
}
