//! [`Store`]: where an upstream's hold, allowance and probe's turn live
//! beyond one process.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::hold::MAX_HOLD;
use crate::events::upstream::HoldReason;

/// What a store call returns: it may wait on the network, and fail.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = std::io::Result<T>> + Send + 'a>>;

/// What a store tells a probe whose wait for the hold's end is over.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeTurn {
    /// Go: the probe's turn is this upstream's (a lease taken), or another
    /// process's probe came back without a new hold.
    Go,
    /// Another process's probe is out: ask again shortly.
    Wait,
    /// Held again, for this long and why.
    Held(Duration, HoldReason),
}

/// One dimension of an attempt at a store that keeps the pacing buckets
/// ([`Store::admit`]): the limit and window this process knows (a limit of
/// 0: none known here, the store paces with the fleet's if it has one), and
/// what the attempt spends of it. Index 0 of an attempt's array is the
/// requests, 1 the tokens.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::Spend;
///
/// let tokens = Spend::new(3_000, Duration::from_secs(2), 200);
/// assert_eq!((tokens.limit, tokens.cost), (3_000, 200));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spend {
    /// The limit this process knows, in units of the dimension (0: none).
    pub limit: u64,
    /// The window the limit refills over.
    pub window: Duration,
    /// What the attempt spends of it (0: nothing, the dimension is not paced).
    pub cost: u64,
}

impl Spend {
    /// `cost` of a limit of `limit` per `window`.
    pub fn new(limit: u64, window: Duration, cost: u64) -> Spend {
        Spend {
            limit,
            window,
            cost,
        }
    }
}

/// What a response said of one dimension, for a store that keeps the
/// pacing buckets ([`Store::learned`]): the limit and window the upstream
/// paces with (declared or learned), and what the server said is left.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::Reading;
///
/// let requests = Reading::new(20, Duration::from_secs(2), Some(19));
/// assert_eq!(requests.remaining, Some(19));
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// The limit (0: none known, the reading says nothing).
    pub limit: u64,
    /// The window it refills over.
    pub window: Duration,
    /// What the server said is left, if it did.
    pub remaining: Option<u64>,
    /// When the server said the limit is whole again, if it did: a reset
    /// much later than a continuous refill of what is missing would take
    /// tells a window that frees nothing before it moves.
    pub reset: Option<Duration>,
    /// How much later than the server's own count `reset` may be (a
    /// second for a reset in whole seconds, the answer's time for an
    /// instant counted from when the request left): a window is told from
    /// a refill by the reset less it, so that no refill reads as a window.
    pub(crate) rounding: Duration,
}

impl Reading {
    /// A limit of `limit` per `window`, `remaining` of it left.
    pub fn new(limit: u64, window: Duration, remaining: Option<u64>) -> Reading {
        Reading {
            limit,
            window,
            remaining,
            reset: None,
            rounding: Duration::ZERO,
        }
    }

    /// This reading, whole again in `reset`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Reading;
    ///
    /// let tokens = Reading::new(3_000, Duration::from_secs(2), Some(2_800))
    ///     .with_reset(Duration::from_secs(2));
    /// assert_eq!(tokens.reset, Some(Duration::from_secs(2)));
    /// ```
    #[must_use]
    pub fn with_reset(self, reset: Duration) -> Reading {
        Reading {
            reset: Some(reset),
            ..self
        }
    }

    /// This reading, its reset up to `rounding` later than the server's count.
    #[must_use]
    pub(crate) fn rounded(self, rounding: Duration) -> Reading {
        Reading { rounding, ..self }
    }
}

/// A store's answer to an attempt about to start ([`Store::admit`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Held (as [`Store::attempt`] says): the attempt does not start.
    Held(Duration, HoldReason),
    /// Not held, and the store keeps no buckets for it (none it knows a
    /// limit of): the upstream paces the attempt in this process.
    Local,
    /// The store's buckets held every dimension's cost and spent it: the
    /// attempt starts now.
    Go,
    /// A bucket lacks the cost; it will hold it in this long. Nothing was
    /// spent: the attempt asks again then.
    Ready(Duration),
}

/// Keeps the state of upstreams where several [`Upstream`](super::Upstream)s
/// see it: every process of a fleet, on a shared server.
///
/// Holds are durations, measured by the store's own clock (so that no two
/// processes' clocks are compared), and only ever extended. Every attempt
/// of an upstream with a store asks it first ([`attempt`](Store::attempt));
/// a store that fails or takes longer than [`STORE_WAIT`] is passed over for
/// that attempt, and the upstream goes on with its own in-process state.
///
/// The methods past [`hold`](Store::hold) share the allowance, the
/// probe's turn and the pacing buckets ([`admit`](Store::admit),
/// [`learned`](Store::learned)); their defaults share none of them (each
/// process keeps its own).
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

    /// An attempt of the upstream whose state is `token` is about to start:
    /// the hold in force, if any (then it does not start). While another
    /// upstream's probe is out, a hold of [`PROBE_OUT`]: the attempt waits
    /// for that probe's outcome as the others do. Else it takes one from the
    /// allowance, and taking the last one holds `upstream` until the
    /// allowance's reset.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::{HoldReason, InProcess, Store};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let store = InProcess::default();
    /// store.allow("tools/search", 2, Duration::from_secs(6));
    /// assert_eq!(store.attempt("tools/search", 1).await.unwrap(), None);
    /// assert_eq!(store.attempt("tools/search", 2).await.unwrap(), None, "the last one");
    /// let held = store.attempt("tools/search", 1).await.unwrap();
    /// assert_eq!(held, Some((Duration::from_secs(6), HoldReason::RateLimitHeaders)));
    /// # }
    /// ```
    fn attempt<'a>(
        &'a self,
        upstream: &'a str,
        token: u64,
    ) -> StoreFuture<'a, Option<(Duration, HoldReason)>> {
        let _ = token;
        self.held_for(upstream)
    }

    /// At most `remaining` more attempts of `upstream` start before `reset`
    /// from now (a later call replaces the count). Never blocks.
    fn allow(&self, upstream: &str, remaining: u32, reset: Duration) {
        let _ = (upstream, remaining, reset);
    }

    /// The hold ended: may the probe of the upstream whose state is `token`
    /// (one per [`Upstream`](super::Upstream)) go first? Its turn is a lease
    /// that [`probed`](Store::probed) gives back; one that never comes back
    /// (its process crashed) expires.
    fn probe<'a>(&'a self, upstream: &'a str, token: u64) -> StoreFuture<'a, ProbeTurn> {
        let _ = (upstream, token);
        Box::pin(core::future::ready(Ok(ProbeTurn::Go)))
    }

    /// The probe of `token` ended; `released` if without a new hold (the
    /// others go), else it passes its turn on. Never blocks.
    fn probed(&self, upstream: &str, token: u64, released: bool) {
        let _ = (upstream, token, released);
    }

    /// [`attempt`](Store::attempt), and then, for a store that keeps the
    /// pacing buckets of a fleet, the buckets in the same step: every
    /// dimension's cost spent at once ([`Admission::Go`]), or when they
    /// will hold it ([`Admission::Ready`], nothing spent, the allowance
    /// not taken). `spend[0]` is the requests, `spend[1]` the tokens.
    ///
    /// The default keeps no buckets: the hold as [`attempt`](Store::attempt)
    /// says, else [`Admission::Local`] (the upstream paces in its process).
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::{Admission, InProcess, Spend, Store};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let store = InProcess::default();
    /// let spend = [Spend::new(20, Duration::from_secs(2), 1), Spend::default()];
    /// // The in-process store leaves pacing to each upstream.
    /// assert_eq!(store.admit("openai/gpt-4o", 1, spend).await.unwrap(), Admission::Local);
    /// # }
    /// ```
    fn admit<'a>(
        &'a self,
        upstream: &'a str,
        token: u64,
        spend: [Spend; 2],
    ) -> StoreFuture<'a, Admission> {
        let _ = spend;
        Box::pin(async move {
            Ok(match self.attempt(upstream, token).await? {
                Some((left, reason)) => Admission::Held(left, reason),
                None => Admission::Local,
            })
        })
    }

    /// A response of `upstream` said this of its limits (`readings[0]` the
    /// requests, `[1]` the tokens): a store that keeps the buckets shares
    /// the limits, so that every process paces with them, and lowers its
    /// buckets to what the server says is left. Never blocks. The default
    /// does nothing.
    fn learned(&self, upstream: &str, readings: [Reading; 2]) {
        let _ = (upstream, readings);
    }

    /// The longest an attempt waits for this store before it goes on with
    /// its in-process state: [`STORE_WAIT`] unless the store says otherwise
    /// (`RedisStore::with_wait`).
    fn wait(&self) -> Duration {
        STORE_WAIT
    }
}

/// The longest an attempt waits for its upstream's store before it goes on
/// with the in-process state, unless the store says otherwise
/// ([`Store::wait`]).
pub const STORE_WAIT: Duration = Duration::from_millis(50);

/// How long another process's probe may keep its turn before the next one
/// takes it: a probe that crashed holds nobody longer than this.
pub const PROBE_LEASE: Duration = Duration::from_secs(5);

/// The hold [`Store::attempt`] reports while another upstream's probe is
/// out: the attempt becomes its upstream's probe, which asks the store for
/// its turn ([`Store::probe`]) and so waits for the other's outcome.
pub const PROBE_OUT: Duration = Duration::from_millis(1);

/// How long a released probe's turn tells the other processes' probes to go.
pub(super) const RELEASED_FOR: Duration = Duration::from_secs(1);

/// A store in this process's memory: upstreams of one name that share it
/// share their holds, allowances and probe's turn. Clones share one map.
#[derive(Clone, Default)]
pub struct InProcess {
    upstreams: Arc<Mutex<HashMap<String, Entry>>>,
}

/// One upstream's state in an [`InProcess`] store.
#[derive(Default)]
struct Entry {
    hold: Option<(Instant, HoldReason)>,
    allowance: Option<(u32, Instant)>,
    /// The token whose probe is out (`None`: a released one), until when.
    lease: Option<(Option<u64>, Instant)>,
}

impl InProcess {
    fn with<R>(&self, upstream: &str, f: impl FnOnce(&mut Entry, Instant) -> R) -> R {
        let now = Instant::now();
        let mut map = self
            .upstreams
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let shared = match map.get_mut(upstream) {
            Some(shared) => shared,
            None => map.entry(upstream.to_owned()).or_default(),
        };
        f(shared, now)
    }
}

impl Entry {
    fn left(&self, now: Instant) -> Option<(Duration, HoldReason)> {
        self.hold
            .map(|(until, reason)| (until.saturating_duration_since(now), reason))
            .filter(|(left, _)| !left.is_zero())
    }

    fn hold(&mut self, now: Instant, held_for: Duration, reason: HoldReason) {
        let until = now + held_for.min(MAX_HOLD);
        if self.hold.is_some_and(|(u, _)| u >= until) {
            return;
        }
        self.hold = Some((until, reason));
        if matches!(self.lease, Some((None, _))) {
            // Held again: a released probe's word no longer stands.
            self.lease = None;
        }
    }
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
        let left = self.with(upstream, |shared, now| shared.left(now));
        Box::pin(core::future::ready(Ok(left)))
    }

    fn hold(&self, upstream: &str, held_for: Duration, reason: HoldReason) {
        self.with(upstream, |shared, now| shared.hold(now, held_for, reason));
    }

    fn attempt<'a>(
        &'a self,
        upstream: &'a str,
        token: u64,
    ) -> StoreFuture<'a, Option<(Duration, HoldReason)>> {
        let held = self.with(upstream, |shared, now| {
            if let Some(left) = shared.left(now) {
                return Some(left);
            }
            if matches!(shared.lease, Some((Some(other), until)) if other != token && until > now) {
                return Some((PROBE_OUT, HoldReason::ServerHint));
            }
            match shared.allowance {
                Some((_, reset)) if reset <= now => shared.allowance = None,
                Some((n, reset)) if n <= 1 => {
                    shared.allowance = None;
                    shared.hold(now, reset - now, HoldReason::RateLimitHeaders);
                }
                Some((n, reset)) => shared.allowance = Some((n - 1, reset)),
                None => {}
            }
            None
        });
        Box::pin(core::future::ready(Ok(held)))
    }

    fn allow(&self, upstream: &str, remaining: u32, reset: Duration) {
        self.with(upstream, |shared, now| {
            shared.allowance =
                (remaining > 0 && !reset.is_zero()).then(|| (remaining, now + reset.min(MAX_HOLD)));
        });
    }

    fn probe<'a>(&'a self, upstream: &'a str, token: u64) -> StoreFuture<'a, ProbeTurn> {
        let turn = self.with(upstream, |shared, now| {
            if let Some((left, reason)) = shared.left(now) {
                return ProbeTurn::Held(left, reason);
            }
            match shared.lease {
                Some((None, until)) if until > now => ProbeTurn::Go,
                Some((Some(other), until)) if until > now && other != token => ProbeTurn::Wait,
                _ => {
                    shared.lease = Some((Some(token), now + PROBE_LEASE));
                    ProbeTurn::Go
                }
            }
        });
        Box::pin(core::future::ready(Ok(turn)))
    }

    fn probed(&self, upstream: &str, token: u64, released: bool) {
        self.with(upstream, |shared, now| {
            if matches!(shared.lease, Some((Some(t), _)) if t == token) {
                shared.lease = released.then_some((None, now + RELEASED_FOR));
            }
        });
    }
}
