//! [`Upstream`]: the handle the calls to one upstream share, the gates'
//! state behind it ([`Gates`]), side by side, and the public data of its
//! limits ([`Quota`] declared, with its builders; [`UpstreamLimits`]
//! reported): types and their constructors. The handle's behaviour is in
//! `mod.rs` (all of it) and each gate's file (`hold`, `pace`, `adapt`,
//! `fleet`). The types stand here, beneath them, with what holds a handle
//! ([`in_force`], the thread-local of the upstream in force), which needs
//! none of that behaviour.

use core::time::Duration;
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::bucket::{Bucket, LimitSource};
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

/// Limits declared for an upstream: at most `requests` attempts and
/// `tokens` of cost per `window`, each spent as a bucket that refills over
/// the window ([`Upstream::with_quota`]). Either may be left out.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{Quota, Upstream};
///
/// // OpenAI's tier: 500 requests and 30 000 tokens a minute.
/// let quota = Quota::per(Duration::from_secs(60)).requests(500).tokens(30_000);
/// let upstream = Upstream::new("openai/gpt-4o").with_quota(quota);
/// assert_eq!(upstream.limits().tokens.unwrap().limit, 30_000);
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quota {
    /// The window both limits are counted over.
    pub window: Duration,
    /// Attempts per window, if limited.
    pub requests: Option<u32>,
    /// Cost (tokens) per window, if limited.
    pub tokens: Option<u32>,
}

impl Quota {
    /// A quota counted over `window`, with no limit yet. A window of zero
    /// limits nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Quota;
    ///
    /// let quota = Quota::per(Duration::from_secs(2)).requests(20);
    /// assert_eq!(quota.requests, Some(20));
    /// assert_eq!(quota.tokens, None);
    /// ```
    pub fn per(window: Duration) -> Quota {
        Quota {
            window,
            requests: None,
            tokens: None,
        }
    }

    /// At most `n` attempts per window (0: no limit on requests).
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Quota;
    ///
    /// assert_eq!(Quota::per(Duration::from_secs(60)).requests(500).requests, Some(500));
    /// ```
    pub fn requests(self, n: u32) -> Quota {
        Quota {
            requests: (n > 0).then_some(n),
            ..self
        }
    }

    /// At most `n` of cost per window: each attempt spends its call's
    /// `cost = …` (0: no limit on tokens).
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Quota;
    ///
    /// assert_eq!(Quota::per(Duration::from_secs(60)).tokens(30_000).tokens, Some(30_000));
    /// ```
    pub fn tokens(self, n: u32) -> Quota {
        Quota {
            tokens: (n > 0).then_some(n),
            ..self
        }
    }
}

/// What an [`Upstream`] knows of its limits, at one instant
/// ([`Upstream::limits`]). Not to be confused with the engine's `Limits`
/// of one decision.
///
/// ```
/// use nika_retry::upstream::Upstream;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let limits = Upstream::new("openai/gpt-4o").limits();
/// assert_eq!(limits.requests, None, "nothing learned yet");
/// assert!(limits.cold_start, "its first attempt will scout");
/// # }
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpstreamLimits {
    /// The limit on attempts, if known.
    pub requests: Option<DimensionLimit>,
    /// The limit on tokens, if known.
    pub tokens: Option<DimensionLimit>,
    /// The mean tokens an attempt spends, learned from the token headers:
    /// what an attempt of a call without `cost = …` is charged.
    pub mean_cost: Option<u64>,
    /// Whether the cold start is still pending: the next attempt scouts,
    /// the others wait for its news.
    pub cold_start: bool,
    /// While the cold start's ramp runs (its scout brought no word of the
    /// limits): how many attempts may be out together, one more for each
    /// that succeeds ([`Upstream::with_cold_start`]).
    pub ramp: Option<u32>,
}

/// One dimension of an upstream's limits.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::{LimitSource, Quota, Upstream};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let upstream = Upstream::new("tools/search")
///     .with_quota(Quota::per(Duration::from_secs(2)).requests(20));
/// let requests = upstream.limits().requests.unwrap();
/// assert_eq!((requests.limit, requests.window), (20, Duration::from_secs(2)));
/// assert_eq!(requests.level, 20);
/// assert_eq!(requests.refill, 10.0, "per second");
/// assert_eq!(requests.source, LimitSource::Declared);
/// # }
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DimensionLimit {
    /// The bucket's size: what may be spent at once.
    pub limit: u64,
    /// The window it refills over.
    pub window: Duration,
    /// What it holds now.
    pub level: u64,
    /// How fast it refills, per second.
    pub refill: f64,
    /// Where the limit comes from.
    pub source: LimitSource,
    /// What is spent by attempts in flight (the paced waiters hold nothing).
    pub in_flight: u64,
}

impl DimensionLimit {
    pub(super) fn of(bucket: &Bucket, now: u64) -> Option<DimensionLimit> {
        let (limit, window, source) = bucket.get()?;
        Some(DimensionLimit {
            limit,
            window,
            level: bucket.level(now),
            refill: limit as f64 / window.as_secs_f64(),
            source,
            in_flight: bucket.in_flight(),
        })
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
