//! Calls that share an upstream: one 429 holds every caller, rate-limit
//! headers pace them, an opt-in breaker opens on consecutive failures.
//!
//! An [`Upstream`] is the state that calls against one limit share (a
//! provider's API key and model, a tool server). While it is held, no
//! attempt of any of its calls starts; when the hold ends, one attempt goes
//! first (the probe) and the others follow its outcome, spread with jitter.
//!
//! ```
//! use std::time::Duration;
//! use nika_retry::upstream::{HoldReason, Upstream};
//!
//! let upstream = Upstream::new("openai/gpt-4o");
//! assert_eq!(upstream.held_for(), None);
//! upstream.observe(&[("x-ratelimit-remaining-requests", "0"), ("x-ratelimit-reset-requests", "20s")][..]);
//! assert!(upstream.held_for().is_some_and(|left| left <= Duration::from_secs(20)));
//! ```

use core::fmt;
use core::task::{Context, Poll};
use core::time::Duration;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

use tokio::sync::Notify;

use crate::events::UpstreamEvent;
use crate::http::{self, Headers};

mod held;
mod pass;
mod store;
#[cfg(test)]
mod tests;

pub use held::{Held, HoldReason};
pub use pass::Ticket;
use store::Local;
pub use store::{Store, StoreError, StoreFuture, Turn};

/// No hold runs longer than this, whatever a header or a hint says: a
/// garbage value never holds an upstream forever.
pub const MAX_HOLD: Duration = Duration::from_secs(24 * 3600);

/// The probe's lease: past it, a probe that never reported (its process
/// crashed) has passed its turn on.
const PROBE_LEASE: Duration = Duration::from_secs(60);

/// The state shared by the calls against one upstream limit. Clones are
/// handles to the same state.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::upstream::Upstream;
///
/// let upstream = Upstream::new("anthropic/claude").with_breaker(5, Duration::from_secs(30));
/// let other = upstream.clone();
/// other.hold_for(Duration::from_secs(2));
/// assert!(upstream.held_for().is_some());
/// assert_eq!(upstream.name(), "anthropic/claude");
/// ```
#[derive(Clone)]
pub struct Upstream {
    inner: Arc<Inner>,
}

struct Inner {
    name: Cow<'static, str>,
    backing: Backing,
    /// Wakes the attempts waiting for a probe's outcome.
    probe_done: Notify,
    breaker: Option<(u32, Duration)>,
    failures: AtomicU32,
}

enum Backing {
    Local(Local),
    Shared(Arc<dyn Store>),
}

impl fmt::Debug for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Upstream");
        d.field("name", &self.name());
        match &self.inner.backing {
            Backing::Local(_) => d.field("held_for", &self.held_for()),
            Backing::Shared(store) => d.field("store", store),
        };
        d.field("breaker", &self.inner.breaker).finish()
    }
}

impl Upstream {
    /// An upstream that nothing holds, its state in this process.
    ///
    /// ```
    /// let upstream = nika_retry::upstream::Upstream::new(format!("openai/{}", "gpt-4o"));
    /// assert_eq!(upstream.name(), "openai/gpt-4o");
    /// ```
    pub fn new(name: impl Into<Cow<'static, str>>) -> Upstream {
        Upstream::build(name.into(), Backing::Local(Local::new()), None)
    }

    fn build(name: Cow<'static, str>, backing: Backing, breaker: Option<(u32, Duration)>) -> Self {
        Upstream {
            inner: Arc::new(Inner {
                name,
                backing,
                probe_done: Notify::new(),
                breaker,
                failures: AtomicU32::new(0),
            }),
        }
    }

    fn rebuild(self, backing: Option<Backing>, breaker: Option<(u32, Duration)>) -> Upstream {
        let inner = match Arc::try_unwrap(self.inner) {
            Ok(inner) => inner,
            // Clones exist: they keep the old settings; the state moves only with a store.
            Err(shared) => Inner {
                name: shared.name.clone(),
                backing: match &shared.backing {
                    Backing::Local(_) => Backing::Local(Local::new()),
                    Backing::Shared(s) => Backing::Shared(Arc::clone(s)),
                },
                probe_done: Notify::new(),
                breaker: shared.breaker,
                failures: AtomicU32::new(0),
            },
        };
        Upstream::build(
            inner.name,
            backing.unwrap_or(inner.backing),
            breaker.or(inner.breaker),
        )
    }

    /// Opens a breaker: after `failures` consecutive failed attempts
    /// classified `Transient`, the upstream is held for `open_for`, then
    /// released through a probe. Any success resets the count. Off by
    /// default; `failures` of 0 is taken as 1.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let upstream = nika_retry::upstream::Upstream::new("tools")
    ///     .with_breaker(5, Duration::from_secs(30));
    /// # drop(upstream);
    /// ```
    pub fn with_breaker(self, failures: u32, open_for: Duration) -> Upstream {
        self.rebuild(None, Some((failures.max(1), open_for)))
    }

    /// Keeps the hold, the allowance and the probe's turn in `store`,
    /// shared by every process that uses it.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use nika_retry::upstream::{HoldReason, Store, StoreError, StoreFuture, Turn, Upstream};
    /// # #[derive(Debug)] struct Fleet;
    /// # impl Store for Fleet {
    /// #     fn extend(&self, _: &str, _: Duration, _: HoldReason) -> StoreFuture<Option<bool>> { Box::pin(async { Ok(None) }) }
    /// #     fn turn(&self, _: &str, _: Duration) -> StoreFuture<Turn> { Box::pin(async { Ok(Turn::Go) }) }
    /// #     fn end_probe(&self, _: &str, _: bool) -> StoreFuture<()> { Box::pin(async { Ok(()) }) }
    /// #     fn allow(&self, _: &str, _: u64, _: Duration) -> StoreFuture<()> { Box::pin(async { Ok(()) }) }
    /// #     fn held_for(&self, _: &str) -> StoreFuture<Option<Duration>> { Box::pin(async { Ok(None) }) }
    /// # }
    /// let upstream = Upstream::new("openai/gpt-4o").with_store(Fleet);
    /// # drop(upstream);
    /// ```
    pub fn with_store(self, store: impl Store) -> Upstream {
        self.rebuild(Some(Backing::Shared(Arc::new(store))), None)
    }

    /// The name, as events and [`Held`] show it.
    ///
    /// ```
    /// assert_eq!(nika_retry::upstream::Upstream::new("a").name(), "a");
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// What is left of the hold, if the upstream is held (for metrics and
    /// tests). A store that does not answer at once reads as not held.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let upstream = nika_retry::upstream::Upstream::new("a");
    /// upstream.hold_for(Duration::from_secs(5));
    /// assert!(upstream.held_for() <= Some(Duration::from_secs(5)));
    /// ```
    pub fn held_for(&self) -> Option<Duration> {
        match &self.inner.backing {
            Backing::Local(local) => local.held_for(),
            Backing::Shared(store) => now_or_never(store.held_for(&self.inner.name))
                .and_then(Result::ok)
                .flatten(),
        }
    }

    /// Holds the upstream for `hold` (at most [`MAX_HOLD`]), unless a
    /// longer hold is in force.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let upstream = nika_retry::upstream::Upstream::new("a");
    /// upstream.hold_for(Duration::from_secs(5));
    /// upstream.hold_for(Duration::from_secs(1)); // never shortened
    /// assert!(upstream.held_for() > Some(Duration::from_secs(1)));
    /// ```
    pub fn hold_for(&self, hold: Duration) {
        self.hold_now(hold, HoldReason::ByHand);
    }

    /// Reads a response's rate-limit headers (OpenAI, Anthropic, IETF
    /// `RateLimit`; see [`http::rate_limits`]), a success's included: a
    /// spent limit holds the upstream until its reset; R requests left let
    /// at most R more attempts start before it. Anything unparsable changes
    /// nothing.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let upstream = nika_retry::upstream::Upstream::new("a");
    /// upstream.observe(&[("RateLimit", "\"default\";r=0;t=3")][..]);
    /// assert!(upstream.held_for().is_some());
    /// upstream.observe(&[("RateLimit", "garbage")][..]);
    /// assert!(upstream.held_for().is_some());
    /// ```
    pub fn observe<H: Headers + ?Sized>(&self, headers: &H) {
        let read = http::rate_limits(headers, SystemTime::now());
        if let Some((remaining, reset)) = read.remaining {
            let reset = reset.min(MAX_HOLD);
            match &self.inner.backing {
                Backing::Local(local) => local.allow(remaining, reset),
                Backing::Shared(store) => {
                    fire(store.allow(&self.inner.name, remaining, reset));
                }
            }
        }
        if let Some(wait) = read.exhausted {
            self.hold_now(wait, HoldReason::RateLimitHeaders);
        }
    }

    /// Extends the hold now (the in-process store answers at once; another
    /// store's answer is awaited on the runtime, if any) and sends the event.
    fn hold_now(&self, hold: Duration, reason: HoldReason) {
        let hold = hold.min(MAX_HOLD);
        if hold.is_zero() {
            return;
        }
        match &self.inner.backing {
            Backing::Local(local) => self.announce(local.extend(hold, reason), hold, reason),
            Backing::Shared(store) => {
                let name = self.inner.name.clone();
                // Ready at once, the event reaches this thread's observers; else `tracing` only.
                fire_then(store.extend(&name, hold, reason), move |extended| {
                    if let Some(extended) = extended {
                        crate::events::upstream::emit(&UpstreamEvent::new(
                            name, hold, reason, extended,
                        ));
                    }
                });
            }
        }
    }

    fn announce(&self, extended: Option<bool>, hold: Duration, reason: HoldReason) {
        if let Some(extended) = extended {
            crate::events::upstream::emit(&UpstreamEvent::new(
                self.inner.name.clone(),
                hold,
                reason,
                extended,
            ));
        }
    }

    /// The breaker's count of consecutive transient failures, and whether
    /// this one opens it.
    fn breaker_failed(&self) -> Option<Duration> {
        let (failures, open_for) = self.inner.breaker?;
        let n = self.inner.failures.fetch_add(1, Ordering::AcqRel) + 1;
        (n >= failures).then(|| {
            self.inner.failures.store(0, Ordering::Release);
            open_for
        })
    }

    fn breaker_reset(&self) {
        if self.inner.breaker.is_some() {
            self.inner.failures.store(0, Ordering::Relaxed);
        }
    }
}

/// Polls `fut` once: the in-process store and a store that answers from a
/// cache are ready at once.
fn now_or_never<T>(mut fut: StoreFuture<T>) -> Option<Result<T, StoreError>> {
    let mut cx = Context::from_waker(futures_task::noop_waker_ref());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

/// Runs a store write from a synchronous method: at once if it can, else on
/// the tokio runtime in force (without one, the write is lost, as a write
/// to a store that is down is).
fn fire(fut: StoreFuture<()>) {
    fire_then(fut, |()| {});
}

fn fire_then<T: Send + 'static>(mut fut: StoreFuture<T>, then: impl FnOnce(T) + Send + 'static) {
    let mut cx = Context::from_waker(futures_task::noop_waker_ref());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(r) => {
            if let Ok(v) = r {
                then(v);
            }
        }
        Poll::Pending => {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    if let Ok(v) = fut.await {
                        then(v);
                    }
                });
            }
        }
    }
}
