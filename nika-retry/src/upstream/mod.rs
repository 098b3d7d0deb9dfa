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
mod charge;
mod cold;
mod fleet;
// `pub(crate)` for the thread-local of the upstream in force, which holds
// a handle and needs nothing else of this module.
pub(crate) mod handle;
mod hold;
mod ledger;
mod limits;
mod pace;
mod pacer;
mod quota;
mod reading;
#[cfg(feature = "redis")]
mod redis;
mod store;
mod wait;
mod window;

use core::fmt;
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
pub use hold::Held;
pub use hold::MAX_HOLD;
#[cfg(test)]
use hold::Patience;
pub use limits::{DimensionLimit, UpstreamLimits};
pub(crate) use pacer::COST_UNKNOWN;
pub use quota::Quota;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis::RedisStore;
pub use store::{
    Admission, InProcess, PROBE_LEASE, PROBE_OUT, ProbeTurn, Reading, STORE_WAIT, Spend, Store,
    StoreFuture,
};
pub(crate) use wait::Reservation;

use crate::events::UpstreamEvent;
use crate::http::{self, Headers};
use handle::Shared;
use hold::{Grown, Hold};

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
    crate::ambient::upstream()
}

impl Upstream {
    /// An upstream called `name` (in events and errors: `"openai/gpt-4o"`).
    pub fn new(name: impl Into<Cow<'static, str>>) -> Upstream {
        Upstream {
            shared: Arc::new(Shared::new(name.into(), Hold::default(), None)),
        }
    }

    /// The name given to [`new`](Upstream::new).
    pub fn name(&self) -> &str {
        &self.shared.name
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
        let fields = http::rate_limit_fields(headers, wall);
        let paced = self.learn(&fields);
        self.share_learned(&fields);
        let Some(limits) = http::rate_limits(headers, wall) else {
            return;
        };
        if limits.remaining == 0 && self.paces_spent(&fields, limits.reset) {
            // None left of a dimension the pacer spends: it plans the next
            // attempt by what that dimension's server frees, sooner than
            // the reset when the server refills.
            return;
        }
        self.shared.pacer.heard.store(true, Ordering::Relaxed);
        self.shared.pacer.warm();
        self.publish_pacing();
        let now = Instant::now();
        // With the requests' limit known, their bucket counts what is left,
        // refilling as it goes; none left still holds until the reset.
        let grown = (!paced || limits.remaining == 0)
            .then(|| self.locked(|state| state.allow(now, limits.remaining, limits.reset)))
            .flatten();
        if let Some(store) = &self.shared.store
            && limits.remaining > 0
            && !paced
        {
            // None left is a hold: `after_hold` tells the store. With the
            // requests' limit known the store's buckets count what is left,
            // as this process's do: an allowance would hold the fleet for
            // the whole reset once spent, though a rolling window frees
            // its oldest admissions long before it.
            store.allow(&self.shared.name, limits.remaining, limits.reset);
        }
        self.after_hold(grown);
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
        self.locked(|state| state.breaker = (failures > 0).then_some((failures, open_for)));
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
        let shared = match Arc::try_unwrap(self.shared) {
            Ok(shared) => Shared {
                store: Some(store),
                ..shared
            },
            // A handle cloned already keeps the old state; this one starts
            // afresh with the store, its breaker kept.
            Err(shared) => {
                let breaker = shared
                    .hold
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .breaker;
                Shared::new(
                    shared.name.clone(),
                    Hold::with_breaker(breaker),
                    Some(store),
                )
            }
        };
        // With a store, every attempt asks it.
        shared.guarded.store(true, Ordering::Relaxed);
        Upstream {
            shared: Arc::new(shared),
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
        let now = Instant::now();
        self.locked(|state| state.left(now))
    }

    /// Holds for `d` with `reason`, and says so.
    pub(crate) fn hold(&self, d: Duration, reason: HoldReason) {
        let now = Instant::now();
        let grown = self.locked(|state| state.hold(now, d, reason));
        self.after_hold(grown);
    }

    /// Runs `f` on the state under its lock, then publishes whether
    /// attempts must look at it.
    fn locked<R>(&self, f: impl FnOnce(&mut Hold) -> R) -> R {
        let mut state = self.lock();
        let r = f(&mut state);
        self.publish(&state);
        r
    }

    fn lock(&self) -> MutexGuard<'_, Hold> {
        // The state stays consistent at every step: a panic elsewhere
        // while it was locked leaves nothing half-done.
        self.shared
            .hold
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, state: &Hold) {
        let guarded = state.guarded() || self.shared.store.is_some();
        self.shared.guarded.store(guarded, Ordering::Release);
        self.shared
            .counting
            .store(state.counting(), Ordering::Relaxed);
    }

    /// The event of a hold that started or grew; a store learns of it.
    fn after_hold(&self, grown: Option<Grown>) {
        let Some(Grown {
            held_for,
            reason,
            extended,
        }) = grown
        else {
            return;
        };
        self.shared
            .pacer
            .held_until(crate::time::later(Instant::now(), held_for));
        if let Some(store) = &self.shared.store {
            store.hold(&self.shared.name, held_for, reason);
        }
        crate::ambient::observers::emit_upstream(&UpstreamEvent {
            upstream: self.shared.name.to_string(),
            held_for,
            reason,
            extended,
        });
    }
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upstream")
            .field("name", &self.name())
            .field("held_for", &self.held_for())
            .field("store", &self.shared.store)
            .field("limits", &self.limits())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
