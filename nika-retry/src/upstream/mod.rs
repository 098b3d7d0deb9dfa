//! Calls that share an upstream: one server's pushback holds all of them.
//!
//! A workflow runs many calls at once against one limit (a provider's API
//! key and model, a tool server). An [`Upstream`] is the state they share:
//! when one attempt is told to wait (a 429's `Retry-After`, rate-limit
//! headers that say nothing is left), no attempt of any call in it starts
//! until then; then one goes first (the probe) and the others follow its
//! outcome, spread out so that they do not arrive together.
//!
//! ```
//! use std::time::Duration;
//! use nika_retry::upstream::{Held, Upstream};
//! use nika_retry::{retry, Classify};
//!
//! #[derive(Debug, thiserror::Error, Classify)]
//! pub enum ProviderError {
//!     #[error("rate limited")]
//!     #[category(rate_limited, retry_after = retry_after)]
//!     RateLimited { retry_after: Option<Duration> },
//!     /// A call that would not wait out the hold (past its cap or its deadline).
//!     #[error(transparent)]
//!     #[category(transparent)]
//!     Held(#[from] Held),
//! }
//!
//! pub struct Client {
//!     upstream: Upstream,
//! }
//!
//! impl Client {
//!     #[retry(layer = "provider", upstream = self.upstream)]
//!     pub async fn complete(&self, prompt: &str) -> Result<String, ProviderError> {
//!         Ok(prompt.to_uppercase())
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let client = Client { upstream: Upstream::new("openai/gpt-4o") };
//! client.upstream.hold_for(Duration::from_secs(5));
//! let started = tokio::time::Instant::now();
//! assert_eq!(client.complete("hi").await.unwrap(), "HI");
//! assert_eq!(started.elapsed(), Duration::from_secs(5), "it waited the hold out");
//! # }
//! ```
//!
//! It also paces: each limit it knows ([`Quota`] declared, or learned from
//! the headers [`Upstream::observe`] reads, or adapted to 429s that come
//! without them) is a bucket that refills over its window, and an attempt
//! starts when every bucket holds its cost (`#[retry(…, cost = …)]`),
//! waiters in arrival order. An upstream that knows no limit yet sends one
//! attempt first, and if its response says nothing of the limits, the
//! others in rounds that double (its cold start, [`Upstream::with_cold_start`]);
//! [`Upstream::limits`] says what it knows.
//!
//! A fn that names no upstream pays nothing for it; an open upstream costs
//! its calls two atomic loads per attempt, and a paced admission that does
//! not wait a few atomic updates (no lock, no allocation).

mod adapt;
mod bucket;
mod fleet;
mod handle;
mod hold;
mod pace;
mod pacer;

#[cfg(feature = "redis")]
mod redis;
mod store;

use core::fmt;
use core::pin::pin;
use core::time::Duration;
use std::borrow::Cow;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};

use tokio::time::Instant;

// Defined beside the event that carries it, so that `events` (a leaf)
// imports nothing from here.
pub use crate::events::upstream::HoldReason;
pub use bucket::LimitSource;
pub use handle::Upstream;
// For what puts a call's handle in force (`run/upstream.rs`) and reads it
// back (`stream/resumer.rs`, `adapter/judge.rs`).
pub(crate) use handle::in_force;
pub use handle::{DimensionLimit, Quota, UpstreamLimits};
pub use hold::Held;
pub use hold::MAX_HOLD;
pub(crate) use pace::Reservation;
pub(crate) use pacer::COST_UNKNOWN;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis::RedisStore;
pub use store::{
    Admission, InProcess, PROBE_LEASE, PROBE_OUT, ProbeTurn, Reading, STORE_WAIT, Spend, Store,
    StoreFuture,
};

use crate::engine::Failure;
use crate::events::{UpstreamEvent, WaitReason};
use crate::http::{self, Headers};
use crate::time::Nanos;
use fleet::Lease;
use handle::{GUARDED, Gates, PACING};
use hold::{Grown, Hold, Patience};
use pacer::{Charge, Holds};

/// The upstream of the innermost call in force that names one: a clone of
/// its handle (no allocation), or `None` outside any such call.
///
/// A transport fn under a provider fn sees the responses and their
/// rate-limit headers; the provider names the upstream. The transport feeds
/// it the headers without a parameter threaded through:
/// `current().map(|u| u.observe(headers))`. The upstream is in force while
/// an attempt of the call that names it is polled, in every fn that attempt
/// awaits (not in a task it spawns).
///
/// ```
/// use nika_retry::upstream::{self, Held, Upstream};
/// use nika_retry::{retry, Classify};
///
/// #[derive(Debug, thiserror::Error, Classify)]
/// pub enum Error {
///     #[error(transparent)]
///     #[category(transparent)]
///     Held(#[from] Held),
/// }
///
/// /// The transport: sees the response's headers, names no upstream.
/// #[retry(layer = "http")]
/// async fn post(prompt: &str) -> Result<String, Error> {
///     let headers = [("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "20s")];
///     if let Some(upstream) = upstream::current() {
///         upstream.observe(&headers); // none left: holds the provider's upstream
///     }
///     Ok(prompt.to_uppercase())
/// }
///
/// /// The provider: names the upstream its calls share.
/// #[retry(layer = "provider", upstream = upstream)]
/// async fn complete(upstream: &Upstream, prompt: &str) -> Result<String, Error> {
///     post(prompt).await
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let shared = Upstream::new("openai/gpt-4o");
/// assert_eq!(complete(&shared, "hi").await.unwrap(), "HI");
/// assert!(shared.held_for().is_some(), "the transport's headers held it");
/// assert!(upstream::current().is_none(), "outside any call");
/// # }
/// ```
#[inline]
pub fn current() -> Option<Upstream> {
    in_force::upstream()
}

impl Upstream {
    /// An upstream called `name` (in events and errors: `"openai/gpt-4o"`).
    pub fn new(name: impl Into<Cow<'static, str>>) -> Upstream {
        Upstream {
            gates: Arc::new(Gates::new(name.into(), Hold::default(), None)),
        }
    }

    /// The name given to [`new`](Upstream::new).
    pub fn name(&self) -> &str {
        &self.gates.name
    }

    /// Holds the upstream for `duration` from now (unless it is held longer
    /// already): no attempt of its calls starts before then.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Upstream;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let upstream = Upstream::new("tools/mailer");
    /// upstream.hold_for(Duration::from_secs(10));
    /// upstream.hold_for(Duration::from_secs(3)); // holds only ever extend
    /// assert_eq!(upstream.held_for(), Some(Duration::from_secs(10)));
    /// # }
    /// ```
    pub fn hold_for(&self, duration: Duration) {
        self.hold(duration, HoldReason::ByHand);
    }

    /// Reads a response's rate-limit headers (a success's too): OpenAI's
    /// `x-ratelimit-*`, Anthropic's `anthropic-ratelimit-*`, the IETF
    /// `RateLimit` field ([`http::rate_limits`]). None left holds the
    /// upstream until the reset; `R` left lets at most `R` more attempts
    /// start before it. An unparsable or absent value changes nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Upstream;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let upstream = Upstream::new("openai/gpt-4o");
    /// let headers = [
    ///     ("x-ratelimit-remaining-requests", "0"),
    ///     ("x-ratelimit-reset-requests", "6m0s"),
    /// ];
    /// upstream.observe(&headers[..]);
    /// assert_eq!(upstream.held_for(), Some(Duration::from_secs(360)));
    /// # }
    /// ```
    pub fn observe<H: Headers + ?Sized>(&self, headers: &H) {
        let wall = std::time::SystemTime::now();
        // When the attempt whose response this is left, if it is in force.
        let departed = in_force::departed(self);
        // Read against the server's clock as this upstream's recent
        // responses show it, not this one's alone.
        let lag = http::date_lag(headers, wall).map(|lag| self.gates.pacer.date_lag(lag, departed));
        let server = http::server_now_by(wall, lag);
        let fields = http::rate_limit_fields_at(headers, wall, server);
        let paced = self.gates.learn(&fields, departed);
        self.gates.share_learned(&fields, departed);
        let Some(limits) = http::rate_limits_at(headers, server) else {
            return;
        };
        if limits.remaining == 0 && self.gates.paces_spent(&fields, limits.reset) {
            // None left of a dimension the pacer spends: it plans the next
            // attempt by what that dimension's server frees, sooner than
            // the reset when the server refills.
            return;
        }
        self.gates.pacer.heard.store(true, Ordering::Relaxed);
        self.gates.pacer.warm();
        self.gates.publish_pacing();
        let now = Instant::now();
        // With the requests' limit known, their bucket counts what is left,
        // refilling as it goes; none left still holds until the reset.
        let grown = (!paced || limits.remaining == 0)
            .then(|| {
                self.gates
                    .locked(|state| state.allow(now, limits.remaining, limits.reset))
            })
            .flatten();
        if let Some(store) = &self.gates.store
            && limits.remaining > 0
            && !paced
        {
            // None left is a hold: `after_hold` tells the store. With the
            // requests' limit known the store's buckets count what is left,
            // as this process's do: an allowance would hold the fleet for
            // the whole reset once spent, though a rolling window frees
            // its oldest admissions long before it.
            store.allow(&self.gates.name, limits.remaining, limits.reset);
        }
        self.gates.after_hold(grown);
    }

    /// Turns on the breaker: after `failures` consecutive failed attempts
    /// of its calls classified `Transient`, the upstream is held for
    /// `open_for` (the breaker is open), then released through a probe
    /// (half-open): the probe's success closes it and releases the others;
    /// its transient failure opens it again for `open_for` at once, however
    /// few failures that makes. Any success resets the count. Off by
    /// default; `failures` of 0 leaves it off.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Upstream;
    ///
    /// let upstream = Upstream::new("tools/search").with_breaker(5, Duration::from_secs(30));
    /// # let _ = upstream;
    /// ```
    pub fn with_breaker(self, failures: u32, open_for: Duration) -> Upstream {
        self.gates
            .locked(|state| state.breaker = (failures > 0).then_some((failures, open_for)));
        self
    }

    /// Keeps the hold, the allowance and the probe's turn in `store`, shared
    /// with every process that uses it ([`Store`]; with feature `redis`,
    /// `RedisStore`); the in-process state stays the fallback.
    ///
    /// ```
    /// use nika_retry::upstream::{InProcess, Upstream};
    ///
    /// // Two upstreams of one name sharing a store see each other's holds.
    /// let store = InProcess::default();
    /// let a = Upstream::new("openai/gpt-4o").with_store(store.clone());
    /// let b = Upstream::new("openai/gpt-4o").with_store(store);
    /// # let _ = (a, b);
    /// ```
    pub fn with_store(self, store: impl Store) -> Upstream {
        let store: Arc<dyn Store> = Arc::new(store);
        let gates = match Arc::try_unwrap(self.gates) {
            Ok(gates) => Gates {
                store: Some(store),
                ..gates
            },
            // A handle cloned already keeps the old state; this one starts
            // afresh with the store, its breaker kept.
            Err(gates) => {
                let breaker = gates
                    .hold
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .breaker;
                Gates::new(gates.name.clone(), Hold::with_breaker(breaker), Some(store))
            }
        };
        // With a store, every attempt asks it.
        gates.looks.fetch_or(GUARDED, Ordering::Relaxed);
        Upstream {
            gates: Arc::new(gates),
        }
    }

    /// What is left of the hold in force, if any (for metrics and tests).
    ///
    /// ```
    /// use nika_retry::upstream::Upstream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(Upstream::new("open").held_for(), None);
    /// # }
    /// ```
    pub fn held_for(&self) -> Option<Duration> {
        self.gates.left()
    }

    /// Holds for `d` with `reason`, and says so.
    pub(crate) fn hold(&self, d: Duration, reason: HoldReason) {
        self.gates.hold(d, reason);
    }

    /// Admits the next attempt of `r` without waiting: `None` if it may
    /// start now (the upstream open, or paced and its buckets holding the
    /// cost: no lock, no allocation), else the instant before which it
    /// cannot ([`wait`](Upstream::wait) then waits, or gives up with `Held`).
    /// A refused attempt takes nothing: its wait looks again.
    #[inline]
    pub(crate) fn admit(&self, r: &mut Reservation<'_>) -> Option<Instant> {
        if self.open() {
            return None;
        }
        self.admit_paced(r)
    }

    /// [`admit`](Upstream::admit) past an open upstream: out of line, so
    /// that an open upstream's check stays two loads in its caller.
    #[inline(never)]
    fn admit_paced(&self, r: &mut Reservation<'_>) -> Option<Instant> {
        let (gates, pacer) = (&self.gates, &self.gates.pacer);
        if gates.looks_at(GUARDED) || pacer.cold.load(Ordering::Acquire) {
            return Some(Instant::now());
        }
        // Behind the waiters: they hold no places, the queue keeps their
        // order. Refused by the pace, it waits beyond what the buckets held
        // when it came (`paced`).
        if gates.queued.load(Ordering::Acquire) > 0 {
            r.paced = true;
            return Some(Instant::now());
        }
        // The ramp's slot first: without one the attempt takes nothing.
        let slot = match pacer.ramp.on().then(|| pacer.ramp.try_slot()) {
            None => None,
            Some(Ok(slot)) => slot,
            Some(Err(_)) => return Some(Instant::now()),
        };
        let now = pacer.now();
        // A slot not started goes back as it drops.
        match pacer.take(now, r.cost, pacer.refilled_to(now), now) {
            Ok(mut charge) => {
                let ramp = slot.is_some_and(|slot| slot.start());
                charge.holds.set(Holds::RAMP, ramp);
                pacer.adaptive.sent();
                r.charge = charge;
                None
            }
            Err(at) => {
                r.paced = true;
                Some(pacer.instant(at))
            }
        }
    }

    /// The wait of an attempt [`admit`](Upstream::admit) refused, until
    /// `at` at the earliest: the hold (a probe's turn; `Held` past the
    /// call's `cap`, the longest server hint it sleeps on), the store, the
    /// pace (`Held` past the call's `deadline`, as is any wait). Boxed: the
    /// wait's state (its `Notified`, its `Sleep`, the store's futures)
    /// would otherwise sit in the future of every fn that names an
    /// upstream, held or not, and of every fn that calls one (448 bytes);
    /// one allocation for a wait, which lasts milliseconds at least, is
    /// nothing beside it. Only the box crosses the caller's `await`.
    #[cold]
    pub(crate) fn wait<'a, 'u: 'a>(
        &'u self,
        r: &'a mut Reservation<'u>,
        at: Instant,
        cap: Duration,
        deadline: Option<Instant>,
    ) -> core::pin::Pin<Box<impl core::future::Future<Output = Result<(), Held>> + 'a>> {
        let patience = Patience { cap, deadline };
        Box::pin(async move {
            if r.paced && pace::past_deadline(deadline, at) {
                let left = at.saturating_duration_since(Instant::now());
                return Err(Held::new(
                    self.gates.name.clone(),
                    left,
                    HoldReason::RateLimitHeaders,
                ));
            }
            *r = self.wait_turn(patience, r.cost, r.paced).await?;
            Ok(())
        })
    }

    /// The attempt ended: `failure` is its error's, `until` the start of
    /// the retry its call drew (the backoff is until then). A server hint
    /// holds the upstream, whether or not the call retries; a rate limit
    /// without one holds it for the backoff; a probe's outcome releases the
    /// others unless it held again. `r` is idle after (a success with
    /// neither probe nor failures counted ends the call: nothing to reset).
    #[inline(always)]
    pub(crate) fn settle(
        &self,
        r: &mut Reservation<'_>,
        failure: Option<Failure>,
        until: Option<Instant>,
    ) {
        r.settle(failure, until);
    }

    /// What the unit tests drive: [`admit`](Upstream::admit) and, if it
    /// refuses, [`wait`](Upstream::wait), at the mean cost learned.
    #[cfg(test)]
    pub(crate) async fn pass(&self, patience: Patience) -> Result<Reservation<'_>, Held> {
        self.pass_costing(patience, COST_UNKNOWN).await
    }

    /// [`pass`](Upstream::pass) at `cost`.
    #[cfg(test)]
    pub(crate) async fn pass_costing(
        &self,
        patience: Patience,
        cost: u32,
    ) -> Result<Reservation<'_>, Held> {
        let mut r = Reservation::idle(self).with_cost(cost);
        if let Some(at) = self.admit(&mut r) {
            self.wait(&mut r, at, patience.cap, patience.deadline)
                .await?;
        }
        Ok(r)
    }

    /// Whether the next attempt may start at once (one atomic load).
    #[inline(always)]
    fn open(&self) -> bool {
        if self.gates.looks.load(Ordering::Acquire) != 0 {
            return false;
        }
        // Counted for the adaptive rate's measure of what is sent.
        self.gates.pacer.adaptive.sent();
        true
    }

    /// A wait at a held upstream, then at its pacer; a hold that started
    /// meanwhile is waited out again.
    #[cold]
    async fn wait_turn(
        &self,
        patience: Patience,
        cost: u32,
        mut paced: bool,
    ) -> Result<Reservation<'_>, Held> {
        let start = Instant::now();
        loop {
            let (mut turn, admission) = if self.gates.looks_at(GUARDED) {
                self.hold_wait(patience, cost).await?
            } else {
                (Reservation::idle(self), None)
            };
            turn.cost = cost;
            let held = turn.waited.get().is_some_and(|w| !w.is_zero());
            let fleet = match &self.gates.store {
                Some(store) => {
                    self.gates
                        .fleet_turn(store, admission, patience, cost, &mut turn.charge)
                        .await?
                }
                None => Admission::Local,
            };
            if matches!(fleet, Admission::Held(..)) {
                continue;
            }
            if fleet == Admission::Local && self.gates.looks_at(PACING) {
                // Dropped on `Held`: a probe's turn passes on.
                let Some(charge) = self
                    .gates
                    .pace(cost, patience, core::mem::take(&mut paced))
                    .await?
                else {
                    // Held while it was paced: nothing taken, it waits again.
                    continue;
                };
                turn.charge = charge;
            }
            if held {
                // The hold first: the pace after it is the hold's tail (a
                // rate adapted to 429s without headers spends it).
                turn.charge.reason = Some(WaitReason::Held);
            }
            self.gates.pacer.adaptive.sent();
            // A scout, or a step that found the upstream open, did not wait.
            let waited = turn.charge.reason.is_some() || turn.probe;
            turn.waited = Nanos::new(waited.then(|| start.elapsed()));
            return Ok(turn);
        }
    }

    /// The wait for the hold's end, and the store's admission asked last
    /// if it still stands (the attempt goes at once after it).
    #[cold]
    async fn hold_wait(
        &self,
        patience: Patience,
        cost: u32,
    ) -> Result<(Reservation<'_>, Option<Admission>), Held> {
        let start = Instant::now();
        loop {
            let admission = match &self.gates.store {
                Some(store) => self.gates.ask(store, cost).await,
                None => None,
            };
            let mut released = pin!(self.gates.released.notified());
            let now = Instant::now();
            let (step, grown) = {
                let mut state = self.gates.lock();
                let (step, grown) = state.step(now);
                let reason = state.reason.unwrap_or(HoldReason::ServerHint);
                if let Some((until, probe)) = step
                    && let left = until.saturating_duration_since(now)
                    && (left > patience.cap || patience.deadline.is_some_and(|d| now + left > d))
                {
                    let passed_on = probe;
                    if passed_on {
                        state.probe = false;
                    }
                    self.gates.publish(&state);
                    drop(state);
                    if passed_on {
                        // The turn goes to the next waiter, who has its own patience.
                        self.gates.released.notify_one();
                    }
                    self.gates.after_hold(grown);
                    return Err(Held::new(self.gates.name.clone(), left, reason));
                }
                if matches!(step, Some((_, false))) {
                    // Registered under the lock: a release after it is seen.
                    released.as_mut().enable();
                }
                self.gates.publish(&state);
                (step, grown)
            };
            self.gates.after_hold(grown);
            match step {
                None => return Ok((self.turn(false, start), admission)),
                Some((until, true)) => {
                    // Owned from here: a probe dropped while it sleeps passes its turn.
                    let mut turn = self.turn(true, start);
                    let mut until = until;
                    loop {
                        tokio::time::sleep_until(until).await;
                        if let Some(later) = self.gates.lock().until.filter(|&later| later > until)
                        {
                            let left = later.saturating_duration_since(Instant::now());
                            if left > patience.cap || patience.deadline.is_some_and(|d| later > d) {
                                // Held longer meanwhile, past this caller's
                                // patience: it steps again below, gives up
                                // with `Held` and passes the turn on.
                                break;
                            }
                            until = later;
                            continue;
                        }
                        match self.gates.lease().await {
                            Lease::Go => break,
                            Lease::Poll(at) => until = at,
                            // Held again in the store: the turn goes back
                            // and this caller steps again, patience and all.
                            Lease::Held => break,
                        }
                    }
                    if self.held_for().is_some() {
                        drop(turn);
                        continue;
                    }
                    turn.waited = Nanos::new(Some(start.elapsed()));
                    return Ok((turn, None));
                }
                Some((_, false)) => {
                    released.await;
                    // The spread the release just set.
                    let spread = self.gates.lock().spread;
                    if !spread.is_zero() {
                        // Released with the others: arrive spread out, then
                        // look again (another call may have held it since).
                        let jitter =
                            fastrand::u64(..=spread.as_nanos().try_into().unwrap_or(u64::MAX));
                        tokio::time::sleep(Duration::from_nanos(jitter)).await;
                    }
                }
            }
        }
    }

    fn turn(&self, probe: bool, start: Instant) -> Reservation<'_> {
        Reservation {
            upstream: self,
            probe,
            paced: false,
            waited: Nanos::new(Some(start.elapsed())),
            cost: COST_UNKNOWN,
            charge: Charge::default(),
        }
    }

    /// Declares the upstream's limits: each attempt of its calls starts
    /// when every limited dimension holds its cost (one request; the
    /// call's `cost = …` of tokens), waiters served in arrival order.
    /// Rate-limit headers may lower a declared limit, never raise it. A
    /// declared quota has no cold start: it starts whole and its first
    /// burst goes at once; the waiters beyond it wait for the first
    /// response (at most the cold start's max), whose headers say whether
    /// the server refills or counts by window (then a log of what was sent
    /// paces them), and each goes a margin after the refill it waits for
    /// (a fortieth of the window, at most 40 ms, doubled by a 429 up to an
    /// eighth): the server's refill runs from when a request reaches it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::{Quota, Upstream};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let upstream = Upstream::new("tools/search")
    ///     .with_quota(Quota::per(Duration::from_secs(1)).requests(2));
    /// let limits = upstream.limits();
    /// assert_eq!(limits.requests.unwrap().level, 2, "a declared bucket starts whole");
    /// assert!(!limits.cold_start);
    /// # }
    /// ```
    pub fn with_quota(self, quota: Quota) -> Upstream {
        let pacer = &self.gates.pacer;
        if !quota.window.is_zero() {
            for (bucket, limit) in [
                (&pacer.requests, quota.requests),
                (&pacer.tokens, quota.tokens),
            ] {
                if let Some(limit) = limit {
                    bucket.set(u64::from(limit), quota.window, LimitSource::Declared);
                }
            }
        }
        if pacer.requests.known() || pacer.tokens.known() {
            pacer.cold.store(false, Ordering::Relaxed);
            // Its burst goes; its refill waits for the first response,
            // which says whether the server refills at all.
            pacer.unheard();
        }
        self.gates.publish_pacing();
        self
    }

    /// How long the calls of an upstream that knows no limit yet wait for
    /// its first attempt (the scout) to tell them: its response's headers
    /// observed, or its end, whichever comes first, at most `max`. The
    /// default is 1 s; `Duration::ZERO` turns the cold start off.
    ///
    /// If the scout brought no word of the limits (a server that sends no
    /// rate-limit headers), the others go in rounds that double, as TCP's
    /// slow start: 2 out at once, one more for each that succeeds (and
    /// twice as many when a round has waited `max` for its successes:
    /// long calls), until a response's headers, a 429 (which turns the
    /// adaptive rate on) or 64 attempts out together end the ramp. Its
    /// waits are
    /// [`WaitReason::ColdStart`](crate::events::WaitReason::ColdStart).
    ///
    /// ```
    /// use std::time::Duration;
    /// use nika_retry::upstream::Upstream;
    ///
    /// let upstream = Upstream::new("openai/gpt-4o").with_cold_start(Duration::ZERO);
    /// assert!(!upstream.limits().cold_start);
    /// ```
    pub fn with_cold_start(self, max: Duration) -> Upstream {
        let pacer = &self.gates.pacer;
        pacer.set_cold_max(max);
        if max.is_zero() {
            pacer.cold.store(false, Ordering::Relaxed);
        }
        self.gates.publish_pacing();
        self
    }

    /// What the upstream knows of its limits now: per dimension the limit,
    /// the level, the refill and whether it was declared, learned from
    /// headers or adapted to 429s; the mean cost it learned; whether its
    /// cold start is pending.
    ///
    /// ```
    /// use nika_retry::upstream::{LimitSource, Upstream};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let upstream = Upstream::new("openai/gpt-4o");
    /// upstream.observe(&[
    ///     ("x-ratelimit-limit-requests", "20"),
    ///     ("x-ratelimit-remaining-requests", "19"),
    ///     ("x-ratelimit-reset-requests", "100ms"),
    /// ][..]);
    /// let requests = upstream.limits().requests.unwrap();
    /// assert_eq!((requests.limit, requests.level), (20, 19));
    /// assert_eq!(requests.source, LimitSource::Learned);
    /// assert!(!upstream.limits().cold_start);
    /// # }
    /// ```
    pub fn limits(&self) -> UpstreamLimits {
        let pacer = &self.gates.pacer;
        let now = pacer.now();
        UpstreamLimits {
            requests: DimensionLimit::of(&pacer.requests, now),
            tokens: DimensionLimit::of(&pacer.tokens, now),
            mean_cost: pacer.mean_cost(),
            cold_start: pacer.cold.load(Ordering::Relaxed),
            ramp: pacer.ramp.window(),
        }
    }

    /// Its name, if it was given as a `&'static str` (most are): an
    /// attribute that costs no allocation.
    #[cfg(feature = "opentelemetry")]
    pub(crate) fn static_name(&self) -> Option<&'static str> {
        match self.gates.name {
            Cow::Borrowed(name) => Some(name),
            Cow::Owned(_) => None,
        }
    }

    /// Whether `other` is a handle of the same upstream (its clone).
    pub(crate) fn same(&self, other: &Upstream) -> bool {
        Arc::ptr_eq(&self.gates, &other.gates)
    }

    /// When an attempt leaving now left, on the pacer's clock, for the
    /// headers it reads ([`observe`](Upstream::observe)); 0 while nothing
    /// is paced, which reads no clock. The pacer notes what it estimated
    /// then, for the reading to tell how far that was off.
    #[inline]
    pub(crate) fn departure(&self) -> u64 {
        if self.gates.looks_at(PACING) {
            self.gates.pacer.departure()
        } else {
            0
        }
    }
}

/// The gates' state behind a handle, what each gate reads and writes.
impl Gates {
    /// Holds for `d` with `reason`, and says so.
    pub(super) fn hold(&self, d: Duration, reason: HoldReason) {
        let now = Instant::now();
        let grown = self.locked(|state| state.hold(now, d, reason));
        self.after_hold(grown);
    }

    /// What is left of the hold in force, if any.
    pub(super) fn left(&self) -> Option<Duration> {
        let now = Instant::now();
        self.locked(|state| state.left(now))
    }

    /// Whether attempts must look at `what` ([`GUARDED`], [`PACING`]).
    #[inline(always)]
    pub(super) fn looks_at(&self, what: u8) -> bool {
        self.looks.load(Ordering::Acquire) & what != 0
    }

    /// Publishes whether attempts must look at `what`.
    pub(super) fn look_at(&self, what: u8, on: bool) {
        if on {
            self.looks.fetch_or(what, Ordering::Release);
        } else {
            self.looks.fetch_and(!what, Ordering::Release);
        }
    }

    /// Runs `f` on the state under its lock, then publishes whether
    /// attempts must look at it.
    pub(super) fn locked<R>(&self, f: impl FnOnce(&mut Hold) -> R) -> R {
        let mut state = self.lock();
        let r = f(&mut state);
        self.publish(&state);
        r
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Hold> {
        // The state stays consistent at every step: a panic elsewhere
        // while it was locked leaves nothing half-done.
        self.hold.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn publish(&self, state: &Hold) {
        self.look_at(GUARDED, state.guarded() || self.store.is_some());
        self.counting.store(state.counting(), Ordering::Relaxed);
    }

    /// The event of a hold that started or grew; a store learns of it.
    pub(super) fn after_hold(&self, grown: Option<Grown>) {
        let Some(Grown {
            held_for,
            reason,
            extended,
        }) = grown
        else {
            return;
        };
        self.pacer
            .held_until(crate::time::later(Instant::now(), held_for));
        if let Some(store) = &self.store {
            store.hold(&self.name, held_for, reason);
        }
        let event = UpstreamEvent {
            upstream: self.name.to_string(),
            held_for,
            reason,
            extended,
        };
        // A hold that no refused attempt caused is a pushback.
        crate::metrics::held(&event);
        crate::events::observers::emit_upstream(&event);
    }
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name())
            .field("held_for", &self.held_for())
            .field("store", &self.gates.store)
            .field("limits", &self.limits())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
