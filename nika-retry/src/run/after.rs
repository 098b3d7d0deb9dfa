//! What a call does after each attempt that failed, or that succeeded in a
//! way someone counts: the cold paths of the one decision generated code
//! asks for ([`Call::next`](super::call::Call::next), `next_after` with an
//! upstream), on [`CallState`], so that they compile once for every `D`.
//! The engine gives the whole verdict ([`RetryState::decide`]); the call
//! applies it (the instant to wake at, the budget's charge, the event).
//! With `idempotent = …` the call says as it starts whether it may repeat
//! an attempt; without it, it follows the calls around it.

use core::num::NonZeroU32;
use core::time::Duration;
use std::borrow::Cow;

use tokio::time::Instant;

use super::state::CallState;
use crate::ambient::{self, AroundFailure, Budget, Idempotence};
use crate::engine::{Decision, Failure, Level, Limits, RetryState, backoff};
use crate::events::{Outcome, RetryEvent, WaitReason, observers};
use crate::metrics::End;
use crate::task;
use crate::time::{Nanos, later};
use crate::upstream::Upstream;
use crate::vocab::category::ErrorCategory;
use crate::vocab::config::RetryConfig;
use crate::vocab::layer::Layer;

impl CallState {
    /// Whether this call, having failed, may repeat an attempt that may
    /// have taken effect: what it said, or, if it said nothing, what the
    /// attempt `around` it says.
    #[inline]
    fn idempotent_now(&self, around: AroundFailure) -> bool {
        match self.idempotent {
            Idempotence::Said => true,
            Idempotence::Not => false,
            Idempotence::Unsaid => !around.not_idempotent,
        }
    }

    /// The config in force: the task scope's `retry:` (looked up only
    /// under a scope), else `config = …`, else the site's.
    fn config(
        &self,
        around: AroundFailure,
        config: &mut dyn FnMut() -> Option<RetryConfig>,
    ) -> Cow<'static, RetryConfig> {
        let scoped = || {
            around
                .scoped
                .then(|| task::retry_in_force(self.site.layer))
                .flatten()
        };
        match scoped().or_else(config) {
            Some(cfg) => Cow::Owned(cfg),
            None => Cow::Borrowed(&self.site.config),
        }
    }

    /// After a success that a token bucket counts, that took retries, or
    /// that waited at its upstream.
    #[cold]
    pub(super) fn succeeded(
        &mut self,
        self_type: Option<fn() -> &'static str>,
        waited: (Nanos, Option<WaitReason>),
    ) {
        let retried = self.attempt > 1;
        if let Some(bucket) = &self.bucket {
            RetryState::resume(self.attempt, self.bucket_taken).succeeded(bucket);
        }
        // A first attempt says so only if it waited at its upstream (DEBUG).
        let waited_first = !retried && waited_at_upstream(waited).is_some();
        if !(retried || waited_first) || !observers::listening(Level::RECOVERED) {
            return;
        }
        // As the failed attempts left it (`retried`: they set it):
        // `config = …` is not evaluated again.
        let max_attempts = self.max_attempts.map_or(self.attempt, NonZeroU32::get);
        let budget = self.budget.or_else(ambient::budget);
        let mut event = self.event(
            Instant::now(),
            self_type,
            (self.attempt, max_attempts, budget),
            self.last_category,
            Outcome::Recovered,
        );
        event.upstream_wait = waited_at_upstream(waited);
        event.wait_reason = event.upstream_wait.and(waited.1);
        observers::emit(&event, Level::RECOVERED);
    }

    #[cold]
    pub(super) fn failed(
        &mut self,
        failure: Failure,
        deadline: Option<Instant>,
        waited: (Nanos, Option<WaitReason>),
        config: &mut dyn FnMut() -> Option<RetryConfig>,
        self_type: Option<fn() -> &'static str>,
        // How the request would be sent again.
        again: Again,
    ) -> Option<Instant> {
        // One of the attempt's own limits, or a timeout in the error itself
        // (a connect limit, an inner fn's limit): the bucket charges more.
        let timed_out = core::mem::take(&mut self.timed_out) | failure.timed_out;
        // One clock read: the deadline, the start, the event, the sleep.
        let now = Instant::now();
        // A first attempt that failed at once: the call started now.
        let start = *self.start.get_or_insert(now);
        self.last_category = Some(failure.category);
        // What is around the call, in one access: the budget in force, the
        // attempt around it, whether a task policy is in force.
        let around = ambient::around_failure();
        let config = self.config(around, config);
        let max_attempts = config.attempts();
        self.max_attempts = Some(max_attempts);
        let max_attempts = max_attempts.get();
        // The budget of the outermost call: this call's, or the one in force.
        let budget = self.budget.or(around.budget);
        let limits = Limits {
            time_left: deadline.map(|at| at.saturating_duration_since(now)),
            budget_left: budget.map(|b| b.left(max_attempts)),
            // The fn's, never the config's: no task scope overrides it.
            idempotent: self.idempotent_now(around),
            bucket: self.bucket.as_ref(),
            // The site's one attempt, no task `retry:` nor `config = …` over it.
            needs_opt_in: matches!(config, Cow::Borrowed(_))
                && matches!(self.site.layer, Layer::Tool | Layer::Task),
            cannot_replay: matches!(again, Again::NotReplayable),
        };
        let attempt = self.attempt;
        let mut state = RetryState::resume(attempt, self.bucket_taken);
        let decision = state.decide(&config, failure.with_timed_out(timed_out), limits);
        (self.attempt, self.bucket_taken) = (state.attempt(), state.taken());
        let outcome = match (decision.outcome(), again) {
            (Outcome::Retrying, Again::Resumed(_)) => Outcome::Resuming,
            (outcome, _) => outcome,
        };
        let (delay, from_hint, reason, budget) = match decision {
            Decision::Retry { delay, from_hint } => (
                Some(delay),
                from_hint,
                None,
                ambient::charge(&mut self.budget),
            ),
            Decision::GiveUp(why) => (None, false, Some(why), budget),
        };
        let wake = delay.map(|delay| later(now, delay));
        match delay {
            Some(delay) => self.metrics.idle(delay),
            None => self.metrics.ended(
                Some(start),
                self.site,
                attempt,
                End::Failed(outcome, failure.category),
            ),
        }
        let level = decision.level(attempt);
        if !observers::listening(level) {
            return wake;
        }
        if self.first_failure.is_none() {
            self.first_failure = Nanos::between(start, now);
        }
        let mut event = self.event(
            now,
            self_type,
            (attempt, max_attempts, budget),
            Some(failure.category),
            outcome,
        );
        event.delay = delay;
        event.from_hint = from_hint;
        // Recomputed only for a listener: the jitter drew `delay` from it.
        event.backoff = (delay.is_some() && !from_hint).then(|| backoff(&config, attempt));
        event.reason = reason;
        event.upstream_wait = waited_at_upstream(waited);
        event.wait_reason = event.upstream_wait.and(waited.1);
        if let Again::Resumed(delivered) = again {
            event.resumed_after = Some(delivered);
        }
        observers::emit(&event, level);
        wake
    }

    /// The event of a decision after `attempt` of `max_attempts`, with the
    /// `budget` of the outermost call as the decision left it.
    fn event(
        &self,
        now: Instant,
        self_type: Option<fn() -> &'static str>,
        (attempt, max_attempts, budget): (u32, u32, Option<Budget>),
        category: Option<ErrorCategory>,
        outcome: Outcome,
    ) -> RetryEvent {
        #[cfg(test)]
        tests::event_built();
        RetryEvent {
            layer: self.site.layer,
            operation: self.site.operation,
            self_type: self_type.map(|name| name()),
            attempt,
            max_attempts,
            category,
            delay: None,
            from_hint: false,
            backoff: None,
            outcome,
            reason: None,
            since_first_failure: self
                .start
                .and_then(|start| self.first_failure.after(start))
                .map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
            total_attempts: budget.map_or(attempt, |b| b.used()),
            upstream_wait: None,
            wait_reason: None,
            resumed_after: None,
        }
    }
}

/// How a failed attempt's request would be sent again, if the engine
/// retries it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Again {
    /// As the fn or the adapter sends it.
    Sent,
    /// It cannot be: an adapter's request it could not keep.
    NotReplayable,
    /// A streamed response resumes, after this many items delivered.
    Resumed(u64),
}

/// An event's `upstream_wait`: `None` for an attempt that did not wait.
#[inline(always)]
pub(super) fn waited_at_upstream(waited: (Nanos, Option<WaitReason>)) -> Option<Duration> {
    waited.0.get().filter(|waited| !waited.is_zero())
}

/// The return type of a `#[retry]` fn: a `Result`, whose error `next`
/// reads here, in the file that decides on it.
#[diagnostic::on_unimplemented(
    message = "`#[retry]` needs a fn that returns `Result<T, E>`, not `{Self}`",
    label = "expected `Result<T, E>`"
)]
pub trait RetryResult {
    /// The error type.
    type Error;
    /// The error, if this is one.
    fn error(&self) -> Option<&Self::Error>;

    /// Whether the attempt's request can be sent again: an adapter's that
    /// it could not keep (a body it could not clone) fails for good, with
    /// [`GiveUp::NotReplayable`](crate::engine::GiveUp::NotReplayable) if
    /// it would otherwise have been retried. A fn's body always can.
    #[inline(always)]
    fn replayable(&self) -> bool {
        true
    }
}

impl<T, E> RetryResult for Result<T, E> {
    type Error = E;
    fn error(&self) -> Option<&E> {
        self.as_ref().err()
    }
}

/// The sleep between attempts, until the instant `Call::next` gave.
#[inline]
pub fn sleep(until: Instant) -> tokio::time::Sleep {
    tokio::time::sleep_until(until)
}

/// What `next` takes without `config = …`: one type for every fn, so that
/// `next` is not instantiated once per closure.
pub const NO_CONFIG: fn() -> Option<RetryConfig> = no_config;

fn no_config() -> Option<RetryConfig> {
    None
}

/// `config` as a non-generic `FnMut`, so that the cold paths are compiled once.
#[inline]
pub(super) fn lazy<C: FnOnce() -> Option<RetryConfig>>(
    config: C,
) -> impl FnMut() -> Option<RetryConfig> {
    let mut config = Some(config);
    move || config.take().and_then(|c| c())
}

/// `upstream`'s name if it was given as a `&'static str`, for the metrics
/// (an attribute that costs no allocation); none without them.
#[inline(always)]
pub(super) fn static_name(upstream: &Upstream) -> Option<&'static str> {
    #[cfg(feature = "opentelemetry")]
    return upstream.static_name();
    #[cfg(not(feature = "opentelemetry"))]
    {
        let _ = upstream;
        None
    }
}

#[cfg(test)]
mod tests {
    use core::future::Future;
    use std::sync::Mutex;

    use core::cell::Cell;
    use std::sync::atomic::{AtomicU32, Ordering};

    use crate::engine::GiveUp;
    use crate::events::{Outcome, RetryEvent, RetryObserver, observe};
    use crate::task::{TaskPolicy, scope};
    use crate::vocab::bucket::TokenBucket;
    use crate::vocab::layer::Layer;
    use crate::vocab::timeout_error::TimeoutError;
    use nika_retry_macros::{Classify, retry};

    #[derive(Debug, Classify)]
    #[category(transient, crate = "crate")]
    struct Busy;

    impl From<TimeoutError> for Busy {
        fn from(_: TimeoutError) -> Self {
            Busy
        }
    }

    #[retry(layer = "provider", backoff = "1ms", crate = "crate")]
    async fn busy() -> Result<(), Busy> {
        Err(Busy)
    }

    std::thread_local! {
        static EVENTS_BUILT: Cell<u64> = const { Cell::new(0) };
    }

    /// Counts one `RetryEvent` built on this thread (only ever on the path
    /// that goes on to emit it).
    pub(super) fn event_built() {
        EVENTS_BUILT.with(|n| n.set(n.get() + 1));
    }

    /// Events the retry loops built during `fut` (on this thread: the
    /// runtime of these tests is current-thread).
    async fn built_during<F: Future>(fut: F) -> u64 {
        let before = EVENTS_BUILT.with(Cell::get);
        fut.await;
        EVENTS_BUILT.with(Cell::get) - before
    }

    /// Of every three attempts, the first two fail.
    static ATTEMPTS: AtomicU32 = AtomicU32::new(0);

    #[retry(layer = "provider", backoff = "1ms", crate = "crate")]
    async fn recovers() -> Result<u32, Busy> {
        if ATTEMPTS.fetch_add(1, Ordering::SeqCst) % 3 < 2 {
            Err(Busy)
        } else {
            Ok(4)
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn events_are_built_only_for_someone_listening() {
        // Two retries and a recovery: three decisions a call.
        assert_eq!(built_during(recovers()).await, 0, "nobody listens");

        let log = std::sync::Arc::new(Log::default());
        assert_eq!(built_during(observe(log.clone(), recovers())).await, 3);
        assert_eq!(log.0.lock().unwrap().len(), 3);

        #[cfg(feature = "tracing")]
        {
            let subscriber = |level| {
                tracing_subscriber::fmt()
                    .with_max_level(level)
                    .with_writer(std::io::sink)
                    .finish()
            };
            // A subscriber that filters the target out does not listen either.
            let guard = tracing::subscriber::set_default(subscriber(tracing::Level::ERROR));
            assert_eq!(built_during(recovers()).await, 0, "filtered out");
            drop(guard);
            // At WARN it hears the retries, not the recovery (DEBUG).
            let _guard = tracing::subscriber::set_default(subscriber(tracing::Level::WARN));
            assert_eq!(built_during(recovers()).await, 2, "retries at WARN");
        }
    }

    #[derive(Default)]
    struct Log(Mutex<Vec<RetryEvent>>);

    impl RetryObserver for Log {
        fn on_event(&self, event: &RetryEvent) {
            self.0.lock().unwrap().push(event.clone());
        }
    }

    /// The one event of a call of `busy` under `policy`.
    async fn only_event(policy: TaskPolicy) -> RetryEvent {
        let log = std::sync::Arc::new(Log::default());
        assert!(observe(log.clone(), scope(policy, busy())).await.is_err());
        let mut events = log.0.lock().unwrap().split_off(0);
        assert_eq!(events.len(), 1, "{events:?}");
        events.remove(0)
    }

    #[tokio::test(start_paused = true)]
    async fn an_empty_token_bucket_is_told_apart_from_a_spent_attempt_budget() {
        // A bucket that cannot pay for one retry, with the attempt budget untouched.
        let bucket = TokenBucket::new(4).with_retry_cost(5);
        let policy = TaskPolicy::new().with_token_bucket(Layer::Provider, bucket);
        let empty = only_event(policy).await;
        assert_eq!(empty.outcome, Outcome::BudgetExhausted);
        assert_eq!(empty.reason, Some(GiveUp::TokenBucketEmpty));
        assert!(
            empty.to_string().ends_with(" (retry token bucket empty)"),
            "{empty}"
        );

        // An attempt budget of one attempt, with no bucket.
        let spent = only_event(TaskPolicy::new().with_budget(1)).await;
        assert_eq!(spent.outcome, Outcome::BudgetExhausted);
        assert_eq!(spent.reason, Some(GiveUp::BudgetExhausted));
        assert!(
            spent.to_string().ends_with(" (attempt budget exhausted)"),
            "{spent}"
        );
    }
}
