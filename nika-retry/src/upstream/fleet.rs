//! The fleet: the [`Store`] where an upstream's hold, allowance, probe's
//! turn and pacing buckets live beyond one process (the trait, and
//! [`InProcess`]), then the fleet gate that asks it before an attempt
//! goes. Its hold and allowance asked first (`ask`), the probe's lease
//! once a hold ends (`lease`), its pace at a store that keeps the fleet's
//! buckets ([`Store::admit`]: what it spends, the store's answer, the wait
//! for a refill); and what a response's headers tell the store of the
//! limits ([`Store::learned`]).
//!
//! A store that keeps no buckets, fails or is slow answers
//! [`Admission::Local`]: the attempt is paced in this process, as without
//! a store.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::time::Instant;

use super::bucket::Bucket;
use super::handle::Gates;
use super::hold::{Held, MAX_HOLD, Patience};
use super::pace::Scout;
use super::pacer::{Charge, Holds};
use crate::events::WaitReason;
use crate::events::upstream::HoldReason;
use crate::http::{LimitFields, RateLimitFields};

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

// The fleet gate: what an attempt asks of its upstream's store.

/// How often a probe asks the store again while another process's probe
/// is out (each time jittered by up to half of it either way).
const PROBE_POLL: Duration = Duration::from_millis(100);

/// What the store said to a local probe.
pub(super) enum Lease {
    Go,
    /// Another process's probe is out: ask again then.
    Poll(Instant),
    /// Held again (taken into the local state).
    Held,
}

impl Gates {
    /// The probe's turn in the store, once the hold has ended. A store that
    /// fails or is slow is passed over (the local probe goes).
    pub(super) async fn lease(&self) -> Lease {
        let Some(store) = &self.store else {
            return Lease::Go;
        };
        let probe = store.probe(&self.name, self.token);
        let asked = tokio::time::timeout(store.wait(), probe).await;
        let now = Instant::now();
        match asked {
            Ok(Ok(ProbeTurn::Wait)) => Lease::Poll(now + PROBE_POLL.mul_f64(0.5 + fastrand::f64())),
            Ok(Ok(ProbeTurn::Held(left, reason))) => {
                self.locked(|state| state.hold(now, left, reason));
                Lease::Held
            }
            _ => Lease::Go,
        }
    }

    /// Takes the store's hold into the local state (and, if it is not
    /// held, one from the store's allowance); a store that fails or is slow
    /// is passed over. Unless the upstream is held here, the attempt's
    /// cost is spent in the store's buckets in the same step: the
    /// admission, if it was. A cold upstream asks after its cold start
    /// ([`fleet_turn`](Upstream::fleet_turn)).
    pub(super) async fn ask(&self, store: &Arc<dyn Store>, cost: u32) -> Option<Admission> {
        let held_here = self.left().is_some();
        if !held_here && self.pacer.cold.load(Ordering::Acquire) {
            // Cold: the store is asked after the cold start (its scout at
            // once, the others after its news), once per attempt.
            return None;
        }
        // Held here, its cost would be spent before the hold ends: not
        // spent now.
        let spend = if held_here {
            [Spend::default(); 2]
        } else {
            self.spends(cost)
        };
        match self.admission(store, spend).await {
            Admission::Held(left, reason) => {
                let now = Instant::now();
                // No event: the process that set the hold in the store sent it.
                self.locked(|state| state.hold(now, left, reason));
                None
            }
            admission => (!held_here).then_some(admission),
        }
    }

    /// What an attempt of cost `cost` spends, per dimension, with the
    /// limits this process knows (a limit of 0: the store's, if any).
    pub(super) fn spends(&self, cost: u32) -> [Spend; 2] {
        let pacer = &self.pacer;
        let tokens = pacer.tokens_of(cost);
        let spend = |bucket: &Bucket, cost: u64| match bucket.get() {
            Some((limit, window, _)) => Spend::new(limit, window, cost),
            None => Spend::new(0, Duration::ZERO, cost),
        };
        [spend(&pacer.requests, 1), spend(&pacer.tokens, tokens)]
    }

    /// The store's admission of an attempt spending `spend`, at most the
    /// store's wait: a failure or no answer is [`Admission::Local`].
    pub(super) async fn admission(&self, store: &Arc<dyn Store>, spend: [Spend; 2]) -> Admission {
        let asked =
            tokio::time::timeout(store.wait(), store.admit(&self.name, self.token, spend)).await;
        match asked {
            Ok(Ok(admission)) => admission,
            _ => Admission::Local,
        }
    }

    /// The attempt's turn at a store: while this process is cold, its cold
    /// start first (its scout asks the store, which counts what it spends
    /// while no limit is known; the others ask after the scout's news,
    /// when the store may know the limits), then the store's pace.
    /// [`Admission::Go`]: the store spent its cost, or it goes as this
    /// process's scout (`charge` says so, and why it waited);
    /// [`Admission::Local`]: this process's pacer paces it;
    /// [`Admission::Held`]: held meanwhile (taken into the local state), it
    /// waits for the hold again. Never `Ready`.
    pub(super) async fn fleet_turn(
        &self,
        store: &Arc<dyn Store>,
        first: Option<Admission>,
        patience: Patience,
        cost: u32,
        charge: &mut Charge,
    ) -> Result<Admission, Held> {
        let (mut scout, mut reason, first) = match first {
            Some(Admission::Local) | None if self.pacer.cold.load(Ordering::Acquire) => {
                let (scout, reason) = self.cold_start().await;
                (scout, reason, None)
            }
            first => (Scout::none(self), None, first),
        };
        let paced = self
            .fleet_pace(store, first, patience, cost, &mut reason)
            .await?;
        // The scout goes, paced by the store if it knows a limit (another
        // process's scout came back first), else as this process's scout;
        // the others wait for its news. Held, it passes its turn (dropped).
        let scouting = core::mem::take(&mut scout.armed);
        let go = match paced {
            Admission::Go => true,
            Admission::Local => scouting,
            _ => {
                scout.armed = scouting;
                false
            }
        };
        if !go {
            return Ok(paced);
        }
        *charge = Charge {
            reason,
            ..Charge::default()
        };
        charge.holds.set(Holds::SCOUT, scouting);
        Ok(Admission::Go)
    }

    /// The attempt's pace at the store: `first` the store's answer already
    /// had, if any. While a bucket lacks the cost the attempt sleeps until
    /// it holds it and asks again; the waiters of this process ask in
    /// arrival order, one at a time, so that a refill wakes one of them.
    /// A wait past the call's deadline is `Held` at once. `reason`: why
    /// the attempt waited (its cold start), `Paced` once it sleeps here.
    /// Never `Ready`; `Held` taken into the local state.
    async fn fleet_pace(
        &self,
        store: &Arc<dyn Store>,
        first: Option<Admission>,
        patience: Patience,
        cost: u32,
        reason: &mut Option<WaitReason>,
    ) -> Result<Admission, Held> {
        let mut next = first;
        let mut queue = None;
        loop {
            let admission = match next.take() {
                Some(admission) => admission,
                None => self.admission(store, self.spends(cost)).await,
            };
            let after = match admission {
                Admission::Ready(after) => after,
                Admission::Held(left, why) => {
                    let now = Instant::now();
                    // No event: the process that set the hold in the store sent it.
                    self.locked(|state| state.hold(now, left, why));
                    return Ok(admission);
                }
                // Go, Local (and whatever a later store answers: local).
                Admission::Go => return Ok(Admission::Go),
                _ => return Ok(Admission::Local),
            };
            let now = Instant::now();
            if patience.deadline.is_some_and(|d| now + after > d) {
                return Err(Held::new(
                    self.name.clone(),
                    after,
                    HoldReason::RateLimitHeaders,
                ));
            }
            *reason = Some(WaitReason::Paced);
            if queue.is_none() {
                match self.queue.try_lock() {
                    Ok(first) => queue = Some(first),
                    Err(_) => {
                        // Behind this process's other waiters: its turn
                        // comes later, the store's answer is stale by then.
                        queue = Some(self.queue.lock().await);
                        continue;
                    }
                }
            }
            tokio::time::sleep(after).await;
        }
    }

    /// A response's reading of the limits, shared with the store: the
    /// limits this process paces with, and what the server says is left.
    pub(super) fn share_learned(&self, fields: &RateLimitFields, departed: Option<u64>) {
        let Some(store) = &self.store else {
            return;
        };
        if !fields.requests.any() && !fields.tokens.any() {
            return;
        }
        let pacer = &self.pacer;
        // An instant bounds the window from when the request left, as in
        // this process (`Pacer::learn`): the fleet's window log counts that
        // long, not the answer's time less.
        let answered = departed.map_or(Duration::ZERO, |d| {
            Duration::from_nanos(pacer.now().saturating_sub(d))
        });
        let reading = |bucket: &Bucket, fields: &LimitFields| match bucket.get() {
            Some((limit, window, _)) => {
                // A reset in whole seconds may be up to a second late; an
                // instant counted from when the request left, up to the
                // answer's time late for the moment the server counted it.
                let rounding = match fields.whole_seconds {
                    true => Duration::from_secs(1),
                    false => Duration::ZERO,
                };
                let reading = Reading::new(limit, window, fields.remaining);
                match fields.reset {
                    Some(reset) if fields.instant => reading
                        .with_reset(reset + answered)
                        .rounded(rounding + answered),
                    Some(reset) => reading.with_reset(reset).rounded(rounding),
                    None => reading,
                }
            }
            None => Reading::default(),
        };
        store.learned(
            &self.name,
            [
                reading(&pacer.requests, &fields.requests),
                reading(&pacer.tokens, &fields.tokens),
            ],
        );
    }
}
