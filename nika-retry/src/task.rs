//! The task scope: a workflow task's `retry:` and `timeout:` in force for
//! everything the task runs.
//!
//! Inside [`scope`], the task's `retry:` replaces the provider layer's policy
//! and is the only thing that turns tool- and task-layer retries on; it never
//! touches the http layer, which is set per request (ADR-019). The scope also
//! sets the task's `timeout:` and the attempt budget that nested retry loops
//! share: by default 9 (the ADR's 3 × 3), raised for a loop that allows
//! more attempts by itself, so that it only ever stops loops from
//! multiplying; a `budget:` the task sets always holds.
//!
//! ```
//! use nika_retry::task::{scope, TaskPolicy};
//! use nika_retry::{retry, Classify, Layer, RetryConfig, TimeoutError};
//!
//! #[derive(Debug, thiserror::Error, Classify)]
//! enum ToolError {
//!     #[error("tool busy")]
//!     #[category(transient)]
//!     Busy,
//!     #[error(transparent)]
//!     #[category(transparent)]
//!     Timeout(#[from] TimeoutError),
//! }
//!
//! #[retry(layer = "tool")]
//! async fn run_tool(tries: &std::sync::atomic::AtomicU32) -> Result<u32, ToolError> {
//!     let n = tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
//!     if n < 3 { Err(ToolError::Busy) } else { Ok(n) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tries = std::sync::atomic::AtomicU32::new(0);
//! // Alone, a tool fn makes one attempt.
//! assert!(run_tool(&tries).await.is_err());
//!
//! // The task opts in with its retry: block.
//! let retry = RetryConfig::for_layer(Layer::Task).with_max_attempts(3)?;
//! let tries = std::sync::atomic::AtomicU32::new(0);
//! let n = scope(TaskPolicy::new().with_retry(retry), run_tool(&tries)).await?;
//! assert_eq!(n, 3);
//! # Ok(())
//! # }
//! ```
//!
//! # Across `tokio::spawn`
//!
//! The scope is carried by the future it wraps, so it follows that future
//! across `.await`s and worker threads, but a task started with
//! `tokio::spawn` inside it starts without one. Wrap what you spawn in
//! [`carry`] to keep the task's policy and observers; the spawned work gets
//! its own attempt budget.

use core::cell::RefCell;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::sync::Arc;

use crate::context::{self, Scoped};
use crate::events::{self, RetryObserver};
use crate::time_limits::{TimeLimited, Total};
use crate::{Layer, RetryConfig, TimeoutError, TokenBucket};

/// The attempt budget nested retry loops share by default: ADR-019's 3 × 3
/// (it accepts http retried 3 times under a provider retried 3 times).
pub const DEFAULT_BUDGET: u32 = 9;

/// What a workflow task says about retries and time.
///
/// Deserialises (feature `serde`) from the task's YAML mapping, reading its
/// optional `retry:`, `timeout:` and `budget:` keys and ignoring the task's
/// other keys (so it can be `#[serde(flatten)]`ed into a task type, though
/// flattening loses a bad value's key path and position in the error: parse
/// `TaskPolicy` on its own from the same text to keep them); the `retry:`
/// block itself rejects unknown keys:
///
/// ```yaml
/// retry: { max_attempts: 3, delay_ms: 500, backoff: exponential }
/// timeout: 30s
/// ```
///
/// Every key is described in the workflow YAML reference
/// (`docs/workflow-yaml.md`); feature `schema` generates its JSON Schema
/// (`nika_retry::schema::task_policy()`).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Deserialize, serde::Serialize))]
#[cfg_attr(
    feature = "schema",
    derive(schemars::JsonSchema),
    schemars(
        description = "A workflow task's retry:, timeout: and budget: keys (docs/workflow-yaml.md); the task's other keys are not checked here."
    )
)]
pub struct TaskPolicy {
    /// The task's `retry:` block: replaces the provider, tool and task layers' policies.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            description = "The task's retry policy, for the provider, tool and task layers (never http): max_attempts, delay_ms, backoff, jitter, max_delay_ms, retry_on, max_retry_after_ms."
        )
    )]
    pub retry: Option<RetryConfig>,
    /// The task's `timeout:`: bounds the whole scope.
    #[cfg_attr(
        feature = "serde",
        serde(
            default,
            with = "crate::serde_impl::opt_duration",
            skip_serializing_if = "Option::is_none"
        )
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            schema_with = "crate::schema::timeout",
            description = "How long the whole task may take, retries and sleeps included, at every layer: a duration with a unit, such as 30s, 2m or 1h 30m."
        )
    )]
    pub timeout: Option<Duration>,
    /// Attempts the nested retry loops of one outermost call may make in
    /// all, which always holds; `None`, the default, allows
    /// [`DEFAULT_BUDGET`] (9), or the `max_attempts` of a loop that allows
    /// more by itself (a lone `attempts = 10` makes 10 attempts).
    #[cfg_attr(
        feature = "serde",
        serde(
            default,
            deserialize_with = "crate::serde_impl::budget",
            skip_serializing_if = "Option::is_none"
        )
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            schema_with = "crate::schema::budget",
            description = "Attempts the nested retry loops of one outermost call may make in all, every layer counted, http included; a budget set here always holds. Without it: 9, raised to a loop's own max_attempts."
        )
    )]
    pub budget: Option<u32>,
    #[cfg_attr(feature = "serde", serde(skip))]
    buckets: [Option<TokenBucket>; Layer::ALL.len()],
}

impl Default for TaskPolicy {
    fn default() -> Self {
        TaskPolicy::new()
    }
}

impl TaskPolicy {
    /// No `retry:`, no `timeout:`, the default budget.
    pub const fn new() -> TaskPolicy {
        TaskPolicy {
            retry: None,
            timeout: None,
            budget: None,
            buckets: [const { None }; Layer::ALL.len()],
        }
    }

    /// Sets the task's `retry:` policy.
    #[must_use]
    pub fn with_retry(mut self, retry: RetryConfig) -> TaskPolicy {
        self.retry = Some(retry);
        self
    }

    /// Sets the task's `timeout:`.
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> TaskPolicy {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the attempt budget of the nested retry loops (at least 1): the
    /// attempts of one outermost call in all, whatever the loops allow.
    #[must_use]
    pub fn with_budget(mut self, budget: u32) -> TaskPolicy {
        self.budget = Some(budget.max(1));
        self
    }

    /// Shares `bucket` among every call of `layer` in the scope.
    #[must_use]
    pub fn with_token_bucket(mut self, layer: Layer, bucket: TokenBucket) -> TaskPolicy {
        self.buckets[layer as usize] = Some(bucket);
        self
    }

    /// The token bucket of `layer`, if one is set.
    pub fn token_bucket(&self, layer: Layer) -> Option<&TokenBucket> {
        self.buckets[layer as usize].as_ref()
    }
}

std::thread_local! {
    static POLICY: RefCell<Option<TaskPolicy>> = const { RefCell::new(None) };
}

/// What the task policy in force says to a call of one layer.
pub(crate) struct ScopeForLayer {
    /// The budget the task set, if it did.
    pub(crate) budget: Option<u32>,
    /// The token bucket of the layer.
    pub(crate) bucket: Option<TokenBucket>,
    /// The `max_attempts` of the task's `retry:`, if it applies to the layer.
    pub(crate) max_attempts: Option<u32>,
}

impl ScopeForLayer {
    /// No task policy.
    pub(crate) const NONE: ScopeForLayer = ScopeForLayer {
        budget: None,
        bucket: None,
        max_attempts: None,
    };
}

/// What the task policy in force says to a call of `layer`.
#[cold]
pub(crate) fn in_force(layer: Layer) -> ScopeForLayer {
    POLICY.with(|p| {
        let policy = p.borrow();
        let Some(policy) = policy.as_ref() else {
            return ScopeForLayer::NONE;
        };
        ScopeForLayer {
            budget: policy.budget,
            bucket: policy.token_bucket(layer).cloned(),
            max_attempts: (layer != Layer::Http)
                .then_some(policy.retry.as_ref())
                .flatten()
                .map(RetryConfig::effective_attempts),
        }
    })
}

/// The task's `retry:` for a loop of `layer`, if one is in force. L1 is set
/// per request: the task's `retry:` never reaches it.
pub(crate) fn retry_in_force(layer: Layer) -> Option<RetryConfig> {
    if layer == Layer::Http {
        return None;
    }
    POLICY.with(|p| p.borrow().as_ref().and_then(|p| p.retry.clone()))
}

/// Runs `fut`, a task's work, with `policy` in force.
///
/// Scopes nest (the innermost wins) and follow `fut` across `.await`s. The
/// policy's `timeout:` bounds the whole of `fut`; its expiry is a
/// [`TimeoutError`] of boundary `Total` at layer `task`.
pub fn scope<F, T, E>(policy: TaskPolicy, fut: F) -> TaskScope<F, E>
where
    F: Future<Output = Result<T, E>>,
    E: From<TimeoutError>,
{
    let deadline = Total::from_now(policy.timeout);
    TaskScope {
        inner: TimeLimited::new(Scoped::new(&POLICY, Some(policy), fut), Layer::Task),
        deadline,
        _error: core::marker::PhantomData,
    }
}

pin_project_lite::pin_project! {
    /// The future [`scope`] returns.
    #[must_use = "futures do nothing unless polled"]
    pub struct TaskScope<F, E> {
        #[pin]
        inner: TimeLimited<Scoped<TaskPolicy, F>>,
        deadline: Option<Total>,
        _error: core::marker::PhantomData<fn() -> E>,
    }
}

impl<F, T, E> Future for TaskScope<F, E>
where
    F: Future<Output = Result<T, E>>,
    E: From<TimeoutError>,
{
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _scoped = context::enter_scope(true);
        this.inner
            .poll_with(cx, this.deadline, &mut None, core::convert::identity, |e| {
                Err(E::from(e))
            })
    }
}

/// Wraps `fut` so that it runs with the task policy and the event observers
/// in force where `carry` is called: for work handed to `tokio::spawn`.
///
/// ```
/// use nika_retry::task::{carry, scope, TaskPolicy};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let policy = TaskPolicy::new().with_budget(4);
/// let out: Result<u32, nika_retry::TimeoutError> = scope(policy, async {
///     let handle = tokio::spawn(carry(async { Ok::<u32, nika_retry::TimeoutError>(7) }));
///     handle.await.unwrap()
/// })
/// .await;
/// assert_eq!(out.unwrap(), 7);
/// # }
/// ```
pub fn carry<F: Future>(fut: F) -> Carried<F> {
    let policy = POLICY.with(|p| p.borrow().clone());
    Carried {
        scoped: policy.is_some(),
        inner: Scoped::new(&POLICY, policy, fut),
        observers: events::current(),
    }
}

/// The task policy in force on this thread right now (for tests and diagnostics).
pub fn current() -> Option<TaskPolicy> {
    POLICY.with(|p| p.borrow().clone())
}

pin_project_lite::pin_project! {
    /// The future [`carry`] returns.
    #[must_use = "futures do nothing unless polled"]
    pub struct Carried<F> {
        #[pin]
        inner: Scoped<TaskPolicy, F>,
        scoped: bool,
        observers: Vec<Arc<dyn RetryObserver>>,
    }
}

impl<F: Future> Future for Carried<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let inner = this.inner;
        let _scoped = context::enter_scope(*this.scoped);
        events::with_observers(this.observers, || inner.poll(cx))
    }
}
