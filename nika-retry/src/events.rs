//! Retry events: every decision of every retry loop, tagged with its layer.
//!
//! ADR-019 accepts three retry layers on the condition that the user can
//! always tell which one is firing. Each decision becomes a [`RetryEvent`],
//! sent to `tracing` (feature `tracing`, on by default: target `nika_retry`;
//! WARN for a retry, for a give-up after retries and for a call not
//! retried because its attempt may have taken effect, DEBUG for a give-up on
//! the first attempt — not retryable, a one-attempt layer, the 429 that the
//! http layer leaves to the provider — and for a recovery) and to the
//! [`RetryObserver`]s installed with [`observe`], such as the ready-made
//! [`EventLog`] — the engine's EventLog. A loop that breaks the
//! stratification of the layers (ADR-006) is reported to them too, as a
//! [`LayerViolation`].
//!
//! ```
//! use nika_retry::events::{observe, EventLog, Outcome};
//! use nika_retry::{retry, Classify, Layer};
//!
//! #[derive(Debug, Classify)]
//! #[category(transient)]
//! struct Reset;
//!
//! #[retry(layer = "http", backoff = "1ms")]
//! async fn fetch(fail: &std::sync::atomic::AtomicBool) -> Result<(), Reset> {
//!     if fail.swap(false, std::sync::atomic::Ordering::SeqCst) { Err(Reset) } else { Ok(()) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let log = EventLog::new();
//! let fail = std::sync::atomic::AtomicBool::new(true);
//! observe(log.clone().into(), fetch(&fail)).await.unwrap();
//! let seen: Vec<_> = log.events().iter().map(|e| (e.layer, e.attempt, e.outcome)).collect();
//! assert_eq!(seen, [(Layer::Http, 1, Outcome::Retrying), (Layer::Http, 2, Outcome::Recovered)]);
//! # }
//! ```

use core::fmt;
use core::time::Duration;

use crate::engine::GiveUp;
#[cfg(feature = "tracing")]
use crate::engine::Level;
use crate::vocab::category::ErrorCategory;
use crate::vocab::layer::Layer;

mod log;
pub(crate) mod observers;
pub(crate) mod upstream;
mod violation;

pub use crate::engine::Outcome;
pub use log::EventLog;
pub use observers::{Observed, observe};
pub use upstream::{UpstreamEvent, WaitReason};
pub use violation::LayerViolation;

/// One decision of one retry loop.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub struct RetryEvent {
    /// The layer whose loop decided.
    pub layer: Layer,
    /// `module::path::fn_name` of the annotated fn.
    pub operation: &'static str,
    /// For a method (a fn with a `self` receiver), the impl's type, as
    /// `core::any::type_name` writes it: `my_crate::http::Transport`.
    pub self_type: Option<&'static str>,
    /// The 1-based attempt that just ended.
    pub attempt: u32,
    /// The attempts the loop allows in all.
    pub max_attempts: u32,
    /// The category of the attempt's error (for `Recovered`, of the last
    /// error before it); `None` for a first attempt that succeeded after a
    /// wait at its upstream (`Recovered` at attempt 1), which had no error.
    pub category: Option<ErrorCategory>,
    /// The sleep before the next attempt (`Retrying` only).
    pub delay: Option<Duration>,
    /// Whether `delay` is the server's hint rather than the computed backoff.
    pub from_hint: bool,
    /// The computed backoff before jitter, when `delay` was drawn from it
    /// (`Retrying` without a hint): `delay` lies in `[backoff·(1−jitter), backoff]`.
    pub backoff: Option<Duration>,
    /// What the loop does next.
    pub outcome: Outcome,
    /// Why it stopped (`GaveUp` and `BudgetExhausted` only); for
    /// `BudgetExhausted`, which budget: the attempt budget or the token bucket.
    pub reason: Option<GiveUp>,
    /// Time since this call's first failure.
    pub since_first_failure: Duration,
    /// Attempts so far under the outermost retried call, across every layer:
    /// one plus every retry taken.
    pub total_attempts: u32,
    /// How long the attempt waited at its held
    /// [`Upstream`](crate::upstream::Upstream) before it started; `None`
    /// if it did not wait.
    pub upstream_wait: Option<Duration>,
    /// Why it waited there (with `upstream_wait`): held, paced to the
    /// upstream's limits, or its cold start. A first attempt that
    /// succeeded after such a wait says so too (`Recovered` at attempt 1,
    /// at `DEBUG`).
    pub wait_reason: Option<WaitReason>,
    /// For a streamed response that resumes ([`Outcome::Resuming`], or a
    /// resume's own attempt that failed or recovered): the items the
    /// caller had been given when it broke. `None` for any other event.
    pub resumed_after: Option<u64>,
}

impl RetryEvent {
    /// The annotated fn's own name: the last segment of `operation`.
    pub fn fn_name(&self) -> &'static str {
        self.operation.rsplit("::").next().unwrap_or(self.operation)
    }

    /// `my_crate::http::Transport::post` for a method (its impl's type and
    /// its name), the `operation` for a free fn.
    fn qualified_name(&self) -> std::borrow::Cow<'static, str> {
        match self.self_type {
            Some(ty) => format!("{ty}::{}", self.fn_name()).into(),
            None => self.operation.into(),
        }
    }

    /// `Transport::post` for a method, `module::post` for a free fn: the
    /// last segment of the owner and the fn's name.
    pub(crate) fn short_name(&self) -> String {
        let owner = self.self_type.unwrap_or(
            self.operation
                .trim_end_matches(self.fn_name())
                .trim_end_matches("::"),
        );
        let owner = owner.rsplit("::").next().unwrap_or(owner);
        if owner.is_empty() {
            self.fn_name().to_owned()
        } else {
            format!("{owner}::{}", self.fn_name())
        }
    }
}

impl fmt::Display for RetryEvent {
    /// One log line: `[provider] my::op attempt 1/3 rate_limited: retrying in 7s (server hint)`,
    /// or `… transient: retrying in 713ms (jittered from 1s)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] ", self.layer)?;
        let name = self.qualified_name();
        f.write_str(&name)?;
        write!(f, " attempt {}/{}", self.attempt, self.max_attempts)?;
        if let Some(category) = self.category {
            write!(f, " {category}")?;
        }
        write!(f, ": {}", self.outcome)?;
        if let Some(delay) = self.delay {
            // Whole milliseconds: jitter makes the rest noise in a log line.
            let delay = Duration::from_millis(delay.as_millis().try_into().unwrap_or(u64::MAX));
            write!(f, " in {}", humantime::format_duration(delay))?;
            if self.from_hint {
                f.write_str(" (server hint)")?;
            } else if let Some(backoff) = self.backoff.filter(|b| *b != delay) {
                write!(
                    f,
                    " (jittered from {})",
                    humantime::format_duration(backoff)
                )?;
            }
        }
        if let Some(waited) = self.upstream_wait {
            let waited = Duration::from_millis(waited.as_millis().try_into().unwrap_or(u64::MAX));
            write!(
                f,
                " after waiting {} at its upstream",
                humantime::format_duration(waited)
            )?;
            if let Some(why) = self.wait_reason {
                write!(f, " ({why})")?;
            }
        }
        if let Some(items) = self.resumed_after {
            write!(f, " (the stream had delivered {items} items)")?;
        }
        match self.reason {
            // The fn by name: the one whose effect someone may have to check.
            Some(GiveUp::MayHaveTakenEffect) => write!(
                f,
                " (not retried: the attempt may have taken effect and `{}` is not idempotent)",
                self.short_name()
            )?,
            Some(reason) => write!(f, " ({reason})")?,
            None => {}
        }
        Ok(())
    }
}

/// Receives every [`RetryEvent`] of the futures it observes.
///
/// Called synchronously from inside the retry loop: keep it quick (push to
/// a log or a channel). [`EventLog`] is one ready-made; a hand-written one
/// keeps what it needs:
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use nika_retry::events::{Outcome, RetryEvent, RetryObserver};
///
/// /// Counts the retries, at every layer.
/// #[derive(Default)]
/// struct Retries(AtomicU32);
///
/// impl RetryObserver for Retries {
///     fn on_event(&self, e: &RetryEvent) {
///         if e.outcome == Outcome::Retrying {
///             self.0.fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
/// ```
pub trait RetryObserver: Send + Sync {
    /// One decision.
    fn on_event(&self, event: &RetryEvent);

    /// A retry loop that started inside an attempt of a loop of the same or
    /// a lower layer ([`LayerViolation`]); nothing by default. A test can
    /// fail on it.
    fn on_layer_violation(&self, violation: &LayerViolation) {
        let _ = violation;
    }

    /// A hold of a shared [`Upstream`](crate::upstream::Upstream) started
    /// or grew; nothing by default.
    fn on_upstream(&self, event: &UpstreamEvent) {
        let _ = event;
    }
}

/// `event` as a `tracing` event, at the `level` its decision gave it
/// ([`Decision::level`](crate::engine::Decision::level)).
#[cfg(feature = "tracing")]
pub(crate) fn trace(e: &RetryEvent, level: Level) {
    // Saturating: a backoff may be `Duration::MAX`, past `u64` milliseconds.
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let delay_ms = e.delay.map(ms);
    let reason = e.reason.map(tracing::field::display);
    macro_rules! event {
        ($level:expr) => {
            tracing::event!(
                target: "nika_retry",
                $level,
                layer = e.layer.as_str(),
                operation = e.operation,
                self_type = e.self_type,
                attempt = e.attempt,
                max_attempts = e.max_attempts,
                category = e.category.map(ErrorCategory::as_str),
                outcome = e.outcome.as_str(),
                delay_ms,
                from_hint = e.from_hint,
                backoff_ms = e.backoff.map(ms),
                total_attempts = e.total_attempts,
                reason,
                upstream_wait_ms = e.upstream_wait.map(ms),
                wait_reason = e.wait_reason.map(WaitReason::as_str),
                resumed_after = e.resumed_after,
                "{e}"
            )
        };
    }
    match level {
        Level::Debug => event!(tracing::Level::DEBUG),
        Level::Warn => event!(tracing::Level::WARN),
    }
}
