//! [`EventLog`]: the observer that keeps what it sees, ready-made.

use core::fmt;
use core::time::Duration;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::time::Instant;

use super::{LayerViolation, Outcome, RetryEvent, RetryObserver};
use crate::engine::GiveUp;
use crate::vocab::category::ErrorCategory;

/// The engine's EventLog (ADR-019): a [`RetryObserver`] that keeps the
/// events it receives, in order, for a test to assert on or a runner to
/// print, and the [`LayerViolation`]s among them.
///
/// Clones share one log, so install a clone with
/// [`observe`](super::observe) and read the original. It is thread-safe
/// (a spawned task's loops can report to it through
/// [`task::carry`](crate::task::carry)).
///
/// **Bounded.** It keeps the last [`capacity`](EventLog::capacity) entries,
/// events and violations ([`DEFAULT_CAPACITY`](EventLog::DEFAULT_CAPACITY) with
/// [`new`](EventLog::new)): when full, a new one drops the oldest, and
/// [`dropped`](EventLog::dropped) counts those dropped, so that a long-running
/// process that forgets to [`take`](EventLog::take) holds a bounded amount.
///
/// **Printed**, it is one line per event, as `cargo run --example demo`
/// shows them: the time since the log was made, the layer, the fn, the
/// attempt of how many, the error's category, the wait before the next
/// attempt and what the loop did; a violation is a line of its own.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use nika_retry::events::{observe, EventLog, Outcome};
/// use nika_retry::{retry, Classify};
///
/// #[derive(Debug, Classify)]
/// #[category(transient)]
/// struct Reset;
///
/// struct Transport;
///
/// impl Transport {
///     #[retry(layer = "http", backoff = "250ms", jitter = 0.0)]
///     async fn post(&self, failures: &AtomicU32) -> Result<(), Reset> {
///         match failures.fetch_sub(1, Ordering::SeqCst) {
///             0 => Ok(()),
///             _ => Err(Reset),
///         }
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let log = EventLog::new();
/// observe(log.clone().into(), Transport.post(&AtomicU32::new(1))).await.unwrap();
///
/// let outcomes: Vec<Outcome> = log.events().iter().map(|e| e.outcome).collect();
/// assert_eq!(outcomes, [Outcome::Retrying, Outcome::Recovered]);
/// let lines: Vec<String> = log.to_string().lines().map(str::to_owned).collect();
/// assert_eq!(lines, [
///     "    0ms  http     Transport::post      1/3  transient    250ms                  retrying",
///     "  250ms  http     Transport::post      2/3  transient                           recovered",
/// ]);
/// # }
/// ```
#[derive(Clone)]
pub struct EventLog(Arc<Shared>);

struct Shared {
    /// What the time column counts from.
    start: Instant,
    capacity: usize,
    kept: Mutex<Kept>,
}

enum Entry {
    Event(RetryEvent),
    Violation(LayerViolation),
}

#[derive(Default)]
struct Kept {
    /// What came, with when (since `start`).
    entries: VecDeque<(Duration, Entry)>,
    dropped: u64,
}

impl EventLog {
    /// The capacity of [`EventLog::new`]: entries kept before the oldest are dropped.
    pub const DEFAULT_CAPACITY: usize = 1024;

    /// An empty log keeping the last [`DEFAULT_CAPACITY`](EventLog::DEFAULT_CAPACITY)
    /// events; its time column counts from now.
    pub fn new() -> EventLog {
        EventLog::with_capacity(EventLog::DEFAULT_CAPACITY)
    }

    /// An empty log keeping the last `capacity` entries (at least one).
    pub fn with_capacity(capacity: usize) -> EventLog {
        EventLog(Arc::new(Shared {
            start: Instant::now(),
            capacity: capacity.max(1),
            kept: Mutex::new(Kept::default()),
        }))
    }

    /// The events kept, oldest first.
    pub fn events(&self) -> Vec<RetryEvent> {
        let kept = self.kept();
        kept.entries
            .iter()
            .filter_map(|(_, e)| e.event().cloned())
            .collect()
    }

    /// The layer violations kept, oldest first.
    pub fn violations(&self) -> Vec<LayerViolation> {
        let kept = self.kept();
        kept.entries
            .iter()
            .filter_map(|(_, e)| match e {
                Entry::Violation(v) => Some(*v),
                Entry::Event(_) => None,
            })
            .collect()
    }

    /// The events kept, oldest first, emptying the log (its violations and
    /// its count of dropped entries too).
    pub fn take(&self) -> Vec<RetryEvent> {
        let taken = core::mem::take(&mut *self.kept());
        taken
            .entries
            .into_iter()
            .filter_map(|(_, e)| match e {
                Entry::Event(event) => Some(event),
                Entry::Violation(_) => None,
            })
            .collect()
    }

    /// How many entries (events and violations) it holds.
    pub fn len(&self) -> usize {
        self.kept().entries.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many entries it keeps at most.
    pub fn capacity(&self) -> usize {
        self.0.capacity
    }

    /// How many entries were dropped to stay within the capacity (the oldest ones).
    pub fn dropped(&self) -> u64 {
        self.kept().dropped
    }

    /// The state, even if an observer panicked while holding it: each
    /// change below leaves it whole.
    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.0.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog::new()
    }
}

impl EventLog {
    fn keep(&self, entry: Entry) {
        let at = self.0.start.elapsed();
        let mut kept = self.kept();
        if kept.entries.len() >= self.0.capacity {
            kept.entries.pop_front();
            kept.dropped += 1;
        }
        kept.entries.push_back((at, entry));
    }
}

impl Entry {
    fn event(&self) -> Option<&RetryEvent> {
        match self {
            Entry::Event(event) => Some(event),
            Entry::Violation(_) => None,
        }
    }
}

impl RetryObserver for EventLog {
    fn on_event(&self, event: &RetryEvent) {
        self.keep(Entry::Event(event.clone()));
    }

    fn on_layer_violation(&self, violation: &LayerViolation) {
        self.keep(Entry::Violation(*violation));
    }
}

impl From<EventLog> for Arc<dyn RetryObserver> {
    /// The log as [`observe`](super::observe) takes it; a clone, so keep
    /// one to read.
    fn from(log: EventLog) -> Self {
        Arc::new(log)
    }
}

impl fmt::Debug for EventLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kept = self.kept();
        f.debug_struct("EventLog")
            .field("entries", &kept.entries.len())
            .field("dropped", &kept.dropped)
            .field("capacity", &self.0.capacity)
            .finish()
    }
}

impl fmt::Display for EventLog {
    /// One line per entry, oldest first, each ending in a newline; a first
    /// line says how many older ones were dropped, if any.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kept = self.kept();
        if kept.dropped > 0 {
            writeln!(
                f,
                "({} earlier entries dropped: the log keeps the last {})",
                kept.dropped, self.0.capacity
            )?;
        }
        for (at, entry) in &kept.entries {
            match entry {
                Entry::Event(event) => writeln!(f, "{}", Line(*at, event))?,
                Entry::Violation(v) => writeln!(f, "{:>7}  layer violation: {v}", short(*at))?,
            }
        }
        Ok(())
    }
}

/// One event as a row of `cargo run --example demo`.
struct Line<'a>(Duration, &'a RetryEvent);

impl fmt::Display for Line<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Line(at, e) = *self;
        let wait = match (e.delay, e.backoff) {
            (Some(d), _) if e.from_hint => format!("{} (server hint)", short(d)),
            // The backoff, and the delay jitter drew from it.
            (Some(d), Some(backoff)) if backoff != d => {
                format!("{} (of {})", short(d), short(backoff))
            }
            (Some(d), _) => short(d),
            (None, _) => String::new(),
        };
        let outcome = match (e.outcome, e.reason) {
            (Outcome::Retrying | Outcome::Resuming | Outcome::Recovered, _) | (_, None) => {
                e.outcome.to_string()
            }
            (_, Some(GiveUp::MayHaveTakenEffect)) => {
                "not retried: may have taken effect, not idempotent".to_owned()
            }
            (outcome, Some(reason)) => {
                format!("{}: {reason}", outcome.as_str().replace('_', " "))
            }
        };
        // `Transport::post` for a method, `module::fn` for a free fn.
        let operation = e.short_name();
        write!(
            f,
            "{:>7}  {:<8} {:<20} {}/{}  {:<12} {:<22} {}",
            short(at),
            e.layer,
            operation,
            e.attempt,
            e.max_attempts,
            e.category.map_or("", ErrorCategory::as_str),
            wait,
            outcome
        )
    }
}

/// `713ms` below a second, `1.91s` from there.
fn short(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.2}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::category::ErrorCategory;
    use crate::vocab::layer::Layer;

    fn event(attempt: u32, outcome: Outcome) -> RetryEvent {
        RetryEvent {
            layer: Layer::Tool,
            operation: "runner::tools::run_shell",
            self_type: None,
            attempt,
            max_attempts: 3,
            category: Some(ErrorCategory::Transient),
            delay: None,
            from_hint: false,
            backoff: None,
            outcome,
            reason: None,
            since_first_failure: Duration::ZERO,
            total_attempts: attempt,
            upstream_wait: None,
            wait_reason: None,
            resumed_after: None,
        }
    }

    #[test]
    fn a_full_log_drops_the_oldest_and_counts_them() {
        let log = EventLog::with_capacity(2);
        for n in 1..=5 {
            log.on_event(&event(n, Outcome::Retrying));
        }
        let kept: Vec<u32> = log.events().iter().map(|e| e.attempt).collect();
        assert_eq!((kept, log.dropped(), log.len()), (vec![4, 5], 3, 2));
        assert!(
            log.to_string()
                .starts_with("(3 earlier entries dropped: the log keeps the last 2)\n")
        );
        // Taking empties it, the count included.
        assert_eq!(log.take().len(), 2);
        assert_eq!((log.len(), log.dropped(), log.is_empty()), (0, 0, true));
        assert_eq!(log.to_string(), "");
        assert_eq!(EventLog::with_capacity(0).capacity(), 1);
    }

    #[test]
    fn clones_share_one_log() {
        let log = EventLog::new();
        let observer: Arc<dyn RetryObserver> = log.clone().into();
        observer.on_event(&event(1, Outcome::Retrying));
        assert_eq!(log.len(), 1);
        assert_eq!(log.capacity(), EventLog::DEFAULT_CAPACITY);
    }

    #[test]
    fn each_line_says_the_wait_and_the_reason() {
        let mut hinted = event(1, Outcome::Retrying);
        hinted.delay = Some(Duration::from_millis(1500));
        hinted.from_hint = true;
        let mut jittered = event(2, Outcome::Retrying);
        jittered.delay = Some(Duration::from_millis(713));
        jittered.backoff = Some(Duration::from_secs(1));
        let mut gave_up = event(3, Outcome::GaveUp);
        gave_up.reason = Some(GiveUp::AttemptsExhausted);
        gave_up.self_type = Some("runner::tools::Shell");
        let mut not_idempotent = event(1, Outcome::GaveUp);
        not_idempotent.reason = Some(GiveUp::MayHaveTakenEffect);
        not_idempotent.self_type = Some("runner::tools::Mailer");
        let lines: Vec<String> = [hinted, jittered, gave_up, not_idempotent]
            .iter()
            .map(|e| Line(Duration::from_millis(2500), e).to_string())
            .collect();
        assert_eq!(
            lines,
            [
                "  2.50s  tool     tools::run_shell     1/3  transient    1.50s (server hint)    retrying",
                "  2.50s  tool     tools::run_shell     2/3  transient    713ms (of 1.00s)       retrying",
                "  2.50s  tool     Shell::run_shell     3/3  transient                           gave up: attempts exhausted",
                "  2.50s  tool     Mailer::run_shell    1/3  transient                           not retried: may have taken effect, not idempotent",
            ]
        );
    }
}
