//! A hold that starts or grows on a shared upstream, as an event.

use core::fmt;
use core::time::Duration;
use std::borrow::Cow;

use crate::upstream::HoldReason;

/// An [`Upstream`](crate::upstream::Upstream) held: no attempt of any of its
/// calls starts for `held_for`. Sent once per hold that starts (at `WARN`)
/// or grows (`extended`, at `DEBUG`), never once per waiting call.
///
/// ```
/// use std::time::Duration;
/// use nika_retry::events::UpstreamEvent;
/// use nika_retry::upstream::HoldReason;
///
/// let e = UpstreamEvent::new("openai/gpt-4o", Duration::from_secs(20), HoldReason::ServerHint, false);
/// assert_eq!(e.to_string(), "upstream openai/gpt-4o held for 20s (server hint)");
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamEvent {
    /// The upstream's name.
    pub upstream: Cow<'static, str>,
    /// How long the hold runs from now.
    pub held_for: Duration,
    /// Why.
    pub reason: HoldReason,
    /// Whether a hold already in force was made longer (rather than started).
    pub extended: bool,
}

impl UpstreamEvent {
    /// An event, as an upstream sends it (for tests of an observer).
    pub fn new(
        upstream: impl Into<Cow<'static, str>>,
        held_for: Duration,
        reason: HoldReason,
        extended: bool,
    ) -> Self {
        UpstreamEvent {
            upstream: upstream.into(),
            held_for,
            reason,
            extended,
        }
    }
}

impl fmt::Display for UpstreamEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = Duration::from_millis(self.held_for.as_millis().try_into().unwrap_or(u64::MAX));
        let verb = if self.extended {
            "held longer, for"
        } else {
            "held for"
        };
        write!(
            f,
            "upstream {} {verb} {} ({})",
            self.upstream,
            humantime::format_duration(held),
            self.reason
        )
    }
}

/// Sends `event` to `tracing` and to the observers in force.
pub(crate) fn emit(event: &UpstreamEvent) {
    #[cfg(feature = "tracing")]
    {
        let held_for_ms = u64::try_from(event.held_for.as_millis()).unwrap_or(u64::MAX);
        macro_rules! event {
            ($level:expr) => {
                tracing::event!(
                    target: "nika_retry",
                    $level,
                    upstream = &*event.upstream,
                    held_for_ms,
                    reason = event.reason.as_str(),
                    extended = event.extended,
                    "{event}"
                )
            };
        }
        if event.extended {
            event!(tracing::Level::DEBUG);
        } else {
            event!(tracing::Level::WARN);
        }
    }
    super::OBSERVERS.with(|o| {
        for observer in o.borrow().iter().rev() {
            observer.on_upstream(event);
        }
    });
}
