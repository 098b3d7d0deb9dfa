//! The state of one call of an annotated fn, and the futures of its attempts.

use core::cell::Cell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::borrow::Cow;
use std::sync::Arc;

use tokio::time::Instant;

use super::{FromTimeout, RetryResult, Site, Timeouts};
use crate::connect::{self, ConnectLimit};
use crate::context::{BUDGET, Budget, Installed, install};
use crate::engine::{Decision, Failure, GiveUp, Limits, RetryState, backoff};
use crate::events::{self, Outcome, RetryEvent};
use crate::task;
use crate::timer::{Deadline, Progress, from_now};
use crate::{Boundary, Classify, ErrorCategory, RetryConfig, TimeoutError, TokenBucket};

/// One call of an annotated fn: its retry state, its deadline, and its
/// place among the retry loops around it.
///
/// Kept small, since it lives in the fn's future: the config is the site's
/// `const` unless a task scope or `config = …` replaces it, and those are
/// only looked up when an attempt fails; per-attempt limits are passed to
/// each attempt rather than stored.
#[derive(Debug)]
pub struct Call {
    site: &'static Site,
    state: RetryState,
    /// The total deadline, and the limit it came from (for the error).
    deadline: Option<(Instant, Duration)>,
    /// `Some` for the outermost retried call, which owns the shared budget.
    budget: Option<Budget>,
    bucket: Option<TokenBucket>,
    first_failure: Option<Instant>,
    last_category: ErrorCategory,
    /// Tells the attempts' own wake-ups from others', for `read`: allocated
    /// once an attempt with a `read` limit has gone pending.
    progress: Option<Arc<Progress>>,
}

impl Call {
    /// A call of `site`, bounded in all by `total` if given.
    #[inline(always)]
    pub fn new(site: &'static Site, total: Option<Duration>) -> Call {
        let (budget_total, bucket) = match task::budget_in_force(site.layer) {
            Some((budget, bucket)) => (budget, bucket),
            None => (task::DEFAULT_BUDGET, None),
        };
        let nested = BUDGET.with(Cell::get).is_some();
        Call {
            site,
            state: RetryState::new(),
            deadline: total.map(|limit| (from_now(limit), limit)),
            budget: (!nested).then_some(Budget::new(budget_total, 1)),
            bucket,
            first_failure: None,
            last_category: ErrorCategory::Transient,
            progress: None,
        }
    }

    /// Runs one attempt.
    #[inline]
    pub fn attempt<F: Future>(&mut self, fut: F) -> Attempt<'_, F> {
        Attempt {
            fut,
            budget: &mut self.budget,
        }
    }

    /// Runs one attempt under `limits` and the call's total deadline.
    #[inline]
    pub fn timed<F, T, E>(&mut self, limits: Timeouts, fut: F) -> Timed<'_, F, E>
    where
        F: Future<Output = Result<T, E>>,
        E: FromTimeout,
    {
        Timed {
            inner: Deadline::new(fut, self.site.layer)
                .after(limits.attempt, Boundary::Attempt)
                .inactive(limits.read),
            connect: ConnectLimit::new(limits.connect, self.site.layer),
            call: self,
            into_error: E::from_timeout,
        }
    }

    /// After an attempt: the delay before the next one, or `None` to return
    /// `result`. `config` is the attribute's `config = …`, evaluated only if
    /// the attempt failed; `self_type` names the impl's type of a method, for
    /// the events.
    #[inline]
    pub fn next<R, C>(
        &mut self,
        result: &R,
        config: C,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Duration>
    where
        R: RetryResult,
        R::Error: Classify,
        C: FnOnce() -> Option<RetryConfig>,
    {
        match result.error() {
            None => {
                if self.state.attempt() > 1 {
                    self.succeeded_after_retries(&mut lazy(config), self_type);
                } else if let Some(bucket) = &self.bucket {
                    bucket.refill();
                }
                None
            }
            Some(error) => self.failed(Failure::of(error), &mut lazy(config), self_type),
        }
    }

    /// The config in force: the task scope's `retry:`, else `config = …`, else the site's.
    fn config(&self, config: &mut dyn FnMut() -> Option<RetryConfig>) -> Cow<'static, RetryConfig> {
        match task::retry_in_force(self.site.layer).or_else(config) {
            Some(cfg) => Cow::Owned(cfg),
            None => Cow::Borrowed(&self.site.config),
        }
    }

    #[cold]
    fn succeeded_after_retries(
        &mut self,
        config: &mut dyn FnMut() -> Option<RetryConfig>,
        self_type: Option<fn() -> &'static str>,
    ) {
        if let Some(bucket) = &self.bucket {
            bucket.refill();
        }
        if !events::listening(Outcome::Recovered) {
            return;
        }
        let max_attempts = self.config(config).effective_attempts();
        let event = self.event(
            Instant::now(),
            self_type,
            self.state.attempt(),
            max_attempts,
            self.last_category,
            Outcome::Recovered,
        );
        events::emit(&event);
    }

    #[cold]
    fn failed(
        &mut self,
        failure: Failure,
        config: &mut dyn FnMut() -> Option<RetryConfig>,
        self_type: Option<fn() -> &'static str>,
    ) -> Option<Duration> {
        let listening = events::listening(Outcome::Retrying);
        let now = (listening || self.deadline.is_some()).then(Instant::now);
        if let Some(now) = now {
            self.first_failure.get_or_insert(now);
        }
        self.last_category = failure.category;
        let budget = self.budget.or_else(|| BUDGET.with(Cell::get));
        let limits = Limits {
            time_left: self
                .deadline
                .zip(now)
                .map(|((at, _), now)| at.saturating_duration_since(now)),
            budget_left: budget.map(Budget::left),
        };
        let attempt = self.state.attempt();
        let config = self.config(config);
        let mut decision = self.state.decide(&config, failure, limits);
        if matches!(decision, Decision::Retry { .. })
            && self.bucket.as_ref().is_some_and(|b| !b.try_acquire())
        {
            decision = Decision::GiveUp(GiveUp::TokenBucketEmpty);
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
        let Some(now) = now.filter(|_| listening) else {
            return delay;
        };
        let mut event = self.event(
            now,
            self_type,
            attempt,
            config.effective_attempts(),
            failure.category,
            outcome,
        );
        event.delay = delay;
        event.from_hint = from_hint;
        // Recomputed only for a listener: the jitter drew `delay` from it.
        event.backoff = (delay.is_some() && !from_hint).then(|| backoff(&config, attempt));
        event.reason = reason;
        events::emit(&event);
        delay
    }

    /// Counts one retry against the budget of the outermost call.
    fn take_from_budget(&mut self) {
        match &mut self.budget {
            Some(own) => *own = own.took_one(),
            None => BUDGET.with(|b| {
                if let Some(mut shared) = b.get() {
                    shared = shared.took_one();
                    b.set(Some(shared));
                }
            }),
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
        super::probe::event_built();
        let budget = self.budget.or_else(|| BUDGET.with(Cell::get));
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
                .first_failure
                .map_or(Duration::ZERO, |t| now.saturating_duration_since(t)),
            total_attempts: budget.map_or(attempt, |b| b.used()),
        }
    }
}

/// The sleep between attempts.
#[inline]
pub fn sleep(delay: Duration) -> tokio::time::Sleep {
    tokio::time::sleep(delay)
}

pin_project_lite::pin_project! {
    /// One attempt, polled with the call's context installed.
    pub struct Attempt<'a, F> {
        #[pin]
        fut: F,
        budget: &'a mut Option<Budget>,
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

/// Installs the outermost call's budget (`Some` only there) for one poll of
/// its attempt; the guard takes it back, updated by the nested loops.
#[inline]
fn install_budget(budget: &mut Option<Budget>) -> Option<Installed<'_, Option<Budget>>> {
    let value = (*budget)?;
    Some(install(&BUDGET, Some(value), Some(budget)))
}

impl<F: Future> Future for Attempt<'_, F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _budget = install_budget(this.budget);
        this.fut.poll(cx)
    }
}

pin_project_lite::pin_project! {
    /// One attempt under its time limits; an expiry becomes the fn's error.
    pub struct Timed<'a, F, E> {
        #[pin]
        inner: Deadline<F>,
        connect: Option<ConnectLimit>,
        // For its total deadline and its budget.
        call: &'a mut Call,
        // A fn pointer rather than an `E: FromTimeout` bound here, so that a
        // missing `From<TimeoutError>` is reported once, at `timed`.
        into_error: fn(TimeoutError) -> E,
    }
}

impl<F, T, E> Future for Timed<'_, F, E>
where
    F: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let inner = this.inner;
        let deadline = this.call.deadline;
        let _budget = install_budget(&mut this.call.budget);
        let connect = connect::install_limit(this.connect);
        let polled = inner.poll_until(cx, deadline, &mut this.call.progress);
        drop(connect);
        if polled.is_ready() {
            connect::attempt_ended(*this.connect, this.call.site.operation);
        }
        let into_error = *this.into_error;
        polled.map(|out| out.unwrap_or_else(|e| Err(into_error(e))))
    }
}
