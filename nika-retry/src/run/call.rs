//! The state of one call of an annotated fn, and the futures of its attempts.

use core::future::Future;
use core::num::NonZeroU32;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::borrow::Cow;

use tokio::time::Instant;

use super::bounds::RetryResult;
use super::site::Site;
use super::upstream::Waited;
use super::violation;
use crate::ambient::exchange::{self, Outer};
use crate::ambient::{AttemptSlot, Budget, Frame, StreamFrame, Swap};
use crate::engine::{Decision, Failure, GiveUp, Limits, RetryState, backoff};
use crate::events::{self, Outcome, RetryEvent};
use crate::key::IdempotencyKey;
use crate::task;
use crate::time::{Nanos, Total, later};
use crate::{Classify, ErrorCategory, Layer, RetryConfig, TokenBucket};

/// One call of a `#[retry]` fn: its attempt, and its place among the retry
/// loops around it.
///
/// Kept small, since it lives in the fn's future: the config is the site's
/// `const` unless a task scope or `config = …` replaces it, and those are
/// only looked up when an attempt fails; per-attempt limits are passed to
/// each attempt rather than stored, and what only `#[timeout]` needs is in
/// [`TimedCall`](super::TimedCall). Jitter is drawn from the thread's generator, so the call
/// holds no generator of its own. What the loops around it say (the
/// shared budget, a task scope) is read on the first poll of the first
/// attempt, in the same exchange that puts the call's own context in force.
#[derive(Debug)]
pub struct Call {
    pub(super) site: &'static Site,
    /// The 1-based number of the attempt running (or just ended).
    attempt: u32,
    /// `Some` for the outermost retried call, which owns the shared budget.
    budget: Option<Budget>,
    bucket: Option<TokenBucket>,
    /// What the last retry took from the bucket, given back if it succeeds.
    bucket_taken: u32,
    /// The attempts the loop allows as far as known: `None` until the first
    /// poll reads what the scope around it says ([`Call::resolve`]).
    max_attempts: Option<NonZeroU32>,
    /// Whether the last attempt failed on one of the call's own time limits.
    pub(super) timed_out: bool,
    /// Whether an attempt may be repeated whatever it reached
    /// (`idempotent = …`, said after each failed attempt; `true` without it).
    pub(super) idempotent: bool,
    key: IdempotencyKey,
    /// When the first failure was, after `start` (which it implies).
    first_failure: Nanos,
    last_category: ErrorCategory,
    /// When the call started, for a stream its attempts await
    /// ([`stream`](crate::stream)) and for the events: set when the first
    /// attempt first goes pending or when an attempt fails, so it is `None`
    /// only during the first poll of the first attempt, when "now" is the
    /// start. A first attempt ready at once never reads the clock for it.
    start: Option<Instant>,
    /// A stream in the body asked for the call's frame: from then on every
    /// poll of an attempt puts it in force. A call that awaits no stream
    /// never pays for one.
    pub(super) streams: bool,
}

impl Call {
    /// A call of `site`.
    #[inline(always)]
    pub fn new(site: &'static Site) -> Call {
        Call {
            site,
            attempt: 1,
            budget: None,
            bucket: None,
            bucket_taken: 0,
            max_attempts: None,
            timed_out: false,
            idempotent: true,
            key: IdempotencyKey::UNDRAWN,
            first_failure: Nanos::NONE,
            last_category: ErrorCategory::Transient,
            start: None,
            streams: false,
        }
    }

    /// A call of `site` whose fn returns a stream it awaited with
    /// [`started`](crate::stream::started) (its return type names
    /// `Started`): its frame is in force from the first poll, so the stream
    /// finds it at once rather than asking for it and waiting a poll.
    #[inline(always)]
    pub fn streamed(site: &'static Site) -> Call {
        Call {
            streams: true,
            ..Call::new(site)
        }
    }

    /// Runs one attempt.
    #[inline]
    pub fn attempt<F: Future>(&mut self, fut: F) -> Attempt<'_, F> {
        Attempt { fut, call: self }
    }

    /// Puts the call's attempt in force for one poll, until the guard drops
    /// (a panic included). Inlined into the poll, always: a guard returned
    /// from a call comes back through memory, and reading it stalls the
    /// CPU's store forwarding on every call. `framed`: the call's stream
    /// frame is in force too ([`frame`](Call::frame)).
    #[inline(always)]
    pub(super) fn enter(&mut self, framed: bool) -> Entered<'_> {
        let max_attempts = match self.max_attempts {
            Some(resolved) => resolved,
            None => self.resolve(),
        };
        let mut slot = AttemptSlot::new(
            self.site.layer,
            self.attempt,
            max_attempts.get(),
            self.key != IdempotencyKey::UNDRAWN,
        );
        if framed {
            slot = slot.with_stream();
        }
        let outer = exchange::install(self.budget, slot, &mut self.key);
        Entered { call: self, outer }
    }

    /// The call's frame for the streams its attempt awaits, with the
    /// attempt's `read` limit and the call's `total` deadline: put in force
    /// for its polls once a stream has asked for it.
    #[cold]
    #[inline(never)]
    pub(super) fn frame(
        &self,
        read: Option<Duration>,
        total: Option<Total>,
    ) -> Option<StreamFrame> {
        Some(StreamFrame {
            start: self.start,
            read,
            total,
            layer: self.site.layer,
        })
    }

    /// An attempt went pending: if it is the call's first to, the call
    /// started then.
    #[inline(always)]
    pub(super) fn went_pending(&mut self) {
        if self.start.is_none() {
            self.start_now();
        }
    }

    #[cold]
    #[inline(never)]
    fn start_now(&mut self) {
        self.start = Some(Instant::now());
    }

    /// What the loops and the scope around the call say about it, read once,
    /// on its first poll: the budget it owns if it is the outermost retried
    /// call (the task's, which always holds, or the default), its layer's
    /// token bucket, and the attempts it allows (the task's `retry:` over
    /// the site's).
    #[inline(always)]
    fn resolve(&mut self) -> NonZeroU32 {
        let (scoped, nested, breaks) = exchange::around(self.site.layer);
        if scoped {
            return self.resolve_in_scope(nested, breaks);
        }
        if !nested {
            self.budget = Some(Budget::new(task::DEFAULT_BUDGET, 1));
        } else if breaks {
            // Only a nested call that breaks the rule leaves this path (ADR-006).
            violation::check(self.site);
        }
        *self.max_attempts.insert(self.site.config.attempts())
    }

    /// [`resolve`](Call::resolve) under a task policy.
    #[cold]
    #[inline(never)]
    fn resolve_in_scope(&mut self, nested: bool, breaks: bool) -> NonZeroU32 {
        let scope = task::in_force(self.site.layer);
        if !nested {
            self.budget = Some(match scope.budget {
                Some(total) => Budget::explicit(total, 1),
                None => Budget::new(task::DEFAULT_BUDGET, 1),
            });
        } else if breaks {
            violation::check(self.site);
        }
        self.bucket = scope.bucket;
        *self.max_attempts.insert(
            scope
                .max_attempts
                .unwrap_or_else(|| self.site.config.attempts()),
        )
    }

    /// After an attempt: when to start the next one (the backoff from now),
    /// or `None` to return `result`; an instant rather than the delay, so
    /// that the clock read that timed the failure serves the sleep too.
    /// `config` is the attribute's `config = …`, evaluated only if the
    /// attempt failed; `self_type` names the impl's type of a method, for
    /// the events.
    #[inline(always)]
    pub fn next<R, C>(
        &mut self,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Instant>
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        self.next_within(None, Waited::NONE, result, config, self_type)
            .0
    }

    /// [`next`](Call::next), for a call bounded by `deadline`, that waited
    /// `waited` at its upstream (none: it did not); with the failure it
    /// classified, for the upstream to read rather than classify again
    /// (the callers that drop it pay a copy: BENCHMARKS.md, "The kernel's
    /// last moves").
    #[inline(always)]
    pub(super) fn next_within<R, C>(
        &mut self,
        deadline: Option<Total>,
        waited: Waited,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
    ) -> (Option<Instant>, Option<Failure>)
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        match result.error() {
            // A first attempt that succeeds, outside any token bucket: done.
            None if self.attempt == 1 && self.bucket.is_none() && waited.span.is_none() => {
                (None, None)
            }
            None => {
                self.succeeded(self_type, waited);
                (None, None)
            }
            Some(error) => {
                let failure = Failure::of(error);
                let next = self.failed(failure, deadline, waited, &mut lazy(config), self_type);
                (next, Some(failure))
            }
        }
    }

    /// The config in force: the task scope's `retry:`, else `config = …`, else the site's.
    fn config(&self, config: &mut dyn FnMut() -> Option<RetryConfig>) -> Cow<'static, RetryConfig> {
        match task::retry_in_force(self.site.layer).or_else(config) {
            Some(cfg) => Cow::Owned(cfg),
            None => Cow::Borrowed(&self.site.config),
        }
    }

    /// After a success that a token bucket counts, or that took retries.
    #[cold]
    fn succeeded(&mut self, self_type: Option<fn() -> &'static str>, waited: Waited) {
        let retried = self.attempt > 1;
        match &self.bucket {
            Some(bucket) if retried => bucket.release(self.bucket_taken),
            Some(bucket) => bucket.refill(),
            None => {}
        }
        // A first attempt says so only if it waited at its upstream (DEBUG).
        let waited_first = !retried && waited_at_upstream(waited).is_some();
        if !(retried || waited_first)
            || !events::listening(events::level(Outcome::Recovered, self.attempt, None))
        {
            return;
        }
        // As the failed attempts left it (`retried`: they set it):
        // `config = …` is not evaluated again.
        let max_attempts = self.max_attempts.map_or(self.attempt, NonZeroU32::get);
        let mut event = self.event(
            Instant::now(),
            self_type,
            self.attempt,
            max_attempts,
            self.last_category,
            Outcome::Recovered,
        );
        event.upstream_wait = waited_at_upstream(waited);
        event.wait_reason = event.upstream_wait.and(waited.reason);
        events::emit(&event);
    }

    #[cold]
    fn failed(
        &mut self,
        failure: Failure,
        deadline: Option<Total>,
        waited: Waited,
        config: &mut dyn FnMut() -> Option<RetryConfig>,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Instant> {
        // One of the attempt's own limits, or a timeout in the error itself
        // (a connect limit, an inner fn's limit): the bucket charges more.
        let timed_out = core::mem::take(&mut self.timed_out) | failure.timed_out;
        // One clock read: the deadline, the start, the event, the sleep.
        let now = Instant::now();
        // A first attempt that failed at once: the call started now.
        let start = *self.start.get_or_insert(now);
        self.last_category = failure.category;
        let config = self.config(config);
        let max_attempts = config.attempts();
        self.max_attempts = Some(max_attempts);
        let max_attempts = max_attempts.get();
        let budget = self.budget_in_force();
        let limits = Limits {
            time_left: deadline.map(|total| total.at.saturating_duration_since(now)),
            budget_left: budget.map(|b| b.left(max_attempts)),
            // The fn's, never the config's: no task scope overrides it.
            idempotent: self.idempotent,
        };
        let attempt = self.attempt;
        let mut state = RetryState::at(attempt);
        let mut decision = state.decide(&config, failure, limits);
        self.attempt = state.attempt();
        if matches!(decision, Decision::Retry { .. }) {
            match self.bucket.as_ref().map(|b| b.acquire(timed_out)) {
                Some(None) => decision = Decision::GiveUp(GiveUp::TokenBucketEmpty),
                Some(Some(taken)) => self.bucket_taken = taken,
                None => {}
            }
        }
        if decision == Decision::GiveUp(GiveUp::AttemptsExhausted)
            && max_attempts == 1
            && matches!(config, Cow::Borrowed(_))
            && matches!(self.site.layer, Layer::Tool | Layer::Task)
        {
            // The site's one attempt, no task `retry:` nor `config = …` over it.
            decision = Decision::GiveUp(GiveUp::NotOptedIn);
        }
        let (outcome, delay, from_hint, reason) = match decision {
            Decision::Retry { delay, from_hint } => {
                self.take_from_budget();
                (Outcome::Retrying, Some(delay), from_hint, None)
            }
            Decision::GiveUp(why @ (GiveUp::BudgetExhausted | GiveUp::TokenBucketEmpty)) => {
                (Outcome::BudgetExhausted, None, false, Some(why))
            }
            Decision::GiveUp(why) => (Outcome::GaveUp, None, false, Some(why)),
        };
        let wake = delay.map(|delay| later(now, delay));
        if !events::listening(events::level(outcome, attempt, reason)) {
            return wake;
        }
        if self.first_failure.is_none() {
            self.first_failure = Nanos::between(start, now);
        }
        let mut event = self.event(
            now,
            self_type,
            attempt,
            max_attempts,
            failure.category,
            outcome,
        );
        event.delay = delay;
        event.from_hint = from_hint;
        // Recomputed only for a listener: the jitter drew `delay` from it.
        event.backoff = (delay.is_some() && !from_hint).then(|| backoff(&config, attempt));
        event.reason = reason;
        event.upstream_wait = waited_at_upstream(waited);
        event.wait_reason = event.upstream_wait.and(waited.reason);
        events::emit(&event);
        wake
    }

    /// The budget of the outermost call: this call's, or the one in force.
    fn budget_in_force(&self) -> Option<Budget> {
        self.budget.or_else(exchange::budget)
    }

    /// Counts one retry against the budget of the outermost call.
    fn take_from_budget(&mut self) {
        match &mut self.budget {
            Some(own) => *own = own.took_one(),
            None => exchange::take_from_budget(),
        }
    }

    fn event(
        &self,
        now: Instant,
        self_type: Option<fn() -> &'static str>,
        attempt: u32,
        max_attempts: u32,
        category: ErrorCategory,
        outcome: Outcome,
    ) -> RetryEvent {
        #[cfg(test)]
        tests::event_built();
        let budget = self.budget_in_force();
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
        }
    }
}

/// One poll of an attempt with its call's attempt in force: puts the outer
/// one back when dropped.
pub(super) struct Entered<'a> {
    pub(super) call: &'a mut Call,
    outer: Outer,
}

impl Drop for Entered<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let call = &mut *self.call;
        let owns_budget = call.budget.is_some();
        // The site by reference: read only if the poll has violations to report.
        let budget = exchange::restore(
            self.outer,
            &mut call.key,
            owns_budget,
            &mut call.streams,
            &call.site,
            |site, layer, count| violation::report(layer, site.operation, count),
        );
        if budget.is_some() {
            call.budget = budget;
        }
    }
}

/// An event's `upstream_wait`: `None` for an attempt that did not wait.
fn waited_at_upstream(waited: Waited) -> Option<Duration> {
    waited.span.get().filter(|waited| !waited.is_zero())
}

/// The sleep between attempts, until the instant [`Call::next`] gave.
#[inline]
pub fn sleep(until: Instant) -> tokio::time::Sleep {
    tokio::time::sleep_until(until)
}

pin_project_lite::pin_project! {
    /// One attempt, polled with the call's context in force.
    pub struct Attempt<'a, F> {
        #[pin]
        fut: F,
        call: &'a mut Call,
    }
}

/// What `next` takes without `config = …`: one type for every fn, so that
/// `next` is not instantiated once per closure.
pub const NO_CONFIG: fn() -> Option<RetryConfig> = no_config;

fn no_config() -> Option<RetryConfig> {
    None
}

/// `config` as a non-generic `FnMut`, so that the cold paths are compiled once.
#[inline]
fn lazy<C: FnOnce() -> Option<RetryConfig>>(config: C) -> impl FnMut() -> Option<RetryConfig> {
    let mut config = Some(config);
    move || config.take().and_then(|c| c())
}

impl<F: Future> Future for Attempt<'_, F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let call = this.call;
        let polled = if call.streams {
            poll_framed(call, this.fut, cx)
        } else {
            let _entered = call.enter(false);
            this.fut.poll(cx)
        };
        if polled.is_pending() {
            call.went_pending();
        }
        polled
    }
}

/// A poll of an attempt whose call has its stream frame in force too: out
/// of line, so that the polls of the calls that await no stream keep their
/// registers.
#[cold]
#[inline(never)]
fn poll_framed<F: Future>(
    call: &mut Call,
    fut: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Poll<F::Output> {
    let mut frame = call.frame(None, None);
    let _frame = Swap::<Frame>::new(&mut frame);
    let _entered = call.enter(true);
    fut.poll(cx)
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
    use crate::{Classify, Layer, TimeoutError, TokenBucket, retry};

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
