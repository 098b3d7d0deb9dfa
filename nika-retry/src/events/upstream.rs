//! [`UpstreamEvent`]: a hold of a shared upstream started or grew.

use core::fmt;
use core::time::Duration;

/// A hold of an [`Upstream`](crate::upstream::Upstream) started (logged at
/// `WARN`) or was extended (`DEBUG`). One event per hold, not one per call
/// that waits at it: those carry their wait in
/// [`RetryEvent::upstream_wait`](super::RetryEvent::upstream_wait).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
/// use nika_retry::events::{observe, RetryEvent, RetryObserver, UpstreamEvent};
/// use nika_retry::upstream::{HoldReason, Upstream};
///
/// #[derive(Default)]
/// struct Holds(Mutex<Vec<String>>);
/// impl RetryObserver for Holds {
///     fn on_event(&self, _: &RetryEvent) {}
///     fn on_upstream(&self, event: &UpstreamEvent) {
///         self.0.lock().unwrap().push(event.to_string());
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let holds = Arc::new(Holds::default());
/// let upstream = Upstream::new("anthropic/claude");
/// observe(holds.clone(), async { upstream.hold_for(Duration::from_secs(20)) }).await;
/// assert_eq!(
///     *holds.0.lock().unwrap(),
///     ["upstream `anthropic/claude` held for 20s (a hold set by hand)"]
/// );
/// # }
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamEvent {
    /// The upstream's name.
    pub upstream: String,
    /// How long it is held from now.
    pub held_for: Duration,
    /// Why.
    pub reason: HoldReason,
    /// It extended a hold in force rather than starting one.
    pub extended: bool,
}

impl fmt::Display for UpstreamEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held_for =
            Duration::from_millis(self.held_for.as_millis().try_into().unwrap_or(u64::MAX));
        write!(
            f,
            "upstream `{}` {} for {} ({})",
            self.upstream,
            if self.extended {
                "hold extended"
            } else {
                "held"
            },
            humantime::format_duration(held_for),
            self.reason
        )
    }
}

/// `event` as a `tracing` event: WARN for a hold that starts, DEBUG for
/// one extended.
#[cfg(feature = "tracing")]
pub(crate) fn trace(event: &UpstreamEvent) {
    {
        let ms = u64::try_from(event.held_for.as_millis()).unwrap_or(u64::MAX);
        macro_rules! trace {
            ($level:expr) => {
                tracing::event!(
                    target: "nika_retry",
                    $level,
                    upstream = event.upstream.as_str(),
                    held_for_ms = ms,
                    reason = event.reason.as_str(),
                    extended = event.extended,
                    "{event}"
                )
            };
        }
        if event.extended {
            trace!(tracing::Level::DEBUG);
        } else {
            trace!(tracing::Level::WARN);
        }
    }
}

/// Why an [`Upstream`](crate::upstream::Upstream) is held.
///
/// ```
/// use nika_retry::upstream::HoldReason;
///
/// assert_eq!(HoldReason::ServerHint.to_string(), "the server's retry hint");
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HoldReason {
    /// A failed attempt carried the server's hint (`Retry-After`,
    /// `retry-after-ms`), or was rate limited without one (its own backoff).
    ServerHint,
    /// A response's rate-limit headers said that nothing is left until a reset.
    RateLimitHeaders,
    /// The breaker opened after consecutive transient failures.
    Breaker,
    /// [`Upstream::hold_for`](crate::upstream::Upstream::hold_for).
    ByHand,
}

impl HoldReason {
    /// The reason in words, as `Display` writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            HoldReason::ServerHint => "the server's retry hint",
            HoldReason::RateLimitHeaders => "the rate-limit headers",
            HoldReason::Breaker => "the breaker",
            HoldReason::ByHand => "a hold set by hand",
        }
    }
}

impl fmt::Display for HoldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Why a call waited at its upstream before an attempt started
/// ([`RetryEvent::wait_reason`](super::RetryEvent::wait_reason)).
///
/// ```
/// use nika_retry::events::WaitReason;
///
/// assert_eq!(WaitReason::Paced.to_string(), "paced to its limits");
/// ```
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitReason {
    /// The upstream was held (a server hint, rate-limit headers with
    /// nothing left, the breaker, by hand).
    Held,
    /// The upstream's limits (declared, learned or adapted) had not refilled
    /// enough for the attempt.
    Paced,
    /// The upstream knew no limit yet: its first attempt went first (and,
    /// if that said nothing of the limits, the others in rounds that double).
    ColdStart,
}

impl WaitReason {
    /// The reason in words, as `Display` writes it.
    ///
    /// ```
    /// use nika_retry::events::WaitReason;
    ///
    /// assert_eq!(WaitReason::ColdStart.as_str(), "its cold start");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            WaitReason::Held => "held",
            WaitReason::Paced => "paced to its limits",
            WaitReason::ColdStart => "its cold start",
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
